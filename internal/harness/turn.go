package harness

import (
	"cmp"
	"context"
	"errors"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/acp"
	"github.com/buzz-harness/buzz/internal/observer"
	"github.com/buzz-harness/buzz/internal/prompt"
	"github.com/buzz-harness/buzz/internal/sessionstore"
)

// turnInput is everything a turn goroutine needs; it touches nothing else of the harness's state.
type turnInput struct {
	slot    *slot
	proc    *acp.Process
	ident   AgentIdentity
	channel channel
	batch   *Batch
	session *chanSession // nil: open one (resume, load or new)
	retried bool         // an indeterminate resume already cost one respawn
	fresh   bool         // the owner rotated: _meta.freshSession on session/new
	// noResume: another agent process holds this channel's session live; resuming the same id
	// here would fork the conversation, so this agent opens its own.
	noResume bool
	turnID   string
	// heartbeat: a scheduled prompt on the slot's heartbeat session, not a channel batch.
	heartbeat bool
}

// turnResult is what a turn reports back to the loop.
type turnResult struct {
	in         turnInput
	session    *chanSession // the session used (nil if none could be opened)
	gooseProbe *bool
	stop       string // stopReason when the prompt returned
	delivered  []string
	standing   bool // standing context went out in this prompt's user message
	err        error
	cause      error // why the turn's context was cancelled, if it was
	resumeLost bool  // resume failed indeterminately: respawn and retry once
	answered   bool  // the turn failed, but the agent's reply had already landed
}

// dispatch starts turns while there is ready work and an idle agent.
func (h *Harness) dispatch(ctx context.Context) {
	for ctx.Err() == nil && h.idleSlot() {
		b, ok := h.queue.Next(h.now())
		if !ok {
			return
		}
		c := h.channels[b.ChannelID]
		if c == nil { // left while queued
			h.queue.Drop(b.ChannelID)
			continue
		}
		s := h.claim(b.ChannelID)
		in := turnInput{
			slot: s, proc: s.proc, ident: s.ident, channel: *c, batch: b,
			session: s.sessions[b.ChannelID],
			turnID:  b.Last().ID[:12],
		}
		if in.session == nil {
			in.fresh = h.store.TakeFresh(c.ID)
			in.retried = h.resumeRetried[c.ID]
			for _, o := range h.slots {
				if _, ok := o.sessions[c.ID]; ok && o != s {
					in.noResume = true
				}
			}
		}
		s.busy = true
		tctx, cancel := context.WithCancelCause(ctx)
		h.inflight[c.ID] = cancel
		go func() {
			r := h.runTurn(tctx, in)
			r.cause = context.Cause(tctx)
			if r.cause == context.Canceled || errors.Is(r.cause, ctx.Err()) && ctx.Err() != nil {
				r.cause = errShutdown
			}
			cancel(nil)
			h.results <- r
		}()
	}
}

// runTurn opens (or reuses) the channel's session, renders the prompt and runs it.
func (h *Harness) runTurn(ctx context.Context, in turnInput) (r turnResult) {
	r.in = in
	start := h.now()
	// Durable before the agent sees the batch: after a crash this says a reply may exist.
	if err := h.jrnl.InFlight(start, in.batch.IDs()...); err != nil {
		h.log.Warn("journal", "err", err)
	}
	h.emit(in, "turn_started", map[string]any{"events": in.batch.IDs(), "attempt": in.batch.Attempt})
	sess := in.session
	if sess == nil {
		var err error
		sess, r.gooseProbe, r.resumeLost, err = h.openSession(ctx, in)
		if err != nil {
			r.err = err
			return r
		}
	}
	r.session = sess

	rendered := h.renderTurn(ctx, in, sess)
	blocks := make([]acp.ContentBlock, len(rendered.Blocks))
	for i, b := range rendered.Blocks {
		blocks[i] = acp.ContentBlock{Type: "text", Text: b}
	}
	if rendered.Stats.StandingIncluded {
		h.emitSystemPrompt(in, sess, prompt.Standing{}, rendered.Blocks)
	}
	h.emit(in, "prompt_context_delivery", map[string]any{
		"route":                   sess.Route,
		"promptBytes":             rendered.Stats.PromptBytes,
		"standingContextIncluded": rendered.Stats.StandingIncluded,
		"eventDeltaCount":         rendered.Stats.EventDeltaCount,
		"contextComplete":         rendered.ContextComplete,
	})
	h.emit(in, "prompt", map[string]any{"sessionId": sess.ID, "blocks": rendered.Blocks})

	res, err := in.proc.Prompt(ctx, sess.ID, blocks, acp.PromptOptions{
		IdleTimeout: h.cfg.IdleTimeout, HardTimeout: h.cfg.MaxTurnDuration, CancelGrace: h.cfg.CancelGrace,
	})
	dur := h.now().Sub(start)
	if err != nil && isTransport(err) && ctx.Err() == nil {
		// The agent died or timed out; its reply may already be in the channel. Kill its whole
		// process group first, so no straggler (a `buzz` call still running) posts after we look.
		_ = in.proc.Kill()
		r.answered = h.answered(context.WithoutCancel(ctx), in.channel.ID, in.batch.Events(), start)
	}
	if err != nil {
		r.err = err
		h.emit(in, "turn_ended", map[string]any{"error": err.Error(), "durationMs": dur.Milliseconds()})
		return r
	}
	r.stop = res.StopReason
	r.delivered = rendered.DeliveredIDs
	r.standing = rendered.Stats.StandingIncluded
	h.emit(in, "turn_ended", map[string]any{"stopReason": res.StopReason, "durationMs": dur.Milliseconds(), "usage": res.Usage})
	return r
}

// finishTurn applies a turn's outcome: commit delivery, requeue or dead-letter, respawn.
func (h *Harness) finishTurn(ctx context.Context, r turnResult) {
	if r.in.heartbeat {
		h.finishHeartbeat(r)
		return
	}
	in := r.in
	s, ch := in.slot, in.channel.ID
	delete(h.inflight, ch)
	delete(h.resumeRetried, ch)
	s.busy = false
	if r.gooseProbe != nil {
		s.ident.GooseProbe = r.gooseProbe
	}
	// Keep the session the turn used or opened while its agent is usable; the outcomes below
	// drop it where the session must not be reused.
	if r.session != nil && !isTransport(r.err) && s.sessions != nil {
		s.sessions[ch] = r.session
	}

	stopped := r.cause != nil && r.cause != errShutdown // owner cancel, rotate, or the channel was left
	switch {
	case stopped || h.removed[ch] || h.channels[ch] == nil:
		// The batch is dropped and the session not reused, whatever the agent answered.
		h.queue.Drop(ch)
		h.done(in.batch.IDs()...)
		s.invalidateChannel(ch, false)
		if isTransport(r.err) && !errors.Is(r.err, context.Canceled) {
			h.crashed(s)
		}
		if h.channels[ch] == nil {
			_ = h.store.Remove(ch) // a turn's Put may have raced the leave
		}
		h.log.Info("turn stopped", "channel", ch, "why", cmp.Or(r.cause, errLeft))
	case r.err == nil:
		h.queue.Complete(ch)
		h.done(in.batch.IDs()...)
		sess := r.session
		sess.Turns++
		if r.standing {
			sess.StandingSent = true
		}
		for _, id := range r.delivered {
			sess.Delivered[id] = true
		}
		rotate := r.stop == "max_tokens" || r.stop == "max_turn_requests" ||
			h.cfg.MaxTurnsPerSession > 0 && sess.Turns >= h.cfg.MaxTurnsPerSession
		if rotate {
			s.invalidateChannel(ch, false)
			_ = h.store.Remove(ch)
		} else {
			go h.store.Touch(ch, h.now()) // may write the file (once a minute): not on the loop
		}
		h.log.Info("turn done", "channel", ch, "stopReason", r.stop, "session", sess.ID)
	case r.answered:
		// The agent died after replying: respawn it, but do not prompt the batch again.
		h.log.Warn("agent failed after replying; not retrying the batch", "channel", ch, "err", r.err)
		h.queue.Complete(ch)
		h.done(in.batch.IDs()...)
		h.crashed(s)
	case r.resumeLost && !in.retried:
		// The agent died or timed out during resume: respawn it and try once more, at no cost.
		h.resumeRetried[ch] = true
		h.queue.Return(in.batch)
		h.crashed(s)
	default:
		h.log.Warn("turn failed", "channel", ch, "attempt", in.batch.Attempt+1, "err", r.err)
		if isTransport(r.err) {
			h.crashed(s) // an agent error (JSON-RPC) keeps the agent and its session
		}
		if wait, ok := quotaReset(r.err.Error()); ok && in.batch.QuotaWaits < maxQuotaWaits {
			wait = max(wait, retryBase)
			h.log.Warn("agent named a quota reset; waiting for it", "channel", ch, "wait", wait)
			h.queue.RequeueAt(in.batch, h.now().Add(wait))
			break
		}
		if h.queue.Requeue(in.batch, h.now()) {
			h.deadLetter(ctx, in, r.err)
			h.done(in.batch.IDs()...)
		}
	}
	h.returnSlot(s)
	h.poke()
}

// returnSlot applies what happened while the slot was busy: session drops deferred by rotate or
// leave, and an agent process that died after its turn answered.
func (h *Harness) returnSlot(s *slot) {
	for c := range s.pending {
		delete(s.sessions, c)
	}
	s.pending = nil
	for c := range h.removed {
		delete(s.sessions, c)
	}
	if s.proc != nil && s.ready {
		select {
		case <-s.proc.Exited():
			h.log.Warn("agent exited during its turn; respawning", "slot", s.idx)
			h.crashed(s)
		default:
		}
	}
}

// isTransport reports failures that leave the agent process unusable: it is killed and respawned.
func isTransport(err error) bool {
	if err == nil {
		return false
	}
	var rpc *acp.RPCError
	return !errors.As(err, &rpc)
}

// deadLetter tells the channel that the batch could not be processed.
func (h *Harness) deadLetter(ctx context.Context, in turnInput, err error) {
	last := in.batch.Last()
	reason := "unknown error"
	if err != nil {
		reason = err.Error()
	}
	h.log.Error("dead letter", "channel", in.channel.ID, "events", len(in.batch.Items), "err", reason)
	notice := &nostr.Event{
		Kind: 9,
		Content: "⚠️ I couldn't process the last request after several attempts (" + reason +
			"). Please re-send it, or ask my owner to check on me.",
		Tags:      append(nostr.Tags{{"h", in.channel.ID}}, threadTags(last)...),
		CreatedAt: nostr.Now(),
	}
	h.emit(in, "dead_letter", map[string]any{"events": in.batch.IDs(), "reason": reason})
	go func() {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		h.publish(pctx, notice)
	}()
}

func (h *Harness) storeScope() sessionstore.Scope {
	return sessionstore.Scope{RelayURL: h.cfg.RelayURL, AgentCommand: h.commandLine()}
}

func (h *Harness) emit(in turnInput, typ string, data any) {
	sid := ""
	if in.session != nil {
		sid = in.session.ID
	}
	h.bus.Publish(observer.Event{Type: typ, ChannelID: in.channel.ID, SessionID: sid, TurnID: in.turnID, Data: data})
}
