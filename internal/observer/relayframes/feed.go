package relayframes

import (
	"encoding/json"
	"strings"

	"github.com/buzz-harness/buzz/internal/acp"
	"github.com/buzz-harness/buzz/internal/observer"
	"github.com/buzz-harness/buzz/internal/protocol/observerframe"
)

// ToFeed maps a telemetry frame back onto the feed event it was made from (the reverse of the
// translator), so an owner on another machine can show the harness's activity as the
// in-process feed would: agent_initialized, session_resolved, turn_started and the turn's end
// carry their feed payloads; an ACP session/update line becomes the AgentUpdate the harness
// derives from it, a session/prompt to the agent the Prompt card (its text blocks), any other
// ACP line an ACPLine. ok is false for frames the feed has no
// counterpart for (harness_started, turn_liveness, permission_terminal, control_result) and for
// payloads that do not decode.
func ToFeed(e observerframe.Event) (observer.Scope, observer.Payload, bool) {
	sc := observer.Scope{ChannelID: e.ChannelID, SessionID: e.SessionID, TurnID: e.TurnID}
	var p observer.Payload
	var ok bool
	switch e.Kind {
	case observerframe.KindAgentInitialized:
		p, ok = decodeAs[observer.AgentSpawned](e.Payload)
	case observerframe.KindSessionResolved:
		p, ok = decodeAs[observer.SessionResolved](e.Payload)
	case observerframe.KindTurnStarted:
		p, ok = decodeAs[observer.TurnStarted](e.Payload)
	case observerframe.KindTurnCompleted:
		p, ok = decodeAs[observer.TurnEnded](e.Payload)
	case observerframe.KindTurnError:
		var d observer.TurnEnded
		if d, ok = decodeAs[observer.TurnEnded](e.Payload); ok && d.Error == "" {
			d.Error = "turn failed" // the kind says so even when the payload does not
		}
		p = d
	case observerframe.KindACPRead, observerframe.KindACPWrite:
		p, ok = acpLine(e), true
	}
	if !ok {
		return sc, nil, false
	}
	return sc, p, true
}

func decodeAs[T observer.Payload](raw json.RawMessage) (T, bool) {
	var v T
	err := json.Unmarshal(raw, &v)
	return v, err == nil
}

// acpLine is an ACP frame as the feed has it: a session/update from the agent as its
// AgentUpdate, a session/prompt to it as the Prompt, any other line as the raw line. A line the harness could not parse travels as a
// JSON string.
func acpLine(e observerframe.Event) observer.Payload {
	dir := "recv"
	if e.Kind == observerframe.KindACPWrite {
		dir = "send"
	}
	line := string(e.Payload)
	var s string
	if strings.HasPrefix(line, `"`) && json.Unmarshal(e.Payload, &s) == nil {
		line = s
	}
	var m struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(e.Payload, &m) == nil {
		switch {
		case dir == "recv" && m.Method == "session/update":
			u := acp.ParseSessionUpdate(m.Params)
			return observer.AgentUpdate{Kind: u.Kind, Text: u.Text, ToolCallID: u.ToolCallID, Title: u.Title, Status: u.Status}
		case dir == "send" && m.Method == "session/prompt":
			var p struct {
				SessionID string `json:"sessionId"`
				Prompt    []struct {
					Type string `json:"type"`
					Text string `json:"text"`
				} `json:"prompt"`
			}
			if json.Unmarshal(m.Params, &p) == nil {
				blocks := []string{}
				for _, b := range p.Prompt {
					if b.Type == "text" {
						blocks = append(blocks, b.Text)
					}
				}
				return observer.Prompt{SessionID: p.SessionID, Blocks: blocks}
			}
		}
	}
	return observer.ACPLine{Dir: dir, Bytes: len(line), Line: line}
}
