package harness

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/buzz-harness/buzz/internal/acp"
	"github.com/buzz-harness/buzz/internal/observer"
	"github.com/buzz-harness/buzz/internal/prompt"
)

// turnInput is everything a turn goroutine needs; it touches nothing else of the harness's state.
type turnInput struct {
	slot    *slot
	proc    *acp.Process
	ident   AgentIdentity
	channel channel
	scope   scopeKey // the conversation the batch belongs to
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
	// live is the loop's handle on the turn (steer.go); the turn only sets its session id.
	live *liveTurn
}

// turnResult is what a turn reports back to the loop.
type turnResult struct {
	in         turnInput
	session    *chanSession // the session used (nil if none could be opened)
	gooseProbe ProbeState   // what opening a goose session found (ProbeUnknown: not probed)
	stop       string       // stopReason when the prompt returned
	delivered  []string
	standing   bool            // standing context went out in this prompt's user message
	err        error           // errResumeLost: respawn the agent and try the resume once more
	cause      error           // why the turn's context was cancelled, if it was
	answered   bool            // the turn failed, but the agent's reply had already landed
	usage      json.RawMessage // the prompt response's usage, if the agent reported any
	started    time.Time
}

// dispatch starts turns while there is ready work and an idle agent. A conversation whose last
// turn ended in the current second waits for the next one (turnEnds), and is woken for it.
func (h *Harness) dispatch(ctx context.Context) {
	for ctx.Err() == nil && h.pool.idle() {
		now := h.now()
		held := false
		b, ok := h.queue.NextWhere(now, func(k scopeKey) bool {
			if h.turnEnds.ownSecond(k, now) {
				return true
			}
			held = true
			return false
		})
		if next := now.Truncate(time.Second).Add(time.Second); held && h.turnEnds.wakeAt.Before(next) {
			h.turnEnds.wakeAt = next
			time.AfterFunc(next.Sub(now), h.poke)
		}
		if !ok {
			return
		}
		k := b.Scope
		c := h.channels[k.channelID()]
		if c == nil { // left while queued
			h.queue.Drop(k)
			continue
		}
		s := h.pool.claim(k)
		in := turnInput{
			slot: s, proc: s.proc, ident: s.ident, channel: *c, scope: k, batch: b,
			session: s.sessions[k],
			turnID:  b.Last().ID[:12],
		}
		if in.session == nil {
			h.pool.makeRoom(ctx, s)
			in.fresh = h.store.TakeFresh(k.String())
			in.retried = h.resumeRetried[k]
			in.noResume = h.pool.heldElsewhere(k, s)
		}
		h.startTurn(ctx, in)
	}
}

// startTurn runs a turn on its own goroutine with exclusive use of the slot; the result comes
// back to the loop on h.results.
func (h *Harness) startTurn(ctx context.Context, in turnInput) {
	in.slot.busy = true
	tctx, cancel := context.WithCancelCause(ctx)
	h.inflight[in.scope] = cancel
	in.live = &liveTurn{proc: in.proc, steerable: in.ident.Steering, startedAt: h.now()}
	in.live.ownSecond = h.turnEnds.ownSecond(in.scope, in.live.startedAt)
	h.turns[in.scope] = in.live
	h.ack.turnStarted(in.scope, in.channel.ID, in.batch.Last())
	h.tasks.Go(func() {
		r := h.runTurn(tctx, in)
		r.cause = context.Cause(tctx)
		if r.cause == context.Canceled || errors.Is(r.cause, ctx.Err()) && ctx.Err() != nil {
			r.cause = errShutdown
		}
		cancel(nil)
		h.report(ctx, r)
	})
}

// report hands a turn's result to the loop (nobody listens once the run is over).
func (h *Harness) report(ctx context.Context, r turnResult) {
	select {
	case h.results <- r:
	case <-ctx.Done():
	}
}

// runTurn opens (or reuses) the channel's session, renders the prompt and runs it.
func (h *Harness) runTurn(ctx context.Context, in turnInput) (r turnResult) {
	r.in = in
	start := in.live.startedAt
	r.started = start
	// Durable before the agent sees the batch: after a crash this says a reply may exist.
	if err := h.jrnl.InFlight(start, in.live.ownSecond, in.batch.IDs()...); err != nil {
		h.log.Warn("journal", "err", err)
	}
	h.emit(in, observer.TurnStarted{Events: in.batch.IDs(), Attempt: in.batch.Attempt})
	sess := in.session
	if sess == nil {
		var err error
		sess, r.gooseProbe, err = h.sessions.open(ctx, in)
		if err != nil {
			r.err = err
			return r
		}
	}
	r.session = sess
	defer h.asker.track(ctx, sess.ID, in)() // --permissions ask finds the turn's thread by session

	rendered, stale := h.relay.renderTurn(ctx, in, sess)
	if len(stale) > 0 {
		// Their old labels are in this prompt; the new ones are fetched while the agent works.
		var refresh sync.WaitGroup
		defer refresh.Wait()
		refresh.Go(func() { h.relay.refreshProfiles(ctx, stale) })
	}
	blocks := make([]acp.ContentBlock, len(rendered.Blocks))
	for i, b := range rendered.Blocks {
		blocks[i] = acp.ContentBlock{Type: "text", Text: b}
	}
	if rendered.Stats.StandingIncluded {
		h.emitSystemPrompt(in, sess, prompt.Standing{}, rendered.Blocks)
	}
	h.emit(in, observer.PromptContextDelivery{
		Route:                   string(sess.Route),
		PromptBytes:             rendered.Stats.PromptBytes,
		StandingContextIncluded: rendered.Stats.StandingIncluded,
		EventDeltaCount:         rendered.Stats.EventDeltaCount,
		ContextIncomplete:       rendered.ContextIncomplete,
	})
	h.emit(in, observer.Prompt{SessionID: sess.ID, Blocks: rendered.Blocks})
	in.live.session.Store(&sess.ID) // from here a native steer can reach this turn

	res, err := in.proc.Prompt(ctx, sess.ID, blocks, h.cfg.promptOptions())
	dur := h.now().Sub(start)
	if err != nil && isTransport(err) && ctx.Err() == nil {
		// The agent died or timed out; its reply may already be in the channel. Kill its whole
		// process group first, so no straggler (a `buzz` call still running) posts after we look.
		_ = in.proc.Kill()
		r.answered = h.answeredAfterKill(ctx, in, start)
	}
	if err != nil {
		r.err = err
		h.emit(in, observer.TurnEnded{Error: err.Error(), DurationMs: dur.Milliseconds()})
		return r
	}
	r.stop = res.StopReason
	if r.stop == "cancelled" && errors.Is(context.Cause(ctx), errMerge) {
		// Cancelled to merge a new message: if the reply already landed, the batch is answered
		// and only the new message goes next (it must not be answered twice).
		r.answered = h.relay.answered(context.WithoutCancel(ctx), in.channel.ID, in.batch.Events(), start, in.live.ownSecond)
	}
	r.usage = res.Usage
	r.delivered = rendered.DeliveredIDs
	r.standing = rendered.Stats.StandingIncluded
	h.emit(in, observer.TurnEnded{StopReason: res.StopReason, DurationMs: dur.Milliseconds(), Usage: res.Usage})
	return r
}

// turnOutcome is what a finished turn means for its batch, session and agent.
type turnOutcome int

const (
	turnStopped      turnOutcome = iota // owner cancel, rotate or leave: drop the batch and the session
	turnDone                            // answered: commit delivery
	turnAnsweredLate                    // the agent failed after its reply landed: respawn, do not retry
	turnResumeLost                      // resume failed indeterminately: respawn and try once more
	turnFailed                          // retry with backoff (or a named quota wait); dead-letter at the limit
	turnMerged                          // cancelled for a new message: its events lead the next batch
)

// decideOutcome classifies a turn's result; left: the agent is no longer in the channel.
func decideOutcome(r turnResult, left bool) turnOutcome {
	stopped := r.cause != nil && r.cause != errShutdown // owner cancel, rotate, or the channel was left
	switch {
	case errors.Is(r.cause, errMerge) && !left:
		return turnMerged
	case stopped || left:
		return turnStopped
	case r.err == nil:
		return turnDone
	case r.answered:
		return turnAnsweredLate
	case errors.Is(r.err, errResumeLost):
		return turnResumeLost
	default:
		return turnFailed
	}
}

// finishTurn applies a turn's outcome: commit delivery, requeue or dead-letter, respawn.
func (h *Harness) finishTurn(ctx context.Context, r turnResult) {
	if r.in.heartbeat {
		h.finishHeartbeat(r)
		return
	}
	s, k := r.in.slot, r.in.scope
	t := h.turns[k]
	delete(h.turns, k)
	h.turnEnds.ended(k, h.now())
	absorbSteered(&r, t)
	h.publishTurnMetric(ctx, r)
	outcome := decideOutcome(r, h.removed[k.channelID()] || h.channels[k.channelID()] == nil)
	ended := r.in.batch.IDs()
	if outcome == turnMerged {
		ended = nil // the conversation's work goes on: its 👀 stay
	}
	h.ack.turnEnded(k, ended)
	delete(h.inflight, k)
	delete(h.resumeRetried, k)
	s.busy = false
	if r.gooseProbe != ProbeUnknown {
		s.ident.GooseProbe = r.gooseProbe
	}
	// Keep the session the turn used or opened while its agent is usable; the outcomes below
	// drop it where the session must not be reused.
	if r.session != nil && !isTransport(r.err) && s.sessions != nil {
		r.session.lastUsed = h.now()
		s.sessions[k] = r.session
	}
	switch outcome {
	case turnMerged:
		h.carryTurn(r, t)
	case turnStopped:
		h.dropTurn(r)
	case turnDone:
		h.commitTurn(r)
	case turnAnsweredLate:
		h.closeAnsweredTurn(r)
	case turnResumeLost:
		h.retryResume(r)
	case turnFailed:
		h.retryTurn(ctx, r)
	}
	h.returnSlot(s)
	h.poke()
}

// dropTurn ends a stopped turn: the batch is dropped and the session not reused, whatever the
// agent answered.
func (h *Harness) dropTurn(r turnResult) {
	s, k := r.in.slot, r.in.scope
	h.queue.Drop(k)
	h.done(r.in.batch.IDs()...)
	s.invalidate(k, false)
	if isTransport(r.err) && !errors.Is(r.err, context.Canceled) {
		h.crashed(s)
	}
	if h.channels[k.channelID()] == nil {
		_ = h.store.Remove(k.String()) // a turn's Put may have raced the leave
	}
	h.log.Info("turn stopped", "channel", k.channelID(), "why", cmp.Or(r.cause, errLeft))
}

// commitTurn records an answered batch: what the session was given, and whether it must rotate
// (the agent hit a limit, or --max-turns-per-session).
func (h *Harness) commitTurn(r turnResult) {
	s, k := r.in.slot, r.in.scope
	h.queue.Complete(k)
	h.done(r.in.batch.IDs()...)
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
		s.invalidate(k, false)
		_ = h.store.Remove(k.String())
	} else {
		now := h.now()
		h.tasks.Go(func() { _ = h.store.Touch(k.String(), now) }) // may write the file (once a minute): not on the loop
	}
	h.log.Info("turn done", "channel", k.channelID(), "scope", k.String(), "stopReason", r.stop, "session", sess.ID)
}

// closeAnsweredTurn handles an agent that died after replying: respawn it, but do not prompt
// the batch again.
func (h *Harness) closeAnsweredTurn(r turnResult) {
	k := r.in.scope
	h.log.Warn("agent failed after replying; not retrying the batch", "channel", k.channelID(), "err", r.err)
	h.queue.Complete(k)
	h.done(r.in.batch.IDs()...)
	h.crashed(r.in.slot)
}

// retryResume handles an agent that died or timed out during resume: respawn it and try once
// more, at no cost to the batch.
func (h *Harness) retryResume(r turnResult) {
	h.resumeRetried[r.in.scope] = true
	h.queue.Return(r.in.batch)
	h.crashed(r.in.slot)
}

// retryTurn requeues a failed batch — after the quota reset the agent named, else with backoff —
// or dead-letters it at the attempt limit. A transport failure also respawns the agent; an agent
// error (JSON-RPC) keeps the agent and its session.
func (h *Harness) retryTurn(ctx context.Context, r turnResult) {
	in, k := r.in, r.in.scope
	h.log.Warn("turn failed", "channel", k.channelID(), "attempt", in.batch.Attempt+1, "err", r.err)
	if isTransport(r.err) {
		h.crashed(in.slot)
	}
	if wait, ok := quotaReset(r.err.Error()); ok && in.batch.QuotaWaits < maxQuotaWaits {
		wait = max(wait, retryBase)
		h.log.Warn("agent named a quota reset; waiting for it", "channel", k.channelID(), "wait", wait)
		h.queue.RequeueAt(in.batch, h.now().Add(wait))
		return
	}
	if h.queue.Requeue(in.batch, h.now()) {
		h.deadLetter(ctx, in, r.err)
		h.done(in.batch.IDs()...)
	}
}

// returnSlot applies what happened while the slot was busy: session drops deferred by rotate or
// leave, and an agent process that died after its turn answered.
func (h *Harness) returnSlot(s *slot) {
	for c := range s.pending {
		delete(s.sessions, c)
	}
	s.pending = nil
	for k := range s.sessions {
		if h.removed[k.channelID()] {
			delete(s.sessions, k)
		}
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
	reason := "unknown error"
	if err != nil {
		reason = err.Error()
	}
	h.log.Error("dead letter", "channel", in.channel.ID, "events", len(in.batch.Items), "err", reason)
	notice := failureNotice(in.channel.ID, in.scope, in.batch.Events(), h.agent,
		"⚠️ I couldn't process the last request after several attempts ("+reason+
			"). Please re-send it, or ask my owner to check on me.")
	h.emit(in, observer.DeadLetter{Events: in.batch.IDs(), Reason: reason})
	h.publishLater(ctx, notice)
}

// turnEnds remembers when each conversation's last turn ended, for a second or two. A reply's
// created_at has one-second resolution, so a reply dated in the second a turn ended could be that
// turn's or the next one's; the loop therefore starts a conversation's next turn (and any turn in
// its own first second) only once the second has passed, and the in-flight marker can say a
// same-second reply is the batch's own (replyAnswers). Only the loop uses it.
type turnEnds struct {
	since  time.Time              // when this process began taking turns
	at     map[scopeKey]time.Time // pruned to the last few seconds
	wakeAt time.Time              // the loop is poked then, for conversations held until it
}

func (e *turnEnds) ended(k scopeKey, now time.Time) {
	if e.at == nil {
		e.at = map[scopeKey]time.Time{}
	}
	for s, t := range e.at {
		if now.Sub(t) > 2*time.Second {
			delete(e.at, s)
		}
	}
	e.at[k] = now
}

// ownSecond reports whether a reply dated in start's second can only come from a turn of k that
// starts at start: no turn of k ended in that second, as far as this process can know (it was
// already running in the second before, so an earlier process's turn cannot have ended in it).
func (e *turnEnds) ownSecond(k scopeKey, start time.Time) bool {
	if e.since.IsZero() || e.since.Unix() >= start.Unix() {
		return false
	}
	end, ok := e.at[k]
	return !ok || end.Unix() < start.Unix()
}

// publishSettle is how long a look for a killed agent's reply waits before looking a second time:
// a reply its `buzz` call sent just before the kill may still be committing at the relay, and a
// look that misses it prompts the batch again — the soak saw such batches answered twice.
var publishSettle = time.Second

// answeredAfterKill reports whether a batch whose agent died (its process group now killed) was
// answered anyway, looking again after publishSettle if the first look finds nothing. A shutdown
// meanwhile says no: the batch stays in flight and the next run looks again.
func (h *Harness) answeredAfterKill(ctx context.Context, in turnInput, start time.Time) bool {
	look := func() bool {
		return h.relay.answered(context.WithoutCancel(ctx), in.channel.ID, in.batch.Events(), start, in.live.ownSecond)
	}
	if look() {
		return true
	}
	select {
	case <-time.After(publishSettle):
		return look()
	case <-ctx.Done():
		return false
	}
}
