package harness

import (
	"context"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/observer/relayframes"
	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/protocol/observerframe"
	"github.com/buzz-harness/buzz/internal/protocol/ownerauth"
)

// The relay observer (NIP-AO): with an owner known and --relay-observer on (the default), the
// activity feed also goes to the owner as encrypted telemetry frames (relayframes, off the loop),
// and the owner's control frames reach the loop here, checked and answered with control_result.

// subObserver is the subscription of control frames from the owner.
const subObserver = "observer-control"

// frameResults is where control answers go (relayframes.Sender).
type frameResults interface {
	Result(channelID string, payload any)
}

// observerOn: the owner is the only possible reader, so without one there is nobody to send to.
func (h *Harness) observerOn() bool { return !h.cfg.NoRelayObserver && h.cfg.Owner != "" }

// startObserver starts the telemetry sender and subscribes to the owner's control frames.
func (h *Harness) startObserver(ctx context.Context) {
	if !h.observerOn() {
		return
	}
	var auth nostr.Tag
	if tag, err := ownerauth.Parse(h.cfg.AuthTag); err == nil && tag.Owner == h.cfg.Owner {
		auth = tag.NostrTag()
	}
	s := relayframes.Start(ctx, relayframes.Config{AgentSecret: h.cfg.SecretKey, Owner: h.cfg.Owner, AuthTag: auth,
		Clock: h.clock, Liveness: h.cfg.TurnLiveness, Log: h.log}, h.bus, h.live)
	h.frames = s
	h.guard = &observerframe.Guard{Owner: h.cfg.Owner}
	h.tasks.Go(s.Wait)
	h.live.Subscribe(subObserver, nostr.Filter{
		Kinds:   []int{protocol.KindObserverFrame},
		Authors: []string{h.cfg.Owner},
		Tags:    nostr.TagMap{"p": {h.agent}},
	})
	h.log.Info("relay observer on", "owner", h.cfg.Owner, "turn_liveness", h.cfg.TurnLiveness, "auth_tag", auth != nil)
}

// Control results' statuses beyond a setting's own (settingResult.Status).
const (
	controlSent       = "sent"           // cancel_turn: the running turns were told to stop
	controlNoTurn     = "no_active_turn" // cancel_turn: nothing ran in the channel
	controlAnswered   = "answered"       // permission_decision: the question took the option
	controlNoQuestion = "no_pending_request"
	controlRejected   = "rejected" // the frame failed a check: error says which
)

// observerControl takes one control frame from the owner (the loop calls it).
func (h *Harness) observerControl(ctx context.Context, ev *nostr.Event) {
	cmd, err := observerframe.OpenControl(h.cfg.SecretKey, ev)
	if err == nil {
		err = h.guard.Check(ev, h.clock.Now())
	}
	if err != nil {
		h.log.Warn("observer control frame refused", "id", ev.ID, "from", ev.PubKey, "err", err)
		h.frames.Result(cmd.ChannelID, map[string]any{"type": cmd.Type, "status": controlRejected, "error": err.Error(), "frameId": ev.ID})
		return
	}
	h.log.Info("observer control", "type", cmd.Type, "channel", cmd.ChannelID)
	result := func(status string, extra map[string]any) {
		out := map[string]any{"type": cmd.Type, "status": status, "channelId": cmd.ChannelID, "frameId": ev.ID}
		for k, v := range extra {
			out[k] = v
		}
		h.frames.Result(cmd.ChannelID, out)
	}
	switch cmd.Type {
	case observerframe.CancelTurn:
		status := controlNoTurn
		for _, c := range h.convs.running() {
			if cmd.ChannelID == "" || c.key.Channel == cmd.ChannelID {
				c.turn.cancel(errOwnerCancel)
				status = controlSent
			}
		}
		result(status, nil)
	case observerframe.SwitchModel, observerframe.SwitchEffort:
		setting, value := settingModel, cmd.ModelID
		if cmd.Type == observerframe.SwitchEffort {
			setting, value = settingEffort, cmd.Effort
		}
		h.changeSetting(ctx, h.controlConversation(cmd.ChannelID), setting, value, func(res settingResult, sessionID string) {
			extra := map[string]any{"setting": setting, "value": value, "message": settingMessage(res)}
			if sessionID != "" {
				extra["sessionId"] = sessionID
			}
			if res.Error != "" {
				extra["error"] = res.Error
			}
			result(res.Status, extra)
		})
	case observerframe.PermissionDecision:
		result(h.decidePermission(cmd), map[string]any{"requestNonce": cmd.RequestNonce, "optionId": cmd.OptionID})
	}
}

// controlConversation is the conversation a channel-wide control acts on: the channel's
// running turn's, else the oldest one with a live session, else the channel itself.
func (h *Harness) controlConversation(chID string) convKey {
	for _, c := range h.convs.running() {
		if c.key.Channel == chID {
			return c.key
		}
	}
	for k, c := range h.convs.m {
		if k.Channel == chID && len(c.sessions) > 0 {
			return k
		}
	}
	return convKey{Channel: chID}
}

// decidePermission answers the oldest open permission question in the channel that offers the
// option, as the owner's thread reply would.
func (h *Harness) decidePermission(cmd observerframe.Command) string {
	for k, c := range h.convs.m {
		if k.Channel != cmd.ChannelID || len(c.questions) == 0 {
			continue
		}
		w := c.questions[0]
		for _, o := range w.opts {
			if o.OptionID == cmd.OptionID {
				h.convs.update(k, func(c *conversation) { c.questions = c.questions[1:] })
				w.answer <- permChoice{optionID: o.OptionID, decider: h.cfg.Owner}
				return controlAnswered
			}
		}
	}
	return controlNoQuestion
}
