package observer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
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
	b.Publish(Scope{}, AgentExited{})
	b.now = func() time.Time { return t0.Add(time.Second) }
	b.Publish(Scope{}, AgentExited{})
	h := b.History()
	if h[0].Seq != 1 || h[1].Seq != 2 {
		t.Fatalf("seqs = %v, want [1 2]", seqs(h))
	}
	if !h[0].Time.Equal(t0) || !h[1].Time.Equal(t0.Add(time.Second)) {
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
		b.Publish(Scope{}, AgentUpdate{Kind: "agent_message_chunk", Text: string(rune('a' + i%26))})
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
		b.Publish(Scope{}, AgentExited{})
	}
	ch, hist := b.Subscribe(t.Context(), 10)
	b.Publish(Scope{}, AgentExited{})
	live := collect(t, ch, 1)
	if len(hist) != 5 || hist[4].Seq != 5 || live[0].Seq != 6 {
		t.Fatalf("history %v live %v", seqs(hist), seqs(live))
	}
}

func TestHistoryKeepsOnlyTheLastN(t *testing.T) {
	b := NewBus(3)
	for range 7 {
		b.Publish(Scope{}, AgentExited{})
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
			b.Publish(Scope{}, ACPLine{})
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
	b.Publish(Scope{}, ACPLine{}) // now there is room: the gap marker, then this event
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
	b.Publish(Scope{}, AgentExited{})
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
	b.Publish(Scope{}, AgentExited{}) // must not panic on the closed channel
}

func TestNilBusIgnoresPublish(t *testing.T) {
	var b *Bus
	b.Publish(Scope{}, AgentExited{})
}

func TestWriteJSONLinesWritesHistoryThenLiveEventsRedacted(t *testing.T) {
	b := NewBus(100)
	b.Publish(Scope{}, AgentSpawned{PID: 42})
	b.Publish(Scope{ChannelID: "c1"}, ACPLine{Dir: "send",
		Line: `{"method":"session/new","params":{"env":[{"name":"BUZZ_PRIVATE_KEY","value":"` + strings.Repeat("ab", 32) + `"}]}}`})

	var buf bytes.Buffer
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { errc <- WriteJSONLines(ctx, b, &buf) }()
	b.Publish(Scope{TurnID: "t1"}, TurnEnded{StopReason: "end_turn", DurationMs: 12})
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
	if evs[0]["type"] != string(TypeAgentSpawned) || evs[2]["type"] != string(TypeTurnEnded) || evs[2]["turnId"] != "t1" {
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
	synctest.Test(t, func(t *testing.T) {
		b := NewBus(10)
		b.Publish(Scope{}, AgentExited{})
		err := WriteJSONLines(t.Context(), b, failingWriter{})
		if err == nil || !strings.Contains(err.Error(), "disk full") {
			t.Fatalf("err = %v", err)
		}
		synctest.Wait() // the subscription ends on its own goroutine once the context is cancelled
		if n := b.Subscribers(); n != 0 {
			t.Fatalf("%d subscriptions left behind after the write error", n)
		}
	})
}

func TestMarshalLineKeepsEventWhenDataCannotBeEncoded(t *testing.T) {
	line := MarshalLine(Event{Seq: 3, Type: TypeTurnEnded, Data: TurnEnded{Usage: json.RawMessage("{not json")}})
	var m map[string]any
	if err := json.Unmarshal(line, &m); err != nil {
		t.Fatalf("%v: %s", err, line)
	}
	if m["seq"] != float64(3) || m["type"] != "turn_ended" || m["data"].(map[string]any)["encodeError"] == nil {
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
				b.Publish(Scope{}, AgentExited{})
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
	line := ACPLine{Dir: "recv", Line: `{"jsonrpc":"2.0"}`}
	for b.Loop() {
		bus.Publish(Scope{ChannelID: "c"}, line)
	}
	b.StopTimer()
	cancel()
	wg.Wait()
}

func BenchmarkPublishNoSubscribers(b *testing.B)    { benchPublish(b, 0) }
func BenchmarkPublishThreeSubscribers(b *testing.B) { benchPublish(b, 3) }

func BenchmarkMarshalLine(b *testing.B) {
	e := Event{Seq: 1, Time: time.Now(), Type: TypeACPLine, Data: ACPLine{Dir: "recv",
		Line: `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hello there"}}}}`}}
	for b.Loop() {
		_ = MarshalLine(e)
	}
}

func TestEventTypeAndScopeComeFromWhatIsPublished(t *testing.T) {
	b := NewBus(10)
	sc := Scope{ChannelID: "c", SessionID: "s", TurnID: "t"}
	b.Publish(sc, AgentUpdate{Kind: "agent_message_chunk", Text: "hi"})
	b.Publish(Scope{SessionID: "s"}, AgentUpdate{Kind: "user_message_chunk", Replay: true})
	h := b.History()
	if h[0].Type != TypeAgentUpdate || h[0].Scope != sc {
		t.Errorf("live update published as %q in %+v", h[0].Type, h[0].Scope)
	}
	if h[1].Type != TypeHistory {
		t.Errorf("replayed update published as %q, want %q", h[1].Type, TypeHistory)
	}
	line := string(MarshalLine(h[0]))
	for _, want := range []string{`"type":"agent_update"`, `"channelId":"c"`, `"sessionId":"s"`, `"turnId":"t"`, `"data":{"kind":"agent_message_chunk","replay":false,"text":"hi"}`} {
		if !strings.Contains(line, want) {
			t.Errorf("line lacks %s: %s", want, line)
		}
	}
}
