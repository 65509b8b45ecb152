package harness

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/buzz-harness/buzz/internal/acp"
	"github.com/buzz-harness/buzz/internal/clock"
	"github.com/buzz-harness/buzz/internal/observer"
	"github.com/buzz-harness/buzz/internal/prompt"
)

// turnInput is everything a turn goroutine needs; it touches nothing else of the harness's state.
type turnInput struct {
	slot    *slot
	proc    *acp.Process
	ident   AgentIdentity
	channel channel
	conv    convKey // the conversation the batch belongs to
	batch   *Batch
	session *convSession  // nil: open one (resume, load or new); the turn sets it once open
	want    agentSettings // what a session it opens is set to: the flags, then the owner's choices
	retried bool          // an indeterminate resume already cost one respawn
	fresh   bool          // the owner rotated: _meta.freshSession on session/new
	// noResume: another agent process holds this conversation's session live; resuming the same
	// id here would fork the conversation, so this agent opens its own.
	noResume bool
	turnID   string
	// heartbeat: a scheduled prompt on the slot's heartbeat session, not a channel batch.
	heartbeat bool
	// live is the loop's handle on the turn (steer.go); the turn only sets its session id.
	live *turn
}

// turnResult is what a turn reports back to the loop.
type turnResult struct {
	in         turnInput
	session    *convSession // the session used (nil if none could be opened)
	gooseProbe ProbeState   // what opening a goose session found (ProbeUnknown: not probed)
	stop       string       // stopReason when the prompt returned
	delivered  []string
	standing   bool            // standing context went out in this prompt's user message
	err        error           // errResumeLost: respawn the agent and try the resume once more
	cause      error           // why the turn's context was cancelled, if it was
	answered   bool            // the turn failed, but the agent's reply had already landed
	usage      json.RawMessage // the prompt response's usage, if the agent reported any
	started    time.Time
	report     turnReport // what the agent wrote and which sends it made (reply.go)
	replied    bool       // an agent message answering the batch came in while the turn ran
	elsewhere  []string   // other channels the agent posted in while the turn ran
	asked      bool       // the batch holds a person's mention: it is owed a visible answer
	reply      replyKind  // what the safety net decided, once it has
}

// dispatch starts turns while there is ready work and an idle agent, and says how many it
// started. A conversation whose last turn ended in the current second waits for the next one
// (turnEnds), and is woken for it.
func (h *Harness) dispatch(ctx context.Context) (started int) {
	for ctx.Err() == nil && h.pool.idle() {
		now := h.clock.Now()
		held := false
		b, ok := h.convs.NextWhere(now, func(c *conversation) bool {
			if h.turnEnds.ownSecond(c.lastEnd, now) {
				return true
			}
			held = true
			return false
		})
		if next := now.Truncate(time.Second).Add(time.Second); held && h.turnEnds.wakeAt.Before(next) {
			h.turnEnds.wakeAt = next
			h.clock.AfterFunc(next.Sub(now), h.inbox.poke)
		}
		if !ok {
			return started
		}
		k := b.Conv
		c := h.chans.byID[k.Channel]
		if c == nil { // left while queued
			h.convs.Drop(k)
			continue
		}
		s := h.pool.claim(h.convs, k)
		in := turnInput{slot: s, proc: s.proc, ident: s.ident, channel: *c, conv: k, batch: b,
			session: h.convs.sessionOn(k, s), turnID: b.Last().ID[:12]}
		if in.session == nil {
			h.pool.makeRoom(ctx, h.convs, s)
			h.convs.update(k, func(cv *conversation) {
				in.fresh, cv.fresh = cv.fresh, false
				in.retried = cv.resumeRetried
				in.want = cv.settings.over(h.cfg.settings())
				in.noResume = len(cv.sessions) > 0 // another agent holds it live
			})
		}
		h.startTurn(ctx, in)
		started++
	}
	return started
}

// startTurn runs a turn on its own goroutine with exclusive use of the slot; the result comes
// back to the loop on the inbox.
func (h *Harness) startTurn(ctx context.Context, in turnInput) {
	in.slot.busy = true
	tctx, cancel := context.WithCancelCause(ctx)
	now := h.clock.Now()
	in.live = &turn{cancel: cancel, slot: in.slot, gen: in.slot.gen, proc: in.proc, steerable: in.ident.Steering,
		startedAt: now, batch: in.batch, typing: typingTags(in.channel.ID, in.batch.Last()), typedAt: now}
	h.convs.update(in.conv, func(c *conversation) {
		in.live.ownSecond = h.turnEnds.ownSecond(c.lastEnd, now)
		c.turn = in.live
	})
	h.ack.typing(in.live.typing)
	h.tasks.Go(func() {
		r := h.runTurn(tctx, in)
		r.cause = context.Cause(tctx)
		if r.cause == context.Canceled || errors.Is(r.cause, ctx.Err()) && ctx.Err() != nil {
			r.cause = errShutdown
		}
		cancel(nil)
		h.inbox.report(ctx, r)
	})
}

// keepTyping sends the next typing event of every running turn whose last is typingEvery old.
func (h *Harness) keepTyping(now time.Time) {
	for _, c := range h.convs.running() {
		if t := c.turn; now.Sub(t.typedAt) >= typingEvery {
			t.typedAt = now
			h.ack.typing(t.typing)
		}
	}
}

// report hands a turn's result to the loop (nobody listens once the run is over).
func (b *inbox) report(ctx context.Context, r turnResult) {
	select {
	case b.results <- r:
	case <-ctx.Done():
	}
}

// runTurn opens (or reuses) the conversation's session, renders the prompt and runs it.
func (h *Harness) runTurn(ctx context.Context, in turnInput) (r turnResult) {
	r.in = in
	start := in.live.startedAt
	r.started = start
	// Durable before the agent sees the batch: after a crash this says a reply may exist.
	if err := h.jrnl.InFlight(start, in.live.ownSecond, in.batch.IDs()...); err != nil {
		h.log.Warn("journal", "err", err)
	}
	sess := in.session
	if sess == nil {
		var err error
		sess, r.gooseProbe, err = h.sessions.open(ctx, in)
		if err != nil {
			r.err = err
			h.feed.emit(in, observer.TurnStarted{Events: in.batch.IDs(), Attempt: in.batch.Attempt})
			h.feed.emit(in, observer.TurnEnded{Error: err.Error(), DurationMs: h.clock.Now().Sub(start).Milliseconds()})
			return r
		}
	}
	r.session = sess
	in.session = sess // from here the feed names the session
	h.feed.emit(in, observer.TurnStarted{Events: in.batch.IDs(), Attempt: in.batch.Attempt})
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
	if in.ident.Images && h.cfg.MaxImageBytes > 0 {
		blocks = append(blocks, h.relay.images(ctx, in.batch.Events()[in.batch.Carried:], h.cfg.MaxImageBytes)...) // images.go
	}
	if rendered.Stats.StandingIncluded {
		h.feed.emitSystemPrompt(in, sess, prompt.Standing{}, rendered.Blocks)
	}
	h.feed.emit(in, observer.PromptContextDelivery{
		Route:                   string(sess.Route),
		PromptBytes:             rendered.Stats.PromptBytes,
		StandingContextIncluded: rendered.Stats.StandingIncluded,
		EventDeltaCount:         rendered.Stats.EventDeltaCount,
		ContextIncomplete:       rendered.ContextIncomplete,
	})
	h.feed.emit(in, observer.Prompt{SessionID: sess.ID, Blocks: rendered.Blocks})
	in.live.session.Store(&sess.ID) // from here a native steer can reach this turn

	h.feed.turns.start(sess.ID)
	h.metrics.prompted(h.clock.Now(), in.batch)
	res, err := in.proc.Prompt(ctx, sess.ID, blocks, h.cfg.promptOptions())
	r.report = h.feed.turns.end(sess.ID)
	dur := h.clock.Now().Sub(start)
	merging := errors.Is(context.Cause(ctx), errMerge)
	if err != nil && isTransport(err) && (ctx.Err() == nil || merging) {
		// The agent died or timed out (also while cancelling for a merge); its reply may already
		// be in the channel. Kill its whole process group first, so no straggler (a `buzz` call
		// still running) posts after we look.
		_ = in.proc.Kill()
		r.answered = h.answeredAfterKill(ctx, in, start)
	}
	if err != nil {
		r.err = err
		h.feed.emit(in, observer.TurnEnded{Error: err.Error(), DurationMs: dur.Milliseconds()})
		return r
	}
	r.stop = res.StopReason
	if r.stop == "cancelled" && merging {
		// Cancelled to merge a new message: if the reply already landed, the batch is answered
		// and only the new message goes next (it must not be answered twice). When the agent had
		// started a send, its `buzz` call may still be on its way: look twice, as after a kill.
		if r.report.maySend() {
			r.answered = h.answeredAfterKill(ctx, in, start)
		} else {
			r.answered = h.relay.answered(context.WithoutCancel(ctx), in.channel.ID, in.batch.Events(), start, in.live.ownSecond)
		}
	}
	r.usage = res.Usage
	r.delivered = rendered.DeliveredIDs
	r.standing = rendered.Stats.StandingIncluded
	h.feed.emit(in, observer.TurnEnded{StopReason: res.StopReason, DurationMs: dur.Milliseconds(), Usage: res.Usage})
	return r
}

// turnOutcome is what a finished turn means for its batch, session and agent.
type turnOutcome int

const (
	turnStopped      turnOutcome = iota // owner cancel, rotate or leave: drop the batch and the session
	turnDone                            // answered: commit delivery
	turnUnanswered                      // ended, but no answer to the person seen yet: the safety net checks
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
	case r.err == nil && r.asked && !r.replied:
		return turnUnanswered
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
	s, k := r.in.slot, r.in.conv
	var t *turn
	h.convs.update(k, func(c *conversation) {
		t, c.turn = c.turn, nil
		c.lastEnd = h.clock.Now()
		c.resumeRetried = false
		// Keep the session the turn used or opened while its agent is usable; the outcomes
		// below drop it where the session must not be reused.
		if r.session != nil && !isTransport(r.err) && t != nil && !t.dropOnExit && t.gen == s.gen {
			r.session.lastUsed = h.clock.Now()
			c.setSession(s, r.session)
		}
	})
	absorbSteered(&r, t)
	r.replied = t != nil && t.replied
	if t != nil {
		r.elsewhere = t.elsewhere
	}
	r.asked = h.personAsked(r.in.batch)
	outcome := decideOutcome(r, h.chans.gone(k.Channel))
	if outcome != turnUnanswered {
		h.publishTurnMetric(ctx, r) // else once the safety net has decided
	}
	h.metrics.turnEnded(outcome)
	if outcome != turnMerged {
		h.ack.finished(r.in.batch.IDs()...) // the conversation's work goes on after a merge: its 👀 stay
	}
	s.busy, s.usedAt = false, h.clock.Now()
	if r.gooseProbe != ProbeUnknown {
		s.ident.GooseProbe = r.gooseProbe
	}
	if outcome == turnDone || outcome == turnAnsweredLate || outcome == turnStopped {
		h.completeReminders(ctx, r.in.batch.Events()) // reminders.go
	}
	switch outcome {
	case turnMerged:
		h.carryTurn(r, t)
	case turnStopped:
		h.dropTurn(r)
	case turnDone:
		h.finishBatch(r)
		h.commitTurn(r)
	case turnUnanswered:
		h.commitTurn(r)
		h.checkAnswer(ctx, r)
	case turnAnsweredLate:
		h.closeAnsweredTurn(r)
	case turnResumeLost:
		h.retryResume(r)
	case turnFailed:
		h.retryTurn(ctx, r)
	}
	h.checkSlot(s)
	h.inbox.poke()
}

// dropTurn ends a stopped turn: the batch is dropped and the session not reused, whatever the
// agent answered.
func (h *Harness) dropTurn(r turnResult) {
	s, k := r.in.slot, r.in.conv
	h.convs.Drop(k)
	h.done(r.in.batch.IDs()...)
	h.convs.update(k, func(c *conversation) { c.setSession(s, nil) })
	if isTransport(r.err) && !errors.Is(r.err, context.Canceled) {
		h.crashed(s)
	}
	if h.chans.byID[k.Channel] == nil {
		h.store.Remove(k) // a turn's Put may have raced the leave
	}
	h.log.Info("turn stopped", "channel", k.Channel, "why", cmp.Or(r.cause, errLeft))
}

// finishBatch records an answered batch: its conversation may run again.
func (h *Harness) finishBatch(r turnResult) {
	h.convs.Complete(r.in.conv)
	h.done(r.in.batch.IDs()...)
}

// commitTurn records what a turn that ended gave its session, and whether the session must rotate
// (the agent hit a limit, or --max-turns-per-session). Its batch is finished by the caller, or by
// the safety net once it has checked for the answer.
func (h *Harness) commitTurn(r turnResult) {
	s, k := r.in.slot, r.in.conv
	sess := r.session
	sess.Turns++
	if r.standing {
		sess.StandingSent = true
		h.store.MarkStandingDelivered(k, sess.ID)
	}
	for _, id := range r.delivered {
		sess.Delivered[id] = true
	}
	rotate := r.stop == "max_tokens" || r.stop == "max_turn_requests" ||
		h.cfg.MaxTurnsPerSession > 0 && sess.Turns >= h.cfg.MaxTurnsPerSession
	if rotate {
		h.convs.update(k, func(c *conversation) { c.setSession(s, nil) })
		h.store.Remove(k)
	} else {
		h.store.Touch(k, h.clock.Now())
	}
	h.log.Info("turn done", "channel", k.Channel, "conversation", k.String(), "stopReason", r.stop, "session", sess.ID)
}

// closeAnsweredTurn handles an agent that died after replying: respawn it, but do not prompt
// the batch again.
func (h *Harness) closeAnsweredTurn(r turnResult) {
	k := r.in.conv
	h.log.Warn("agent failed after replying; not retrying the batch", "channel", k.Channel, "err", r.err)
	h.finishBatch(r)
	h.crashed(r.in.slot)
}

// retryResume handles an agent that died or timed out during resume: respawn it and try once
// more, at no cost to the batch.
func (h *Harness) retryResume(r turnResult) {
	h.convs.update(r.in.conv, func(c *conversation) { c.resumeRetried = true })
	h.convs.Return(r.in.batch)
	h.crashed(r.in.slot)
}

// retryTurn requeues a failed batch — after the quota reset the agent named, else with backoff —
// or dead-letters it at the attempt limit. A transport failure also respawns the agent; an agent
// error (JSON-RPC) keeps the agent and its session.
func (h *Harness) retryTurn(ctx context.Context, r turnResult) {
	in, k := r.in, r.in.conv
	h.log.Warn("turn failed", "channel", k.Channel, "attempt", in.batch.Attempt+1, "err", r.err)
	if isTransport(r.err) {
		h.crashed(in.slot)
	}
	if wait, ok := quotaReset(r.err.Error()); ok && in.batch.QuotaWaits < maxQuotaWaits {
		wait = max(wait, retryBase)
		h.log.Warn("agent named a quota reset; waiting for it", "channel", k.Channel, "wait", wait)
		h.convs.RequeueAt(in.batch, h.clock.Now().Add(wait))
		return
	}
	if sess := r.session; sess != nil && sess.Resumed && sess.Turns == 0 && in.batch.Attempt >= 1 && !isTransport(r.err) {
		// The agent reopened the session but has refused every prompt on it since: the history
		// it reloaded may be one its model rejects every time (gemini-cli 0.61 reloads each tool
		// result twice). Kept, it would fail this conversation's every turn; a new session loses
		// the history but answers.
		h.log.Warn("prompts keep failing on the reopened session; the next attempt opens a new one",
			"channel", k.Channel, "conversation", k.String(), "session", sess.ID, "err", r.err)
		h.convs.update(k, func(c *conversation) { c.setSession(in.slot, nil) })
		h.store.Remove(k)
	}
	if h.convs.Requeue(in.batch, h.clock.Now()) {
		h.deadLetter(ctx, in, r.err)
		h.done(in.batch.IDs()...)
	}
}

// checkSlot respawns a slot whose agent process died after its turn answered.
func (h *Harness) checkSlot(s *slot) {
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
	notice := failureNotice(in.channel.ID, in.conv, in.batch.Events(), h.agent,
		"⚠️ I couldn't process the last request after several attempts ("+reason+
			"). Please re-send it, or ask my owner to check on me.", h.clock.Now())
	h.feed.emit(in, observer.DeadLetter{Events: in.batch.IDs(), Reason: reason})
	h.relay.publishLater(ctx, &h.tasks, notice)
}

// turnEnds is the same-second hold. A reply's created_at has one-second resolution, so a reply
// dated in the second a turn ended could be that turn's or the next one's; the loop therefore
// starts a conversation's next turn (and any turn in its own first second) only once the second
// has passed, and the in-flight marker can say a same-second reply is the batch's own
// (replyAnswers). When each conversation's last turn ended is kept on the conversation
// (lastEnd, for sameSecondHold). Only the loop uses it.
type turnEnds struct {
	since  time.Time // when this process began taking turns
	wakeAt time.Time // the loop is poked then, for conversations held until it
}

// ownSecond reports whether a reply dated in start's second can only come from a turn of a
// conversation whose last turn ended at lastEnd (zero: none) that starts at start: no turn of it
// ended in that second, as far as this process can know (it was already running in the second
// before, so an earlier process's turn cannot have ended in it).
func (e *turnEnds) ownSecond(lastEnd, start time.Time) bool {
	if e.since.IsZero() || e.since.Unix() >= start.Unix() {
		return false
	}
	return lastEnd.IsZero() || lastEnd.Unix() < start.Unix()
}

// publishSettle is how long a look for a killed agent's reply waits before looking a second time:
// a reply its `buzz` call sent just before the kill may still be committing at the relay, and a
// look that misses it prompts the batch again — the soak saw such batches answered twice.
var publishSettle = time.Second

// answeredAfterKill reports whether a batch whose agent died (its process group now killed), or
// was cancelled mid-send to merge a new message, was answered anyway, looking again after
// publishSettle if the first look finds nothing. A shutdown meanwhile says no: the batch stays in
// flight and the next run looks again. (A turn cancelled to merge has its context done already:
// it waits the settle out.)
func (h *Harness) answeredAfterKill(ctx context.Context, in turnInput, start time.Time) bool {
	look := func() bool {
		return h.relay.answered(context.WithoutCancel(ctx), in.channel.ID, in.batch.Events(), start, in.live.ownSecond)
	}
	if look() {
		return true
	}
	var stopped <-chan struct{}
	if !errors.Is(context.Cause(ctx), errMerge) {
		stopped = ctx.Done()
	}
	select {
	case <-clock.After(h.clock, publishSettle):
		return look()
	case <-stopped:
		return false
	}
}
