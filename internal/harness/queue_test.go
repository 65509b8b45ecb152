package harness

import (
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
)

func ev(id string, created int64) *nostr.Event {
	return &nostr.Event{ID: id, CreatedAt: nostr.Timestamp(created), Kind: 9}
}

func newTestQueue() *conversations {
	return newConversations(time.Now, func() float64 { return 1 })
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestQueueRunsOneBatchPerChannelAtATime(t *testing.T) {
	q := newTestQueue()
	q.Push(protocol.ChannelConversation("a"), ev("1", 1), t0)
	b, ok := q.Next(t0)
	if !ok || b.Conv != protocol.ChannelConversation("a") {
		t.Fatalf("first Next = %v %v", b, ok)
	}
	q.Push(protocol.ChannelConversation("a"), ev("2", 2), t0)
	if _, ok := q.Next(t0); ok {
		t.Fatal("second batch for an in-flight channel was handed out")
	}
	q.Complete(protocol.ChannelConversation("a"))
	if b, ok := q.Next(t0); !ok || b.IDs()[0] != "2" {
		t.Fatalf("after Complete, Next = %v %v", b, ok)
	}
}

func TestQueuePicksChannelWithOldestHead(t *testing.T) {
	q := newTestQueue()
	q.Push(protocol.ChannelConversation("late"), ev("l", 1), t0.Add(2*time.Second))
	q.Push(protocol.ChannelConversation("early"), ev("e", 1), t0.Add(time.Second))
	b, _ := q.Next(t0.Add(3 * time.Second))
	if b.Conv != protocol.ChannelConversation("early") {
		t.Fatalf("picked %s, want early", b.Conv)
	}
}

func TestQueueSortsBatchByCreatedAtAndCapsAtFifty(t *testing.T) {
	q := newTestQueue()
	for i := 60; i > 0; i-- { // newest first, as a relay replays
		q.Push(protocol.ChannelConversation("a"), ev(string(rune('A'+i%26))+time.Duration(i).String(), int64(i)), t0)
	}
	b, _ := q.Next(t0)
	if len(b.Items) != maxBatch {
		t.Fatalf("batch size %d, want %d", len(b.Items), maxBatch)
	}
	for i := 1; i < len(b.Items); i++ {
		if b.Items[i-1].Event.CreatedAt > b.Items[i].Event.CreatedAt {
			t.Fatal("batch not sorted by created_at")
		}
	}
	if q.Len("a") != 10 {
		t.Fatalf("left %d queued, want 10", q.Len("a"))
	}
}

func TestQueueRequeueBacksOffThenDeadLettersAfterTenFailures(t *testing.T) {
	q := newTestQueue()
	q.Push(protocol.ChannelConversation("a"), ev("1", 1), t0)
	now := t0
	for attempt := 1; attempt < maxAttempts; attempt++ {
		b, ok := q.Next(now)
		if !ok {
			t.Fatalf("attempt %d: nothing ready at %v", attempt, now)
		}
		if q.Requeue(b, now) {
			t.Fatalf("dead-lettered after only %d failures", attempt)
		}
		want := retryBase << (attempt - 1)
		if want > retryCap {
			want = retryCap
		}
		if _, ok := q.Next(now.Add(want - time.Millisecond)); ok {
			t.Fatalf("attempt %d: ready before its %v backoff", attempt, want)
		}
		now = now.Add(want)
	}
	b, ok := q.Next(now)
	if !ok {
		t.Fatal("final attempt not ready")
	}
	if !q.Requeue(b, now) {
		t.Fatal("tenth failure did not dead-letter")
	}
	if q.Pending() {
		t.Fatal("dead-lettered batch is still queued")
	}
}

func TestQueueReturnKeepsEventsWithoutPenalty(t *testing.T) {
	q := newTestQueue()
	q.Push(protocol.ChannelConversation("a"), ev("1", 1), t0)
	b, _ := q.Next(t0)
	q.Return(b)
	if b2, ok := q.Next(t0); !ok || b2.IDs()[0] != "1" || b2.Attempt != 0 {
		t.Fatalf("returned batch = %+v %v", b2, ok)
	}
}

func TestQueueDropsOldestOverCap(t *testing.T) {
	q := newTestQueue()
	var dropped *nostr.Event
	for i := 0; i <= maxQueued; i++ {
		dropped = q.Push(protocol.ChannelConversation("a"), ev(time.Duration(i).String(), int64(i)), t0)
	}
	if dropped == nil || dropped.ID != time.Duration(0).String() {
		t.Fatalf("dropped %v, want the oldest", dropped)
	}
}

func TestQuotaResetParsesWaitsProvidersName(t *testing.T) {
	cases := map[string]time.Duration{
		"rate-limited: quota exceeded; retry in 30s":                      30 * time.Second,
		"API Error: 429 usage limit reached, try again in 2 hours":        2 * time.Hour,
		"Your limit resets in 45 minutes.":                                45 * time.Minute,
		"Rate limit: retry after 1.5 seconds":                             1500 * time.Millisecond,
		"weekly quota exhausted; available again in 400 hours (tomorrow)": maxQuotaWait,
	}
	for msg, want := range cases {
		if got, ok := quotaReset(msg); !ok || got != want {
			t.Errorf("%q: got %v %v, want %v", msg, got, ok, want)
		}
	}
	for _, msg := range []string{"internal error", "retry later", "connection reset by peer"} {
		if _, ok := quotaReset(msg); ok {
			t.Errorf("%q: found a wait where none is named", msg)
		}
	}
}

func TestQueueRequeueAtWaitsWithoutCountingAFailure(t *testing.T) {
	q := newTestQueue()
	q.Push(protocol.ChannelConversation("a"), ev("1", 1), t0)
	b, _ := q.Next(t0)
	q.RequeueAt(b, t0.Add(time.Hour))
	if _, ok := q.Next(t0.Add(59 * time.Minute)); ok {
		t.Fatal("batch ran before the named quota reset")
	}
	b, ok := q.Next(t0.Add(time.Hour))
	if !ok || b.Attempt != 0 {
		t.Fatalf("after the reset: %+v %v (a quota wait must not count as a failure)", b, ok)
	}
}
