package harness

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/acp"
	"github.com/buzz-harness/buzz/internal/protocol"
)

// Owner setting commands: "!model <id>" and "!mode <id>" typed by the owner in a conversation
// switch that conversation's session, now if it is open and for every session it opens later.
var ownerSettingCommands = map[string]string{"!model": settingModel, "!mode": settingMode}

// ParseOwnerSetting recognises "!model <id>" or "!mode <id>": a kind-9 event from owner that
// p-tags agent, whose text is the command and one value, with mention text allowed before the
// command or after the value (as for the other owner commands).
func ParseOwnerSetting(ev *nostr.Event, owner, agent string) (setting, value string, ok bool) {
	if owner == "" || ev.Kind != protocol.KindStreamMessage || ev.PubKey != owner || !protocol.Mentioned(ev.Tags, agent) {
		return "", "", false
	}
	words := strings.Fields(ev.Content)
	for i, w := range words {
		setting, known := ownerSettingCommands[w]
		if !known {
			continue
		}
		// Everything before the command, and after its value, must be mention text.
		if i+1 >= len(words) || isMentionWord(words[i+1]) || !mentionsOnly(words[:i]) || !mentionsOnly(words[i+2:]) {
			return "", "", false
		}
		return setting, words[i+1], true
	}
	return "", "", false
}

func isMentionWord(w string) bool { return strings.HasPrefix(w, "@") || strings.HasPrefix(w, "nostr:") }

// mentionsOnly: no words, or words starting with a mention (a display name may span words).
func mentionsOnly(words []string) bool { return len(words) == 0 || isMentionWord(words[0]) }

// ownerSetting carries out !model / !mode in the conversation it was typed in and answers with a
// 40099 row: applied (and how), or why not. A value the agent does not offer is refused; one
// that is applied, or cannot be checked yet because no session is open, is kept for the
// conversation's later sessions.
func (h *Harness) ownerSetting(ctx context.Context, setting, value string, c *channel, ev *nostr.Event) {
	k := h.scopeOf(c, ev)
	if setting == settingMode {
		if w, err := PermissionModeWire(value); err == nil {
			value = w // agents may offer other modes (codex: read-only, …): those go as typed
		}
	}
	h.log.Info("owner command", "command", "!"+setting, "value", value, "channel", c.ID, "scope", k.String())
	outcome := map[string]any{"type": setting + "_set", "actor": ev.PubKey, "target": h.agent, "setting": setting, "value": value}
	answer := func(res settingResult, sessionID string) {
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
		h.relay.publish(pctx, outcomeRow(c.ID, ev, outcome))
	}
	proc, sess, known := h.liveSession(k)
	if known == nil { // nothing to check the value against: keep it for when a session opens
		h.sessions.owner.set(k, setting, value)
		h.tasks.Go(func() { answer(settingResult{Setting: setting, Value: value, Status: settingPending}, "") })
		return
	}
	if _, res, ok := resolveSetting(known, "", setting, value); !ok {
		h.tasks.Go(func() { answer(res, "") })
		return
	}
	h.sessions.owner.set(k, setting, value)
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
func (h *Harness) liveSession(k scopeKey) (proc *acp.Process, sess *chanSession, known *acp.SessionState) {
	for _, s := range h.pool.slots {
		if !s.ready || s.proc == nil {
			continue
		}
		if cs := s.sessions[k]; cs != nil && cs.state != nil {
			return s.proc, cs, cs.state
		}
	}
	for _, s := range h.pool.slots {
		for _, cs := range s.sessions {
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
