package harness

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/buzz-harness/buzz/internal/acp"
	"github.com/buzz-harness/buzz/internal/observer"
	"github.com/buzz-harness/buzz/internal/prompt"
	"github.com/buzz-harness/buzz/internal/sessionstore"
)

const gooseSystemPromptMethod = "_goose/unstable/session/system-prompt/set"

// openSession resumes the channel's remembered session when the agent can (session/resume, else
// session/load), and otherwise creates one. A definite refusal forgets the record and falls back
// to session/new in the same turn; an indeterminate failure (timeout, agent exit) reports
// resumeLost so the loop respawns the agent and tries once more before falling back.
func (h *Harness) openSession(ctx context.Context, in turnInput) (sess *chanSession, goose *bool, resumeLost bool, err error) {
	ch := in.channel
	route := DecideRoute(in.ident)
	standing := h.standing(ctx, ch, true)
	sysText := standing.SystemPrompt(h.cfg.AgentCwd)
	params := acp.SessionParams{Cwd: h.cfg.AgentCwd, Meta: h.sessionMeta(ch, route, sysText)}
	if route == RouteSpecSystemPrompt && sysText != "" {
		params.SystemPrompt = &acp.SystemPrompt{Mode: "append", Content: []acp.ContentBlock{{Type: "text", Text: sysText}}}
	}

	if rec, ok := h.store.Get(ch.ID, h.storeScope()); ok && !in.fresh && !in.noResume && (in.ident.Resume || in.ident.LoadSession) {
		params.SessionID = rec.SessionID
		method := "session/load"
		if in.ident.Resume {
			method = "session/resume"
			err = in.proc.ResumeSession(ctx, params)
		} else {
			err = in.proc.LoadSession(ctx, params)
		}
		var rpc *acp.RPCError
		switch {
		case err == nil:
			_ = h.store.Touch(ch.ID, h.now())
			sess = &chanSession{ID: rec.SessionID, Route: route, Delivered: map[string]bool{}, Resumed: true, opening: &standing}
			h.emitSession(in, sess, observer.SessionResumed{SessionID: rec.SessionID, Method: method})
			if route.SystemRole() && route != RouteGoose && sysText != "" {
				h.emitSystemPrompt(in, sess, standing, nil)
			}
			return sess, nil, false, nil
		case errors.As(err, &rpc):
			h.log.Info("resume refused; starting a new session", "channel", ch.ID, "session", rec.SessionID, "err", err)
			_ = h.store.Remove(ch.ID)
			h.emitSession(in, nil, observer.SessionResumeFailed{SessionID: rec.SessionID, Reason: err.Error()})
		case ctx.Err() != nil:
			return nil, nil, false, ctx.Err()
		case !in.retried:
			h.emitSession(in, nil, observer.SessionResumeFailed{SessionID: rec.SessionID, Reason: err.Error(), Retry: true})
			return nil, nil, true, err
		default:
			h.log.Warn("resume failed twice; starting a new session", "channel", ch.ID, "err", err)
			_ = h.store.Remove(ch.ID)
			h.emitSession(in, nil, observer.SessionResumeFailed{SessionID: rec.SessionID, Reason: err.Error()})
			return nil, nil, false, err // the agent is gone; the loop respawns and the retry opens a new session
		}
		params.SessionID = ""
	}

	if in.fresh {
		params.Meta["freshSession"] = true
	}
	id, err := in.proc.NewSession(ctx, params)
	if err != nil {
		return nil, nil, false, err
	}
	sess = &chanSession{ID: id, Route: route, Delivered: map[string]bool{}, opening: &standing}
	if route == RouteGoose && sysText != "" {
		err := in.proc.Call(ctx, gooseSystemPromptMethod, map[string]any{
			"sessionId": id, "mode": "append", "key": "buzz", "text": sysText}, nil)
		var rpc *acp.RPCError
		switch {
		case err == nil:
			ok := true
			goose = &ok
		case errors.As(err, &rpc) && rpc.Code == acp.CodeMethodNotFound:
			no := false
			goose = &no
			sess.Route = RouteUserMessage
		default:
			return nil, nil, false, fmt.Errorf("goose system prompt: %w", err) // an agent error: keep the agent
		}
	}
	now := h.now()
	if err := h.store.Put(ch.ID, sessionstore.Record{
		SessionID: id, RelayURL: h.cfg.RelayURL, AgentCommand: h.commandLine(), CreatedAt: now, LastUsedAt: now,
	}); err != nil {
		h.log.Warn("session store", "err", err)
	}
	h.emitSession(in, sess, observer.SessionResolved{SessionID: id, IsNewSession: true})
	if sess.Route.SystemRole() && sysText != "" {
		h.emitSystemPrompt(in, sess, standing, nil)
	}
	if h.cfg.InitialMessage != "" {
		if err := h.initialMessage(ctx, in, sess, standing); err != nil {
			return nil, goose, false, err
		}
	}
	return sess, goose, false, nil
}

// initialMessage sends --initial-message as its own first prompt of a new session, with the
// standing sections in front for user-message agents (which then count as briefed).
func (h *Harness) initialMessage(ctx context.Context, in turnInput, sess *chanSession, standing prompt.Standing) error {
	body := h.cfg.InitialMessage
	if !sess.Route.SystemRole() {
		body = prompt.PrependStanding(standing, body)
	}
	blocks := []acp.ContentBlock{{Type: "text", Text: body}}
	if !sess.Route.SystemRole() {
		h.emitSystemPrompt(in, sess, standing, nil)
	}
	_, err := in.proc.Prompt(ctx, sess.ID, blocks, acp.PromptOptions{
		IdleTimeout: h.cfg.IdleTimeout, HardTimeout: h.cfg.MaxTurnDuration, CancelGrace: h.cfg.CancelGrace})
	if err == nil && !sess.Route.SystemRole() {
		sess.StandingSent = true
	}
	return err
}

// sessionMeta is the one _meta object of session/new (and load/resume): title, channel identity
// and, for claude-agent-acp, the system prompt.
func (h *Harness) sessionMeta(ch channel, route Route, sysText string) map[string]any {
	meta := map[string]any{}
	if t := h.sessionTitle(ch); t != "" {
		meta["sessionTitle"] = t
	}
	meta["channelId"] = ch.ID
	if ch.Type != "unknown" && ch.Type != "" {
		meta["channelType"] = ch.Type
	}
	if route == RouteClaudeMeta && sysText != "" {
		meta["systemPrompt"] = map[string]any{"append": sysText}
	}
	return meta
}

// sessionTitle is "<agent> · #<channel>" (bare agent name for DMs and unnamed channels), ≤80 chars.
func (h *Harness) sessionTitle(ch channel) string {
	name := strings.TrimSpace(h.cfg.SessionTitle)
	if name == "" {
		name = "buzz-acp"
	}
	t := name
	if ch.Type != "dm" && ch.Name != "" && ch.Name != "unknown" {
		t = name + " · #" + ch.Name
	}
	if r := []rune(t); len(r) > 80 {
		t = string(r[:80])
	}
	return t
}

func (h *Harness) commandLine() string {
	return strings.Join(append([]string{h.cfg.AgentCommand}, h.cfg.AgentArgs...), " ")
}

func (h *Harness) emitSession(in turnInput, sess *chanSession, p observer.Payload) {
	sid := ""
	if sess != nil {
		sid = sess.ID
	}
	h.bus.Publish(observer.Scope{ChannelID: in.channel.ID, SessionID: sid, TurnID: in.turnID}, p)
}

// emitSystemPrompt publishes the standing context a session was given, split into its sections,
// whichever route carried it (for user-message agents, from the prompt's leading blocks).
func (h *Harness) emitSystemPrompt(in turnInput, sess *chanSession, standing prompt.Standing, blocks []string) {
	var secs []prompt.Section
	text := ""
	if blocks != nil {
		secs = prompt.ParseStandingBlocks(blocks)
		parts := make([]string, len(secs))
		for i, s := range secs {
			parts[i] = s.Text
		}
		text = strings.Join(parts, "\n\n")
	} else {
		text = standing.SystemPrompt(h.cfg.AgentCwd)
		secs = prompt.ParseStandingSections(text)
	}
	out := make([]observer.PromptSection, len(secs))
	for i, s := range secs {
		out[i] = observer.PromptSection{Label: s.Label, Body: s.Body}
	}
	h.emitSession(in, sess, observer.SystemPrompt{Route: string(sess.Route), Text: text, Sections: out})
}

// maxFeedText caps text copied into the activity feed: an agent may write lines of any size, and
// the feed is for reading, not archiving.
const maxFeedText = 64 << 10

func clip(s string) string {
	if len(s) <= maxFeedText {
		return s
	}
	return s[:maxFeedText] + fmt.Sprintf("… [%d bytes cut]", len(s)-maxFeedText)
}

// onLine records every raw ACP line (secrets redacted, long lines clipped) on the activity feed.
func (h *Harness) onLine(l acp.Line) {
	line := string(l.Data)
	if len(line) > maxFeedText {
		line = line[:maxFeedText] // redact only what is kept
	}
	h.bus.Publish(observer.Scope{}, observer.ACPLine{Dir: string(l.Dir), Bytes: len(l.Data), Line: observer.Redact(line) + cutNote(len(l.Data))})
}

func cutNote(n int) string {
	if n <= maxFeedText {
		return ""
	}
	return fmt.Sprintf("… [%d bytes cut]", n-maxFeedText)
}

// onUpdate turns session/update notifications into activity; replayed history is marked.
func (h *Harness) onUpdate(u acp.SessionUpdate) {
	h.bus.Publish(observer.Scope{SessionID: u.SessionID}, observer.AgentUpdate{Kind: u.Kind, Replay: u.Replay,
		Text: clip(u.Text), ToolCallID: u.ToolCallID, Title: u.Title, Status: u.Status})
}
