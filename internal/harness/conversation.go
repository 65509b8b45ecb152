package harness

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/acp"
	"github.com/buzz-harness/buzz/internal/prompt"
	"github.com/buzz-harness/buzz/internal/protocol"
)

// convKey names a conversation: a thread of a channel, or the whole channel (channel session
// policy, DMs). The zero value is no conversation (heartbeats, "any agent").
type convKey = protocol.Conversation

// conversation is everything the harness knows about one conversation, in one place: its queue,
// its running turn, its live sessions on the agents, and what the owner set for it. The loop owns
// every conversation; a turn goroutine is handed copies of what it needs (turnInput) and touches
// only the fields the turn type says it may.
type conversation struct {
	key convKey
	q   convQueue

	// turn is the running turn; nil when none runs.
	turn *turn
	// sessions are the conversation's live ACP sessions, one per agent process that holds one.
	sessions map[*slot]*convSession
	// resumeRetried: resuming the remembered session failed indeterminately once already.
	resumeRetried bool
	// fresh: the owner rotated, so the next session/new carries _meta.freshSession.
	fresh bool
	// settings are the owner's !model / !mode for this conversation's sessions.
	settings agentSettings
	// questions are the open permission questions (--permissions ask), oldest first.
	questions []*permWait
	// lastEnd is when the conversation's last turn ended, kept for sameSecondHold seconds: the
	// same-second hold (turnEnds).
	lastEnd time.Time
	// check is the reply safety net looking at the last turn's batch (reply.go); nil when none.
	check *answerCheck
}

// turn is the loop's handle on a running turn of a conversation. The turn goroutine only ever
// sets session; everything else belongs to the loop.
type turn struct {
	cancel    context.CancelCauseFunc // stops it; the cause says why (owner, rotate, leave, merge)
	slot      *slot
	gen       int // the slot's generation when the turn started: a respawn since makes it stale
	proc      *acp.Process
	steerable bool      // initialize advertised _meta.steering.supported
	startedAt time.Time // when the batch went in flight (its journal mark)
	ownSecond bool      // no earlier turn of the conversation ended in startedAt's second
	batch     *Batch    // what it answers
	replied   bool      // an agent message answering batch came in (reply.go)
	elsewhere []string  // other channels the agent posted in meanwhile (reply.go)
	session   atomic.Pointer[string]

	merge   *prompt.MergeReason // a cancel-and-merge was asked (interrupt wins over steer)
	steered []queued            // events the agent took into this turn natively

	typing     nostr.Tags // the tags of the conversation's typing events
	typedAt    time.Time  // when the last typing event went out
	dropOnExit bool       // rotate or leave while running: its session must not be kept
}

// sameSecondHold is how long a conversation remembers when its last turn ended.
const sameSecondHold = 2 * time.Second

// idle reports whether the conversation holds nothing worth keeping at now.
func (c *conversation) idle(now time.Time) bool {
	return c.turn == nil && c.q.idle() && len(c.sessions) == 0 && !c.resumeRetried && !c.fresh &&
		c.settings == (agentSettings{}) && len(c.questions) == 0 && c.check == nil && now.Sub(c.lastEnd) > sameSecondHold
}

// conversations is the table of conversations, keyed by convKey. Only the loop uses it, and it
// changes a conversation only through update, which also forgets one that became idle: threads
// come and go, the table must not grow with every thread ever seen.
type conversations struct {
	m map[convKey]*conversation
	// busy indexes the conversations with a turn running or a reply check waiting, which the
	// agent's every own message is matched against (reply.go): a few among thousands.
	busy map[convKey]*conversation
	now  func() time.Time
	// jitter spreads retry backoff over [0.8, 1.2]; injectable for tests.
	jitter func() float64
}

func newConversations(now func() time.Time, jitter func() float64) *conversations {
	return &conversations{m: map[convKey]*conversation{}, busy: map[convKey]*conversation{}, now: now, jitter: jitter}
}

// get returns the conversation for reading, or nil when the harness knows nothing of it.
func (t *conversations) get(k convKey) *conversation { return t.m[k] }

// update runs f on k's conversation (created if needed) and forgets it if f left it idle.
func (t *conversations) update(k convKey, f func(c *conversation)) {
	c := t.m[k]
	if c == nil {
		c = &conversation{key: k}
		t.m[k] = c
	}
	f(c)
	t.changed(c, t.now())
}

// each runs f on every conversation (in no particular order), forgetting those left idle.
func (t *conversations) each(f func(c *conversation)) {
	now := t.now()
	for _, c := range t.m {
		f(c)
		t.changed(c, now)
	}
}

// eachBusy is each for the conversations with a turn running or a reply check waiting.
func (t *conversations) eachBusy(f func(c *conversation)) {
	now := t.now()
	for _, c := range t.busy {
		f(c)
		t.changed(c, now)
	}
}

// changed files c after a change: in busy or not, forgotten once idle.
func (t *conversations) changed(c *conversation, now time.Time) {
	if c.turn != nil || c.check != nil {
		t.busy[c.key] = c
	} else {
		delete(t.busy, c.key)
	}
	if c.idle(now) {
		delete(t.m, c.key)
	}
}

// inChannel runs f on every conversation of a channel, forgetting those left idle.
func (t *conversations) inChannel(channelID string, f func(c *conversation)) {
	t.each(func(c *conversation) {
		if c.key.Channel == channelID {
			f(c)
		}
	})
}

// sessionOn returns the conversation's live session on s, or nil.
func (t *conversations) sessionOn(k convKey, s *slot) *convSession {
	if c := t.m[k]; c != nil {
		return c.sessions[s]
	}
	return nil
}

// setSession records (or, with nil, forgets) the conversation's live session on s.
func (c *conversation) setSession(s *slot, sess *convSession) {
	if sess == nil {
		delete(c.sessions, s)
		return
	}
	if c.sessions == nil {
		c.sessions = map[*slot]*convSession{}
	}
	c.sessions[s] = sess
}

// dropSessions forgets the conversation's live sessions everywhere; a running turn's session is
// not kept when it returns. It reports whether there was one.
func (c *conversation) dropSessions() bool {
	had := len(c.sessions) > 0
	clear(c.sessions)
	if c.turn != nil {
		c.turn.dropOnExit = true
		had = true
	}
	return had
}

// slotSessions lists the live sessions on s, with their conversations.
func (t *conversations) slotSessions(s *slot) map[convKey]*convSession {
	out := map[convKey]*convSession{}
	for k, c := range t.m {
		if sess := c.sessions[s]; sess != nil {
			out[k] = sess
		}
	}
	return out
}

// forgetSlot drops every conversation's session on s (its agent process is gone).
func (t *conversations) forgetSlot(s *slot) {
	t.each(func(c *conversation) { delete(c.sessions, s) })
}

// running lists the conversations with a turn running.
func (t *conversations) running() []*conversation {
	var out []*conversation
	for _, c := range t.busy {
		if c.turn != nil {
			out = append(out, c)
		}
	}
	return out
}
