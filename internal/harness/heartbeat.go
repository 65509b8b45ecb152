package harness

import (
	"context"
	"errors"

	"github.com/buzz-harness/buzz/internal/acp"
	"github.com/buzz-harness/buzz/internal/observer"
	"github.com/buzz-harness/buzz/internal/prompt"
)

// heartbeat runs one heartbeat prompt when nothing else is waiting: events always go first, all
// agents busy means skip, and at most one heartbeat is ever in flight. Unless HeartbeatAlways,
// it first looks whether anything is new for the agent (heartbeat_cursor.go) and prompts only
// then.
func (h *Harness) heartbeat(ctx context.Context) {
	if h.heartbeatBusy || h.convs.Pending() {
		return
	}
	if !h.cfg.HeartbeatAlways {
		h.peekHeartbeat(ctx)
		return
	}
	h.startHeartbeat(ctx)
}

// startHeartbeat prompts the heartbeat session of an idle agent, if there is one.
func (h *Harness) startHeartbeat(ctx context.Context) {
	s := h.pool.claim(h.convs, convKey{})
	if s == nil {
		return
	}
	s.busy = true
	h.heartbeatBusy = true
	in := turnInput{slot: s, proc: s.proc, ident: s.ident, session: s.heartbeat, heartbeat: true, turnID: "heartbeat"}
	h.tasks.Go(func() { h.inbox.report(ctx, h.runHeartbeat(ctx, in)) })
}

// runHeartbeat prompts the slot's heartbeat session (created on first use, with no channel
// identity, core memory or canvas). Agents on the user-message route get [Base] on the first
// successful heartbeat of that session only.
func (h *Harness) runHeartbeat(ctx context.Context, in turnInput) (r turnResult) {
	r.in = in
	standing := h.relay.standing(ctx, channel{}, false)
	sess := in.session
	if sess == nil {
		route := DecideRoute(in.ident)
		if route == RouteGoose { // the probe is per channel session; heartbeats keep it simple
			route = RouteUserMessage
		}
		spec := sessionSpec{route: route, system: standing.SystemPrompt(h.cfg.AgentCwd), mcpHTTP: in.ident.MCPHTTP}
		id, state, err := in.proc.NewSessionState(ctx, h.sessions.params(spec))
		if err != nil {
			r.err = err
			return r
		}
		sess = &convSession{ID: id, Route: route, Delivered: map[string]bool{}, state: state}
		if r.err = h.sessions.applyOnOpen(ctx, in.proc, h.cfg.settings(), sess); r.err != nil {
			return r
		}
	}
	r.session = sess
	var withBase *prompt.Standing
	if sess.Route == RouteUserMessage && !sess.StandingSent {
		withBase = &standing
	}
	texts := prompt.RenderHeartbeat(h.cfg.HeartbeatPrompt, withBase, h.clock.Now())
	blocks := make([]acp.ContentBlock, len(texts))
	for i, t := range texts {
		blocks[i] = acp.ContentBlock{Type: "text", Text: t}
	}
	h.feed.emit(in, observer.Prompt{SessionID: sess.ID, Blocks: texts, Heartbeat: true})
	res, err := in.proc.Prompt(ctx, sess.ID, blocks, h.cfg.promptOptions())
	if err != nil {
		r.err = err
		return r
	}
	r.stop = res.StopReason
	r.standing = withBase != nil
	return r
}

// finishHeartbeat keeps the heartbeat session on success and respawns the agent on transport errors.
func (h *Harness) finishHeartbeat(r turnResult) {
	s := r.in.slot
	s.busy, s.usedAt = false, h.clock.Now()
	h.heartbeatBusy = false
	switch {
	case r.err == nil:
		if r.standing {
			r.session.StandingSent = true
		}
		s.heartbeat = r.session
		if r.stop == "max_tokens" || r.stop == "max_turn_requests" {
			s.heartbeat = nil
		}
	case isTransport(r.err) && !errors.Is(r.err, context.Canceled):
		h.log.Warn("heartbeat failed; respawning agent", "slot", s.idx, "err", r.err)
		h.crashed(s)
	default:
		h.log.Warn("heartbeat failed", "slot", s.idx, "err", r.err)
		s.heartbeat = nil
	}
	h.checkSlot(s)
	h.inbox.poke()
}
