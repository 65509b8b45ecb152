package harness

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/acp"
)

// ownerSetting carries out !model / !mode in the conversation it was typed in and answers with a
// 40099 row: applied (and how), or why not. A value the agent does not offer is refused; one
// that is applied, or cannot be checked yet because no session is open, is kept for the
// conversation's later sessions.
func (h *Harness) ownerSetting(ctx context.Context, setting, value string, c *channel, ev *nostr.Event) {
	k := h.convOf(c, ev)
	if setting == settingMode {
		if w, err := PermissionModeWire(value); err == nil {
			value = w // Claude's names in any spelling; other ids (codex: read-only, …) as typed
		}
	}
	h.log.Info("owner command", "command", "!"+setting, "value", value, "channel", c.ID, "conversation", k.String())
	outcome := map[string]any{"type": setting + "_set", "actor": ev.PubKey, "target": h.agent, "setting": setting, "value": value}
	h.changeSetting(ctx, k, setting, value, func(res settingResult, sessionID string) {
		outcome["status"] = res.Status
		if res.Method != "" {
			outcome["method"] = res.Method
		}
		if res.Error != "" {
			outcome["error"] = res.Error
		}
		if len(res.Available) > 0 {
			outcome["available"] = res.Available
		}
		if sessionID != "" {
			outcome["session"] = sessionID
		}
		outcome["message"] = settingMessage(res)
		pctx, cancel := context.WithTimeout(ctx, settingTimeout+10*time.Second)
		defer cancel()
		h.relay.publish(pctx, outcomeRow(c.ID, ev, outcome, h.clock.Now()))
	})
}

// changeSetting changes an agent setting of conversation k, for !model / !mode and the owner's
// observer control frames, and hands the result to answer on a goroutine of its own. A value the
// agent does not offer is refused; one that is applied, or cannot be checked yet because no
// session is open, is kept for the conversation's later sessions.
func (h *Harness) changeSetting(ctx context.Context, k convKey, setting, value string, answer func(res settingResult, sessionID string)) {
	keep := func() { h.convs.update(k, func(cv *conversation) { cv.settings.set(setting, value) }) }
	proc, sess, known := h.convs.liveSession(k)
	if known == nil { // nothing to check the value against: keep it for when a session opens
		keep()
		h.tasks.Go(func() { answer(settingResult{Setting: setting, Value: value, Status: settingPending}, "") })
		return
	}
	if _, res, ok := resolveSetting(known, "", setting, value); !ok {
		h.tasks.Go(func() { answer(res, "") })
		return
	}
	keep()
	if sess == nil { // checked against another conversation's session of this agent
		h.tasks.Go(func() { answer(settingResult{Setting: setting, Value: value, Status: settingPending}, "") })
		return
	}
	id, state := sess.ID, sess.state
	h.tasks.Go(func() {
		res, err := applySetting(ctx, proc, state, id, setting, value)
		if err != nil {
			// The agent did not answer; the next turn finds out whether it is gone.
			res.Status, res.Error = settingFailed, err.Error()
		}
		h.log.Info("owner setting", "setting", setting, "value", value, "status", res.Status, "error", res.Error, "session", id)
		answer(res, id)
	})
}

// settingPending: no session is open in the conversation; the value applies when one opens.
const settingPending = "pending"

// liveSession finds the conversation's open session and its agent. Without one, known is any
// open session's reported state on these agents (to check a value against), or nil.
func (t *conversations) liveSession(k convKey) (proc *acp.Process, sess *convSession, known *acp.SessionState) {
	if c := t.get(k); c != nil {
		for s, cs := range c.sessions {
			if s.ready && s.proc != nil && cs.state != nil {
				return s.proc, cs, cs.state
			}
		}
	}
	for _, c := range t.m {
		for s, cs := range c.sessions {
			if s.ready && cs.state != nil {
				return nil, nil, cs.state
			}
		}
	}
	return nil, nil, nil
}

// settingMessage says in words what became of an owner's setting.
func settingMessage(r settingResult) string {
	switch r.Status {
	case settingApplied:
		return fmt.Sprintf("%s set to %s", r.Setting, r.Value)
	case settingPending:
		return fmt.Sprintf("%s %s will be applied when this conversation's session opens", r.Setting, r.Value)
	case settingUnknown:
		return fmt.Sprintf("the agent does not offer %s %s (it offers: %s)", r.Setting, r.Value, strings.Join(r.Available, ", "))
	case settingUnsupported:
		return fmt.Sprintf("the agent offers no way to change its %s", r.Setting)
	default:
		return fmt.Sprintf("the agent refused %s %s: %s", r.Setting, r.Value, r.Error)
	}
}
