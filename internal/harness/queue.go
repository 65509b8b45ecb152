package harness

import (
	"slices"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/prompt"
)

// Queue limits, as upstream: a batch drains at most maxBatch events; a conversation holds at
// most maxQueued (oldest dropped); after maxAttempts failed turns a batch is dead-lettered.
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
	Tag        string // the prompt tag of the subscription rule it matched ("" = the default)
}

// Batch is what one turn prompts with: events of one conversation, sorted by created_at.
type Batch struct {
	Conv convKey
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

// convQueue is a conversation's queue: at most one batch in flight; the conversation whose
// oldest event arrived first goes next (conversations.NextWhere).
type convQueue struct {
	items []queued
	// carried are the events of a turn cancelled to merge newer ones; they lead the next batch.
	carried    []queued
	reason     prompt.MergeReason
	inFlight   bool
	attempts   int
	quotaWaits int
	notBefore  time.Time
}

// idle: nothing waiting, nothing in flight, no retry state.
func (q *convQueue) idle() bool {
	return !q.inFlight && len(q.items) == 0 && len(q.carried) == 0 && q.attempts == 0 && q.quotaWaits == 0
}

func (q *convQueue) waiting() int { return len(q.items) + len(q.carried) }

// The queue operations, on the conversation table. Each changes one conversation through
// update, so a conversation left with nothing is forgotten.

// Push appends an accepted event. It reports the event dropped to respect the cap, if any.
func (t *conversations) Push(k convKey, ev *nostr.Event, now time.Time) (dropped *nostr.Event) {
	return t.PushItem(k, queued{Event: ev, ReceivedAt: now})
}

// PushItem is Push of an event with its prompt tag.
func (t *conversations) PushItem(k convKey, it queued) (dropped *nostr.Event) {
	t.update(k, func(c *conversation) {
		q := &c.q
		q.items = append(q.items, it)
		if len(q.items) > maxQueued {
			dropped = q.items[0].Event
			q.items = q.items[1:]
		}
	})
	return dropped
}

// PushFront puts an event at the head of its conversation (journal replay of an interrupted
// batch, a steer the agent did not take).
func (t *conversations) PushFront(k convKey, ev *nostr.Event, receivedAt time.Time) {
	t.PushFrontItem(k, queued{Event: ev, ReceivedAt: receivedAt})
}

// PushFrontItem is PushFront of an event with its prompt tag.
func (t *conversations) PushFrontItem(k convKey, it queued) {
	t.update(k, func(c *conversation) {
		c.q.items = append([]queued{it}, c.q.items...)
	})
}

// Next picks the ready conversation with the oldest head event, drains up to maxBatch events
// sorted by created_at, and marks it in flight. ok is false when nothing is ready.
func (t *conversations) Next(now time.Time) (b *Batch, ok bool) { return t.NextWhere(now, nil) }

// NextWhere is Next among the conversations ready also says may start now (nil: all).
func (t *conversations) NextWhere(now time.Time, ready func(*conversation) bool) (b *Batch, ok bool) {
	var best *conversation
	var bestAt time.Time
	for _, c := range t.m {
		q := &c.q
		if q.inFlight || q.waiting() == 0 || now.Before(q.notBefore) {
			continue
		}
		if ready != nil && !ready(c) {
			continue
		}
		head := q.head()
		if best == nil || head.Before(bestAt) || (head.Equal(bestAt) && c.key.String() < best.key.String()) {
			best, bestAt = c, head
		}
	}
	if best == nil {
		return nil, false
	}
	t.update(best.key, func(c *conversation) { b = c.q.next(c.key) })
	return b, true
}

// next takes the conversation's next batch and marks it in flight.
func (q *convQueue) next(k convKey) *Batch {
	n := min(len(q.items), maxBatch)
	items := slices.Clone(q.items[:n])
	q.items = q.items[n:]
	// Relays replay newest-first; the prompt's last event must be the newest.
	slices.SortStableFunc(items, func(a, b queued) int { return int(a.Event.CreatedAt) - int(b.Event.CreatedAt) })
	q.inFlight = true
	b := &Batch{Conv: k, Items: items, Attempt: q.attempts, QuotaWaits: q.quotaWaits}
	if len(q.carried) > 0 {
		// With nothing new to fold in, the carried events are simply the batch again.
		if len(items) > 0 {
			b.Carried, b.Reason = len(q.carried), q.reason
		}
		b.Items = append(q.carried, items...)
		q.carried = nil
	}
	return b
}

// head is when the conversation's oldest waiting event arrived.
func (q *convQueue) head() time.Time {
	if len(q.carried) > 0 {
		return q.carried[0].ReceivedAt
	}
	return q.items[0].ReceivedAt
}

// Carry ends a turn cancelled so newer events can join it: its events lead the conversation's
// next batch, framed by reason, and the conversation may run again at once.
func (t *conversations) Carry(b *Batch, reason prompt.MergeReason) {
	t.update(b.Conv, func(c *conversation) {
		c.q.inFlight = false
		c.q.carried = slices.Clone(b.Items)
		c.q.reason = reason
	})
}

// Take removes a queued event (a native steer hands it to the running turn instead).
func (t *conversations) Take(k convKey, id string) (it queued, ok bool) {
	if t.get(k) == nil {
		return queued{}, false
	}
	t.update(k, func(c *conversation) {
		for i, x := range c.q.items {
			if x.Event.ID == id {
				c.q.items = slices.Delete(c.q.items, i, i+1)
				it, ok = x, true
				return
			}
		}
	})
	return it, ok
}

// Complete ends a successful turn: the conversation may run again and its failure count resets.
func (t *conversations) Complete(k convKey) {
	t.update(k, func(c *conversation) {
		c.q.inFlight = false
		c.q.attempts, c.q.quotaWaits = 0, 0
		c.q.notBefore = time.Time{}
	})
}

// Requeue puts a failed batch back at the front with backoff. After maxAttempts failures it
// returns deadLetter = true and the batch is not requeued: the caller sends a failure notice.
func (t *conversations) Requeue(b *Batch, now time.Time) (deadLetter bool) {
	t.update(b.Conv, func(c *conversation) {
		q := &c.q
		q.inFlight = false
		q.attempts++
		if q.attempts >= maxAttempts {
			q.attempts = 0
			q.notBefore = time.Time{}
			deadLetter = true
			return
		}
		d := retryBase << (q.attempts - 1)
		if d > retryCap || d <= 0 {
			d = retryCap
		}
		q.notBefore = now.Add(time.Duration(float64(d) * t.jitter()))
		q.items = append(slices.Clone(b.Items), q.items...)
		if len(q.items) > maxQueued {
			q.items = q.items[len(q.items)-maxQueued:]
		}
	})
	return deadLetter
}

// RequeueAt puts a failed batch back to wait until at — a provider named when its quota
// resets — without counting the failure: waiting out a quota is not the batch's fault.
func (t *conversations) RequeueAt(b *Batch, at time.Time) {
	t.update(b.Conv, func(c *conversation) {
		c.q.inFlight = false
		c.q.quotaWaits++
		c.q.notBefore = at
		c.q.items = append(slices.Clone(b.Items), c.q.items...)
	})
}

// Return puts a batch back at the front without counting a failure (no agent was free, or the
// agent died for reasons unrelated to this batch).
func (t *conversations) Return(b *Batch) {
	t.update(b.Conv, func(c *conversation) {
		c.q.inFlight = false
		c.q.items = append(slices.Clone(b.Items), c.q.items...)
	})
}

// Drop ends an in-flight batch without requeueing it (owner cancel or rotate).
func (t *conversations) Drop(k convKey) {
	t.update(k, func(c *conversation) { c.q.inFlight = false })
}

// Drain removes every queued event of a channel, in all its conversations (the agent left it),
// and returns them.
func (t *conversations) Drain(channelID string) []*nostr.Event {
	var out []*nostr.Event
	t.inChannel(channelID, func(c *conversation) {
		for _, it := range append(c.q.carried, c.q.items...) {
			out = append(out, it.Event)
		}
		c.q.items, c.q.carried = nil, nil
		if !c.q.inFlight {
			c.q.attempts, c.q.quotaWaits, c.q.notBefore = 0, 0, time.Time{}
		}
	})
	return out
}

// InFlight reports how many of a channel's conversations have a batch in flight.
func (t *conversations) InFlight(channelID string) int {
	n := 0
	for k, c := range t.m {
		if k.Channel == channelID && c.q.inFlight {
			n++
		}
	}
	return n
}

// Len reports queued (not in-flight) events of a channel, over all its conversations.
func (t *conversations) Len(channelID string) int {
	n := 0
	for k, c := range t.m {
		if k.Channel == channelID {
			n += c.q.waiting()
		}
	}
	return n
}

// Pending reports whether any conversation has queued events.
func (t *conversations) Pending() bool {
	for _, c := range t.m {
		if c.q.waiting() > 0 {
			return true
		}
	}
	return false
}
