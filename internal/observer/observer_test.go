package observer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

func collect(t *testing.T, ch <-chan Event, n int) []Event {
	t.Helper()
	out := make([]Event, 0, n)
	deadline := time.After(5 * time.Second)
	for len(out) < n {
		select {
		case e, ok := <-ch:
			if !ok {
				t.Fatalf("channel closed after %d of %d events", len(out), n)
			}
			out = append(out, e)
		case <-deadline:
			t.Fatalf("got %d of %d events before the deadline", len(out), n)
		}
	}
	return out
}

func seqs(es []Event) []uint64 {
	out := make([]uint64, len(es))
	for i, e := range es {
		out[i] = e.Seq
	}
	return out
}

func TestPublishStampsIncreasingSeqAndClockTime(t *testing.T) {
	b := NewBus(10)
	t0 := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	b.now = func() time.Time { return t0 }
	b.Publish(Event{Type: TypeLog, Seq: 99})
	fixed := t0.Add(-time.Hour)
	b.Publish(Event{Type: TypeLog, Time: fixed})
	h := b.History()
	if h[0].Seq != 1 || h[1].Seq != 2 {
		t.Fatalf("seqs = %v, want [1 2] (caller's Seq ignored)", seqs(h))
	}
	if !h[0].Time.Equal(t0) || !h[1].Time.Equal(fixed) {
		t.Fatalf("times = %v, %v", h[0].Time, h[1].Time)
	}
}

func TestSubscriberReceivesEventsInPublishOrder(t *testing.T) {
	b := NewBus(0)
	ch, hist := b.Subscribe(t.Context(), 100)
	if len(hist) != 0 {
		t.Fatal("history from a history-less bus")
	}
	for i := range 50 {
		b.Publish(Event{Type: TypeAgentMessage, Data: AgentMessage{Text: string(rune('a' + i%26))}})
	}
	got := collect(t, ch, 50)
	for i, e := range got {
		if e.Seq != uint64(i+1) {
			t.Fatalf("event %d has seq %d", i, e.Seq)
		}
	}
}

func TestLateSubscriberGetsHistoryThenLiveWithNoOverlapOrHole(t *testing.T) {
	b := NewBus(100)
	for range 5 {
		b.Publish(Event{Type: TypeLog})
	}
	ch, hist := b.Subscribe(t.Context(), 10)
	b.Publish(Event{Type: TypeLog})
	live := collect(t, ch, 1)
	if len(hist) != 5 || hist[4].Seq != 5 || live[0].Seq != 6 {
		t.Fatalf("history %v live %v", seqs(hist), seqs(live))
	}
}

func TestHistoryKeepsOnlyTheLastN(t *testing.T) {
	b := NewBus(3)
	for range 7 {
		b.Publish(Event{Type: TypeLog})
	}
	if got := seqs(b.History()); len(got) != 3 || got[0] != 5 || got[2] != 7 {
		t.Fatalf("history = %v, want [5 6 7]", got)
	}
}

func TestSlowSubscriberDoesNotBlockPublisherAndGetsGapMarker(t *testing.T) {
	b := NewBus(0)
	slow, _ := b.Subscribe(t.Context(), 2)
	fast, _ := b.Subscribe(t.Context(), 2000)

	done := make(chan struct{})
	go func() {
		for range 1000 {
			b.Publish(Event{Type: TypeACPLine})
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Publish blocked on a subscriber that never reads")
	}
	if got := collect(t, fast, 1000); got[999].Seq != 1000 {
		t.Fatalf("fast subscriber last seq %d", got[999].Seq)
	}

	first := collect(t, slow, 2)
	if first[0].Seq != 1 || first[1].Seq != 2 {
		t.Fatalf("slow subscriber first events %v", seqs(first))
	}
	b.Publish(Event{Type: TypeACPLine}) // now there is room: the gap marker, then this event
	next := collect(t, slow, 2)
	gap, ok := next[0].Data.(Gap)
	if next[0].Type != TypeGap || !ok || gap.Missed != 998 || gap.LastSeq != 1000 {
		t.Fatalf("want gap{998, 1000}, got %+v", next[0])
	}
	if next[1].Seq != 1001 {
		t.Fatalf("after gap got seq %d, want 1001", next[1].Seq)
	}
}

func TestSubscriptionEndsWithItsContext(t *testing.T) {
	b := NewBus(0)
	ctx, cancel := context.WithCancel(t.Context())
	ch, _ := b.Subscribe(ctx, 4)
	b.Publish(Event{Type: TypeLog})
	cancel()
	// The buffered event is still readable, then the channel is closed.
	e, ok := <-ch
	if !ok || e.Seq != 1 {
		t.Fatalf("buffered event lost: %+v %v", e, ok)
	}
	if _, ok := <-ch; ok {
		t.Fatal("channel still open after cancel")
	}
	if b.Subscribers() != 0 {
		t.Fatalf("Subscribers = %d after cancel", b.Subscribers())
	}
	b.Publish(Event{Type: TypeLog}) // must not panic on the closed channel
}

func TestNilBusIgnoresPublish(t *testing.T) {
	var b *Bus
	b.Publish(Event{Type: TypeLog})
}

func TestWriteJSONLinesWritesHistoryThenLiveEventsRedacted(t *testing.T) {
	b := NewBus(100)
	b.Publish(Event{Type: TypeAgentSpawned, Data: AgentSpawned{PID: 42}})
	b.Publish(Event{Type: TypeACPLine, ChannelID: "c1", Data: ACPLine{Dir: "out",
		Line: `{"method":"session/new","params":{"env":[{"name":"BUZZ_PRIVATE_KEY","value":"` + strings.Repeat("ab", 32) + `"}]}}`}})

	var buf bytes.Buffer
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { errc <- WriteJSONLines(ctx, b, &buf) }()
	b.Publish(Event{Type: TypeTurnEnded, TurnID: "t1", Data: TurnEnded{StopReason: "end_turn", DurationMs: 12}})
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}

	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("want 3 lines, got %d:\n%s", len(lines), buf.String())
	}
	var evs []map[string]any
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line is not JSON: %v\n%s", err, l)
		}
		evs = append(evs, m)
	}
	if evs[0]["type"] != TypeAgentSpawned || evs[2]["type"] != TypeTurnEnded || evs[2]["turnId"] != "t1" {
		t.Fatalf("unexpected lines:\n%s", buf.String())
	}
	if evs[2]["data"].(map[string]any)["stopReason"] != "end_turn" {
		t.Fatalf("data not encoded: %v", evs[2])
	}
	if strings.Contains(buf.String(), strings.Repeat("ab", 32)) || !strings.Contains(lines[1], Redacted) {
		t.Fatalf("private key reached the activity log:\n%s", lines[1])
	}
	if _, has := evs[0]["sessionId"]; has {
		t.Fatal("empty sessionId not omitted")
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestWriteJSONLinesStopsAndUnsubscribesOnWriteError(t *testing.T) {
	b := NewBus(10)
	b.Publish(Event{Type: TypeLog})
	err := WriteJSONLines(t.Context(), b, failingWriter{})
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("err = %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for b.Subscribers() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("subscription left behind after write error")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestMarshalLineKeepsEventWhenDataCannotBeEncoded(t *testing.T) {
	line := MarshalLine(Event{Seq: 3, Type: TypeToolCall, Data: make(chan int)})
	var m map[string]any
	if err := json.Unmarshal(line, &m); err != nil {
		t.Fatalf("%v: %s", err, line)
	}
	if m["seq"] != float64(3) || m["data"].(map[string]any)["encodeError"] == nil {
		t.Fatalf("line = %s", line)
	}
}

func TestConcurrentPublishersKeepSeqUniqueAndOrdered(t *testing.T) {
	b := NewBus(0)
	ch, _ := b.Subscribe(t.Context(), 4000)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				b.Publish(Event{Type: TypeLog})
			}
		}()
	}
	wg.Wait()
	got := collect(t, ch, 4000)
	for i, e := range got {
		if e.Seq != uint64(i+1) {
			t.Fatalf("position %d has seq %d", i, e.Seq)
		}
	}
}

func benchPublish(b *testing.B, subs int) {
	bus := NewBus(1000)
	ctx, cancel := context.WithCancel(b.Context())
	var wg sync.WaitGroup
	for range subs {
		ch, _ := bus.Subscribe(ctx, 1024)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range ch {
			}
		}()
	}
	e := Event{Type: TypeACPLine, ChannelID: "c", Data: ACPLine{Dir: "in", Line: `{"jsonrpc":"2.0"}`}}
	for b.Loop() {
		bus.Publish(e)
	}
	b.StopTimer()
	cancel()
	wg.Wait()
}

func BenchmarkPublishNoSubscribers(b *testing.B)    { benchPublish(b, 0) }
func BenchmarkPublishThreeSubscribers(b *testing.B) { benchPublish(b, 3) }

func BenchmarkMarshalLine(b *testing.B) {
	e := Event{Seq: 1, Time: time.Now(), Type: TypeACPLine, Data: ACPLine{Dir: "in",
		Line: `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hello there"}}}}`}}
	for b.Loop() {
		_ = MarshalLine(e)
	}
}
