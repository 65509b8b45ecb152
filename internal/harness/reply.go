package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/client"
	"github.com/buzz-harness/buzz/internal/clock"
	"github.com/buzz-harness/buzz/internal/observer"
	"github.com/buzz-harness/buzz/internal/protocol"
)

// The reply safety net. An agent answers by running `buzz messages send`; when it does not (a
// model that only writes text, a shell without BUZZ_PRIVATE_KEY, a permission mode that denies
// the call, a send the relay refuses), the person who asked sees nothing. So at the end of every
// turn whose batch holds a person's mention, the harness decides whether an answer reached them:
// an agent message in the batch's conversation since the turn started, or one that mentions the
// person or sits in a channel they are in. Usually the agent's reply has already come in on its
// own-messages subscription (follow.go) and nothing more is done. Otherwise, once publishSettle
// has passed (a reply still committing at the relay, or sent late, wins), one query over the
// socket reads the agent's messages since the turn started (lookForAnswer). If none answers,
// the turn is silent: the harness posts the agent's final text as the agent, threaded on the
// batch's reply target and marked FallbackMarker (--publish-response fallback), or, with
// nothing to post, a failure notice that says why in one line. The decision is journaled (the
// signed event itself) before the post and the batch finishes after it, so a crash between
// them posts the same event once on restart.
//
// Never for heartbeats, nor for batches that only agents' messages or followed messages (which
// the agent may decide need no answer) make up.

// FallbackMarker is the tag that marks a reply the harness posted with the agent's final text.
const FallbackMarker = "buzz:fallback-response"

// answerCheck is a finished turn whose batch the safety net is checking. Its batch stays in
// flight (the conversation waits) until the check ends.
type answerCheck struct {
	r turnResult
	// replied: an agent message answering the batch came in meanwhile (set by the loop, read by
	// the check's goroutine).
	replied atomic.Bool
	// elsewhere are the other channels the agent posted in since the turn started, as its
	// own-messages subscription brought them (the loop adds, the check's goroutine reads).
	mu        sync.Mutex
	elsewhere []string
}

// postedIn notes that the agent posted in another channel.
func (c *answerCheck) postedIn(ch string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !slices.Contains(c.elsewhere, ch) {
		c.elsewhere = append(c.elsewhere, ch)
	}
}

func (c *answerCheck) postedElsewhere() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.elsewhere)
}

// checkResult is what a check reports back to the loop.
type checkResult struct {
	check   *answerCheck
	out     replyOutcome
	posted  *nostr.Event // the fallback or notice, once the relay took it
	queries int          // relay queries the check made
	stopped bool         // the run ended first: the batch stays in flight for the next one
}

// replyKind is what the safety net decided about a turn.
type replyKind int

const (
	replyAnswered replyKind = iota // the answer reached the person: nothing to do
	replyFallback                  // silent: post the agent's final text
	replyNotice                    // silent: post a failure notice saying why
)

// replyOutcome is a decision and, for a silent turn, why it was silent.
type replyOutcome struct {
	kind   replyKind
	reason string
}

// replyFacts is what the decision is made from.
type replyFacts struct {
	answered  bool // an agent message the person can see answers the batch
	mode      PublishResponse
	report    turnReport
	elsewhere string // a channel the agent posted in during the turn that the person is not in
}

// decideReply is the safety net's decision: answered, silent → fallback, or silent → notice.
func decideReply(f replyFacts) replyOutcome {
	if f.answered {
		return replyOutcome{kind: replyAnswered}
	}
	out := replyOutcome{kind: replyNotice, reason: silentReason(f)}
	if f.mode == PublishFallback && f.report.text != "" {
		out.kind = replyFallback
	}
	return out
}

// silentReason says in one line, to the person who asked, why no answer reached them. The last
// send call decides: an earlier failure may have been retried.
func silentReason(f replyFacts) string {
	sends := f.report.sends
	if len(sends) == 0 {
		if f.report.text == "" {
			return "I ended my turn without writing or sending an answer"
		}
		return "I wrote an answer but never sent it with `buzz messages send`"
	}
	c := sends[len(sends)-1]
	out := strings.ToLower(c.output)
	where := "the channel it named"
	if c.channel != "" {
		where = "channel " + c.channel
	}
	switch {
	case c.denied:
		return "my permission mode denied my `buzz messages send` call"
	case c.status == "completed" && f.elsewhere != "":
		return "I posted it in channel " + f.elsewhere + ", where you may not see it"
	case c.status == "completed":
		return "my `buzz messages send` call succeeded, but the reply is not in this thread"
	case c.status != "failed":
		return "my `buzz messages send` call had not finished when my turn ended"
	case strings.Contains(out, "buzz_private_key") || strings.Contains(out, "key_error") || strings.Contains(out, "no private key"):
		return "my `buzz` command has no key: BUZZ_PRIVATE_KEY is not set in its environment (exit 3)"
	case c.exit == 3 || strings.Contains(out, "auth_error"):
		return "the relay refused my `buzz` command's credentials (exit 3)"
	case strings.Contains(out, "not a channel member"):
		return "the relay refused my reply: I am not a member of " + where
	case strings.Contains(out, "unknown channel") || strings.Contains(out, "not_found"):
		return "my reply named a channel that does not exist (" + where + ")"
	}
	detail := firstLine(c.output, 160)
	if detail == "" && c.exit >= 0 {
		detail = fmt.Sprintf("exit %d", c.exit)
	}
	if detail == "" {
		return "my `buzz messages send` call failed"
	}
	return "my `buzz messages send` call failed: " + detail
}

// firstLine is s's first line that says something (not blank, a code fence or the "Exit code N"
// adapters put first), at most n bytes.
func firstLine(s string, n int) string {
	for line := range strings.SplitSeq(s, "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "```") && !reExitCode.MatchString(line) {
			return clipText(line, n)
		}
	}
	return ""
}

// noticeText is the failure notice of a silent turn.
func noticeText(reason string) string { return "⚠️ No answer from me here: " + reason + "." }

// personAsked reports whether a batch holds a message by a person that mentions the agent: only
// such a batch is owed a visible answer.
func (h *Harness) personAsked(b *Batch) bool {
	for _, it := range b.Items {
		ev := it.Event
		if protocol.Mentioned(ev.Tags, h.agent) && !agentMarked(ev) && !h.knownAgent(ev.PubKey) {
			return true
		}
	}
	return false
}

// knownAgent reports an author the harness already knows to be an agent (from a sibling or
// author lookup, or from a profile the prompt fetched). The owner never is.
func (h *Harness) knownAgent(pk string) bool {
	if pk == h.agent {
		return true
	}
	if pk == h.cfg.Owner {
		return false
	}
	if v, ok := h.siblings.cache.get(pk, h.clock.Now()); ok && (v.agent || v.sibling) {
		return true
	}
	return h.relay.profileSaysAgent(pk)
}

// noteReply takes in one of the agent's own messages: if it answers a turn that runs, or whose
// check is waiting, the safety net need not look.
func (h *Harness) noteReply(ev *nostr.Event) {
	h.convs.eachBusy(func(c *conversation) {
		if t := c.turn; t != nil && t.batch != nil {
			if answers(ev, t.batch, t.startedAt, t.ownSecond) {
				t.replied = true
			} else if other, ok := otherChannel(ev, t.batch, t.startedAt, t.ownSecond); ok && !slices.Contains(t.elsewhere, other) {
				t.elsewhere = append(t.elsewhere, other)
			}
		}
		if ch := c.check; ch != nil {
			if answers(ev, ch.r.in.batch, ch.r.started, ch.r.in.live.ownSecond) {
				ch.replied.Store(true)
			} else if other, ok := otherChannel(ev, ch.r.in.batch, ch.r.started, ch.r.in.live.ownSecond); ok {
				ch.postedIn(other)
			}
		}
	})
}

// otherChannel returns the channel of the agent's message r when it is one of its own posts
// (not a notice, fallback or question) in a channel other than batch b's, sent since b went in
// flight at since: an answer there counts if someone who asked is a member (lookForAnswer).
func otherChannel(r *nostr.Event, b *Batch, since time.Time, ownSecond bool) (string, bool) {
	ch, ok := protocol.ChannelID(r.Tags)
	if !ok || ch == b.Conv.Channel || agentMarked(r) || protocol.IsPermissionRequest(r.Tags) {
		return "", false
	}
	sec := int64(r.CreatedAt)
	return ch, sec > since.Unix() || sec == since.Unix() && ownSecond
}

// answers reports whether the agent's message r answers batch b that went in flight at since, as
// far as r alone tells: it replies in the batch's thread (replyAnswers), or it was sent since
// then where the people who asked read (the conversation spanning the batch's channel, or the top
// level of that channel: a reply posted in the wrong place is still one they see). Replies in
// other threads answer other questions; the harness's own notices and fallbacks answer only the
// batch they name. A message in another channel is lookForAnswer's to weigh.
func answers(r *nostr.Event, b *Batch, since time.Time, ownSecond bool) bool {
	if replyAnswers(r, b.Events(), since, ownSecond) {
		return true
	}
	sec := int64(r.CreatedAt)
	if protocol.IsPermissionRequest(r.Tags) || agentMarked(r) || sec < since.Unix() || sec == since.Unix() && !ownSecond {
		return false
	}
	ch, _ := protocol.ChannelID(r.Tags)
	return ch == b.Conv.Channel && (b.Conv.Root == "" || protocol.ParseThread(r.Tags).Root == "")
}

// checkAnswer starts the safety net's check of a finished turn: the batch stays in flight, its
// conversation waits, and the result comes back on the inbox.
func (h *Harness) checkAnswer(ctx context.Context, r turnResult) {
	c := &answerCheck{r: r, elsewhere: r.elsewhere}
	h.convs.update(r.in.conv, func(cv *conversation) { cv.check = c })
	// Armed here, on the loop, not by the goroutine whenever it runs: with an injected clock
	// the wait then starts from the turn's end, and an Advance after it always fires it.
	settled := clock.After(h.clock, publishSettle)
	h.log.Debug("reply check: waiting for the answer to settle", "conversation", r.in.conv.String())
	h.tasks.Go(func() {
		res := h.runCheck(ctx, c, settled)
		select {
		case h.inbox.checks <- res:
		case <-ctx.Done():
		}
	})
}

// runCheck waits until settled (publishSettle after the turn ended), looks for an answer unless one came in meanwhile, decides, and
// posts what it decided: journaled first, signed, so a crash before the post cannot lose it and
// one after it cannot make a second.
func (h *Harness) runCheck(ctx context.Context, c *answerCheck, settled <-chan time.Time) checkResult {
	res := checkResult{check: c}
	select {
	case <-settled:
	case <-ctx.Done():
		res.stopped = true
		return res
	}
	r := c.r
	f := replyFacts{answered: c.replied.Load(), mode: h.cfg.PublishResponse, report: r.report}
	if !f.answered {
		covered := h.relay.ownLiveSince(r.started)
		f.answered, f.elsewhere, res.queries = h.relay.lookForAnswer(ctx, r.in.batch, r.started, r.in.live.ownSecond, covered, c.postedElsewhere())
		if ctx.Err() != nil { // shutting down: the look may have failed for that; the next run looks again
			res.stopped = true
			return res
		}
	}
	if res.out = decideReply(f); res.out.kind == replyAnswered {
		return res
	}
	text := r.report.text
	marker := FallbackMarker
	if res.out.kind == replyNotice {
		text, marker = noticeText(res.out.reason), FailureMarker
	}
	ev := markedReply(r.in.channel.ID, r.in.conv, r.in.batch.Events(), h.agent, text, marker, h.clock.Now())
	err := client.AddAuthTag(ev, h.cfg.AuthTag)
	if err == nil {
		err = protocol.Sign(ev, h.cfg.SecretKey)
	}
	if err != nil {
		h.log.Error("cannot sign the safety net's reply", "err", err)
		return res
	}
	if c.replied.Load() { // the agent's own reply came in after all: it wins
		res.out = replyOutcome{kind: replyAnswered}
		return res
	}
	raw, _ := json.Marshal(ev)
	if err := h.jrnl.Outcome(raw, r.in.batch.IDs()...); err != nil {
		h.log.Warn("journal", "err", err)
	}
	h.log.Info("reply check: posting the decided reply", "conversation", r.in.conv.String(), "event", ev.ID, "fallback", res.out.kind == replyFallback)
	if h.relay.publishOutcome(ctx, ev) {
		res.posted = ev
	}
	return res
}

// finishCheck ends a checked turn: its batch is done, and a silent turn is counted and shown.
func (h *Harness) finishCheck(ctx context.Context, res checkResult) {
	c := res.check
	r := c.r
	k := r.in.conv
	h.convs.update(k, func(cv *conversation) {
		if cv.check == c {
			cv.check = nil
		}
		// Its post ends the conversation's turn as far as the same-second hold goes.
		cv.lastEnd = h.clock.Now()
	})
	if res.stopped {
		return
	}
	h.metrics.checked(res.out.kind)
	r.in.session = r.session // the feed names the session the turn used
	r.reply = res.out.kind
	h.publishTurnMetric(ctx, r)
	if res.out.kind != replyAnswered {
		action := "notice"
		if res.out.kind == replyFallback {
			action = "fallback"
		}
		h.replies.silent++
		h.feed.emit(r.in, observer.SilentTurn{Events: r.in.batch.IDs(), Reason: res.out.reason, Action: action})
		h.log.Warn("silent turn: no answer reached the thread", "channel", k.Channel, "conversation", k.String(),
			"reason", res.out.reason, "action", action, "posted", res.posted != nil, "queries", res.queries)
		if res.posted != nil && res.out.kind == replyFallback {
			h.replies.fallbacks++
			h.feed.emit(r.in, observer.FallbackPublished{EventID: res.posted.ID, Bytes: len(res.posted.Content)})
		}
	} else {
		h.log.Debug("reply check: the answer is there", "conversation", k.String(), "queries", res.queries)
	}
	h.convs.Complete(k)
	if res.out.kind != replyAnswered && res.posted == nil {
		// The decided reply stays in the journal with its batch: the next start posts it.
		h.log.Error("the safety net's reply could not be posted; the next start posts it", "conversation", k.String())
		h.ack.finished(r.in.batch.IDs()...)
	} else {
		h.done(r.in.batch.IDs()...)
	}
	h.inbox.poke()
}

// replyCounts are the safety net's counters, for !status. Only the loop touches them.
type replyCounts struct {
	silent    int // silent turns
	fallbacks int // of which the agent's text was posted
}

// lookForAnswer reads the agent's messages since a batch went in flight and reports whether
// one answers it. A message in another channel (a DM, say) counts if someone who asked is a
// member there (a second query, only then); elsewhere names such a channel otherwise. covered:
// the own-messages subscription has been live since the batch went in flight, so the other
// channels the agent posted in are known (seen); the query then reads only the batch's channel,
// where a reply may still be on its way to the loop. Otherwise it reads every channel: a busy
// agent's last hundred messages. A failed query says no: answering twice beats never answering.
func (rc *relayClient) lookForAnswer(ctx context.Context, b *Batch, since time.Time, ownSecond, covered bool, seen []string) (answered bool, elsewhere string, queries int) {
	f := nostr.Filter{Kinds: protocol.MessageKinds, Authors: []string{rc.self}, Since: ptrTS(since), Limit: 100}
	if covered {
		f.Tags = nostr.TagMap{"h": {b.Conv.Channel}}
	}
	got, err := rc.querySocket(ctx, f)
	queries = 1
	if err != nil {
		rc.log.Warn("reply check: cannot read the agent's messages; taking the turn for silent", "err", err)
		return false, "", queries
	}
	others := seen
	for i := range got {
		if answers(&got[i], b, since, ownSecond) {
			return true, "", queries
		}
		if ch, ok := otherChannel(&got[i], b, since, ownSecond); ok && !slices.Contains(others, ch) {
			others = append(others, ch)
		}
	}
	if len(others) == 0 {
		return false, "", queries
	}
	lists, err := rc.querySocket(ctx, nostr.Filter{Kinds: []int{protocol.KindGroupMembers}, Tags: nostr.TagMap{"d": others}, Limit: len(others)})
	queries++
	if err != nil {
		return false, others[0], queries
	}
	for i := range lists {
		for _, ev := range b.Events() {
			if protocol.IsMember(&lists[i], ev.PubKey) {
				return true, "", queries
			}
		}
	}
	return false, others[0], queries
}

// ownLiveSince reports whether the agent's own-messages subscription has been live without a
// break since at.
func (rc *relayClient) ownLiveSince(at time.Time) bool {
	if rc.sock.Live == nil {
		return false
	}
	from, ok := rc.sock.Live.LiveSince(subOwn)
	return ok && !from.After(at)
}

// publishOutcome posts the safety net's reply, trying three times over a few seconds; it reports
// whether the relay took it (a duplicate counts: the post of an earlier run landed). A shutdown
// lets the attempt under way finish (bounded) but starts no other: the next run posts it.
func (rc *relayClient) publishOutcome(ctx context.Context, ev *nostr.Event) bool {
	for attempt := range 3 {
		if attempt > 0 {
			select {
			case <-clock.After(rc.clock, time.Duration(attempt)*time.Second):
			case <-ctx.Done():
				return false
			}
		}
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		res, err := rc.sock.Publish(pctx, ev)
		cancel()
		switch {
		case err == nil && (res.Accepted || strings.HasPrefix(res.Message, "duplicate")):
			return true
		case err == nil:
			rc.log.Warn("relay refused the safety net's reply", "message", res.Message)
			return false
		}
		rc.log.Warn("cannot post the safety net's reply", "attempt", attempt+1, "err", err)
	}
	return false
}

// postRecorded posts a reply a previous run decided on and journaled but may not have posted
// (replayJournal found its batch in flight and unanswered). It reports whether the relay took it.
func (h *Harness) postRecorded(ctx context.Context, raw json.RawMessage) bool {
	var ev nostr.Event
	if json.Unmarshal(raw, &ev) != nil || ev.PubKey != h.agent || protocol.CheckEvent(&ev) != nil {
		h.log.Warn("journal: ignoring an unreadable recorded reply")
		return false
	}
	return h.relay.publishOutcome(ctx, &ev)
}
