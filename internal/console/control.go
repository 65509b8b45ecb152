package console

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/buzz-harness/buzz/internal/observer/relayframes"
	"github.com/buzz-harness/buzz/internal/protocol/observerframe"
)

// controlTimeout bounds one control exchange: publishing the frame and the agent's
// control_result (a model switch may wait for the agent's session/set_model answer).
const controlTimeout = 20 * time.Second

// controlReq is the body of POST /api/control: the Stop button (cancel_turn) and the model
// and effort fields. The console answers permission questions through the thread instead.
type controlReq struct {
	Type      string `json:"type"`
	ChannelID string `json:"channelId"`
	Model     string `json:"model,omitempty"`
	Effort    string `json:"effort,omitempty"`
}

// command checks the request and makes it a control frame's payload.
func (r controlReq) command() (observerframe.Command, error) {
	c := observerframe.Command{Type: r.Type, ChannelID: r.ChannelID}
	if r.ChannelID == "" || len(r.ChannelID) > 128 {
		return c, errors.New("channelId: want the channel's id")
	}
	switch r.Type {
	case observerframe.CancelTurn:
	case observerframe.SwitchModel:
		if c.ModelID = r.Model; r.Model == "" || len(r.Model) > 256 {
			return c, errors.New("model: want a model id")
		}
	case observerframe.SwitchEffort:
		if c.Effort = r.Effort; r.Effort == "" || len(r.Effort) > 64 {
			return c, errors.New("effort: want an effort level")
		}
	default:
		return c, errors.New(`type: want "cancel_turn", "switch_model" or "switch_effort"`)
	}
	return c, nil
}

// control sends one control frame to the agent as its owner and answers with the agent's
// control_result payload (the same path whether the harness runs in this process or not).
func (s *Server) control(w http.ResponseWriter, r *http.Request) {
	if s.owner == nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no agent to control: the console needs the owner's key and the agent"})
		return
	}
	var req controlReq
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 8<<10)).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "bad request body: " + err.Error()})
		return
	}
	cmd, err := req.command()
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), controlTimeout)
	defer cancel()
	res, err := s.owner.Control(ctx, cmd)
	switch {
	case errors.Is(err, relayframes.ErrNoResult):
		writeJSON(w, http.StatusGatewayTimeout, map[string]string{"error": "the agent did not answer the control frame in time (is its harness running, with the relay observer on?)"})
	case err != nil:
		writeJSON(w, http.StatusBadGateway, map[string]string{"error": err.Error()})
	default:
		writeJSON(w, http.StatusOK, res.Payload)
	}
}
