package harness

import (
	"math/rand/v2"
	"slices"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/prompt"
)

// Queue limits, as upstream: a batch drains at most maxBatch events; a channel holds at most
// maxQueued (oldest dropped); after maxAttempts failed turns a batch is dead-lettered.
const (
	maxBatch    = 50
	maxQueued   = 500
	maxAttempts = 10
	retryBase   = 5 * time.Second
	retryCap    = 300 * time.Second
)

// queued is one accepted event waiting for a turn.
type queued struct {
	Event      *nostr.Event
	ReceivedAt time.Time
}

// Batch is what one turn prompts with: events of one conversation, sorted by created_at.
type Batch struct {
	Scope scopeKey
	// Items are every event the turn answers: first the Carried events of a turn cancelled to
	// merge a new message (steer.go), then the new ones, each part sorted by created_at.
	Items      []queued
	Carried    int
	Reason     prompt.MergeReason // how the carried events are framed
	Attempt    int                // failed attempts so far
	QuotaWaits int                // quota resets waited out so far (bounded separately: maxQuotaWaits)
}

// Events returns the batch's events in order.
func (b *Batch) Events() []*nostr.Event {
	out := make([]*nostr.Event, len(b.Items))
	for i, it := range b.Items {
		out[i] = it.Event
	}
	return out
}

// IDs returns the batch's event ids in order.
func (b *Batch) IDs() []string {
	out := make([]string, len(b.Items))
	for i, it := range b.Items {
		out[i] = it.Event.ID
	}
	return out
}

// Last returns the newest event, which decides scope and reply anchor.
func (b *Batch) Last() *nostr.Event { return b.Items[len(b.Items)-1].Event }

type channelQueue struct {
	items []queued
	// carried are the events of a turn cancelled to merge newer ones; they lead the next batch.
	carried    []queued
	reason     prompt.MergeReason
	inFlight   bool
	attempts   int
	quotaWaits int
	notBefore  time.Time
}

// Queue is the per-conversation FIFO: at most one batch in flight per conversation (a thread, or
// a whole channel); the conversation whose oldest event arrived first goes next. It is not safe
// for concurrent use: the harness loop owns it.
type Queue struct {
	chans  map[scopeKey]*channelQueue
	jitter func() float64 // in [0.8, 1.2]; injectable for tests
}

// NewQueue returns an empty queue.
func NewQueue() *Queue {
	return &Queue{chans: map[scopeKey]*channelQueue{}, jitter: func() float64 { return 0.8 + 0.4*rand.Float64() }}
}

func (q *Queue) ch(id scopeKey) *channelQueue {
	c := q.chans[id]
	if c == nil {
		c = &channelQueue{}
		q.chans[id] = c
	}
	return c
}

// Push appends an accepted event. It reports the event dropped to respect the cap, if any.
func (q *Queue) Push(channelID scopeKey, ev *nostr.Event, now time.Time) (dropped *nostr.Event) {
	c := q.ch(channelID)
	c.items = append(c.items, queued{Event: ev, ReceivedAt: now})
	if len(c.items) > maxQueued {
		dropped = c.items[0].Event
		c.items = c.items[1:]
	}
	return dropped
}

// PushFront puts an event at the head of its channel (journal replay of an interrupted batch).
func (q *Queue) PushFront(channelID scopeKey, ev *nostr.Event, now time.Time) {
	c := q.ch(channelID)
	c.items = append([]queued{{Event: ev, ReceivedAt: now}}, c.items...)
}

// Next picks the ready channel with the oldest head event, drains up to maxBatch events sorted
// by created_at, and marks the channel in flight. ok is false when nothing is ready.
func (q *Queue) Next(now time.Time) (b *Batch, ok bool) { return q.NextWhere(now, nil) }

// NextWhere is Next among the conversations ready also says may start now (nil: all).
func (q *Queue) NextWhere(now time.Time, ready func(scopeKey) bool) (b *Batch, ok bool) {
	var best scopeKey
	var bestAt time.Time
	found := false
	for id, c := range q.chans {
		if c.inFlight || len(c.items)+len(c.carried) == 0 || now.Before(c.notBefore) {
			continue
		}
		if ready != nil && !ready(id) {
			continue
		}
		head := c.head()
		if !found || head.Before(bestAt) || (head.Equal(bestAt) && id.String() < best.String()) {
			best, bestAt, found = id, head, true
		}
	}
	if !found {
		return nil, false
	}
	c := q.chans[best]
	n := min(len(c.items), maxBatch)
	items := slices.Clone(c.items[:n])
	c.items = c.items[n:]
	// Relays replay newest-first; the prompt's last event must be the newest.
	slices.SortStableFunc(items, func(a, b queued) int { return int(a.Event.CreatedAt) - int(b.Event.CreatedAt) })
	c.inFlight = true
	b = &Batch{Scope: best, Items: items, Attempt: c.attempts, QuotaWaits: c.quotaWaits}
	if len(c.carried) > 0 {
		// With nothing new to fold in, the carried events are simply the batch again.
		if len(items) > 0 {
			b.Carried, b.Reason = len(c.carried), c.reason
		}
		b.Items = append(c.carried, items...)
		c.carried = nil
	}
	return b, true
}

// head is when the conversation's oldest waiting event arrived.
func (c *channelQueue) head() time.Time {
	if len(c.carried) > 0 {
		return c.carried[0].ReceivedAt
	}
	return c.items[0].ReceivedAt
}

// Carry ends a turn cancelled so newer events can join it: its events lead the conversation's
// next batch, framed by reason, and the conversation may run again at once.
func (q *Queue) Carry(b *Batch, reason prompt.MergeReason) {
	c := q.ch(b.Scope)
	c.inFlight = false
	c.carried = slices.Clone(b.Items)
	c.reason = reason
}

// Take removes a queued event (a native steer hands it to the running turn instead).
func (q *Queue) Take(k scopeKey, id string) (queued, bool) {
	if c := q.chans[k]; c != nil {
		for i, it := range c.items {
			if it.Event.ID == id {
				c.items = slices.Delete(c.items, i, i+1)
				return it, true
			}
		}
	}
	return queued{}, false
}

// Complete ends a successful turn: the channel may run again and its failure count resets.
func (q *Queue) Complete(channelID scopeKey) {
	c := q.ch(channelID)
	c.inFlight = false
	c.attempts, c.quotaWaits = 0, 0
	c.notBefore = time.Time{}
	q.prune(channelID, c)
}

// prune forgets an idle, empty conversation: threads come and go, the queue must not grow with
// every thread ever seen.
func (q *Queue) prune(k scopeKey, c *channelQueue) {
	if !c.inFlight && len(c.items) == 0 && len(c.carried) == 0 && c.attempts == 0 && c.quotaWaits == 0 {
		delete(q.chans, k)
	}
}

// Requeue puts a failed batch back at the front with backoff. After maxAttempts failures it
// returns deadLetter = true and the batch is not requeued: the caller sends a failure notice.
func (q *Queue) Requeue(b *Batch, now time.Time) (deadLetter bool) {
	c := q.ch(b.Scope)
	c.inFlight = false
	c.attempts++
	if c.attempts >= maxAttempts {
		c.attempts = 0
		c.notBefore = time.Time{}
		return true
	}
	d := retryBase << (c.attempts - 1)
	if d > retryCap || d <= 0 {
		d = retryCap
	}
	c.notBefore = now.Add(time.Duration(float64(d) * q.jitter()))
	c.items = append(slices.Clone(b.Items), c.items...)
	if len(c.items) > maxQueued {
		c.items = c.items[len(c.items)-maxQueued:]
	}
	return false
}

// RequeueAt puts a failed batch back to wait until at — a provider named when its quota
// resets — without counting the failure: waiting out a quota is not the batch's fault.
func (q *Queue) RequeueAt(b *Batch, at time.Time) {
	c := q.ch(b.Scope)
	c.inFlight = false
	c.quotaWaits++
	c.notBefore = at
	c.items = append(slices.Clone(b.Items), c.items...)
}

// Return puts a batch back at the front without counting a failure (no agent was free, or the
// agent died for reasons unrelated to this batch).
func (q *Queue) Return(b *Batch) {
	c := q.ch(b.Scope)
	c.inFlight = false
	c.items = append(slices.Clone(b.Items), c.items...)
}

// Drop ends an in-flight batch without requeueing it (owner cancel or rotate).
func (q *Queue) Drop(channelID scopeKey) {
	c := q.ch(channelID)
	c.inFlight = false
	q.prune(channelID, c)
}

// Drain removes every queued event of a channel, in all its conversations (the agent left it),
// and returns them.
func (q *Queue) Drain(channelID string) []*nostr.Event {
	var out []*nostr.Event
	for k, c := range q.chans {
		if k.Channel != channelID {
			continue
		}
		for _, it := range append(c.carried, c.items...) {
			out = append(out, it.Event)
		}
		c.items, c.carried = nil, nil
		if !c.inFlight {
			delete(q.chans, k)
		}
	}
	return out
}

// InFlight reports how many of a channel's conversations have a turn running.
func (q *Queue) InFlight(channelID string) int {
	n := 0
	for k, c := range q.chans {
		if k.Channel == channelID && c.inFlight {
			n++
		}
	}
	return n
}

// Len reports queued (not in-flight) events of a channel, over all its conversations.
func (q *Queue) Len(channelID string) int {
	n := 0
	for k, c := range q.chans {
		if k.Channel == channelID {
			n += len(c.items) + len(c.carried)
		}
	}
	return n
}

// Pending reports whether any conversation has queued events.
func (q *Queue) Pending() bool {
	for _, c := range q.chans {
		if len(c.items)+len(c.carried) > 0 {
			return true
		}
	}
	return false
}
