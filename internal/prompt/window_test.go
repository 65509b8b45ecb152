package prompt

import (
	"reflect"
	"testing"

	"github.com/nbd-wtf/go-nostr"
)

func ids(evs []nostr.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.ID)
	}
	return out
}

// threadFetch returns the root and n direct replies numbered 100..100+n-1, newest first as a
// relay would return them.
func threadFetch(n int) []nostr.Event {
	out := []nostr.Event{tRoot}
	for i := n - 1; i >= 0; i-- {
		out = append(out, reply(100+i, bob, "r", idN(1), idN(1)))
	}
	return out
}

func TestThreadContextUntruncatedWhenRepliesFitLimit(t *testing.T) {
	w := BuildThreadContext(idN(1), threadFetch(3), nil, 3, -1)
	if w.Truncated || !w.RootPresent || w.Total != 4 {
		t.Fatalf("got truncated=%v root=%v total=%d", w.Truncated, w.RootPresent, w.Total)
	}
	if want := []string{idN(1), idN(100), idN(101), idN(102)}; !reflect.DeepEqual(ids(w.Messages), want) {
		t.Fatalf("not root-first chronological: %v", ids(w.Messages))
	}
}

func TestThreadContextSentinelMarksTruncationAndKeepsNewest(t *testing.T) {
	w := BuildThreadContext(idN(1), threadFetch(4), nil, 3, -1) // limit+1 came back
	if !w.Truncated {
		t.Fatal("sentinel reply should mark the window truncated")
	}
	if want := []string{idN(1), idN(101), idN(102), idN(103)}; !reflect.DeepEqual(ids(w.Messages), want) {
		t.Fatalf("got %v", ids(w.Messages))
	}
	if w.Total != 5 { // 4 replies seen + root
		t.Fatalf("sentinel total = %d, want 5", w.Total)
	}
}

func TestThreadContextTotalUsesRelayCountWhenLarger(t *testing.T) {
	if w := BuildThreadContext(idN(1), threadFetch(4), nil, 3, 40); w.Total != 41 {
		t.Fatalf("total = %d, want count 40 + root", w.Total)
	}
	// A stale count below what we saw cannot shrink the total.
	if w := BuildThreadContext(idN(1), threadFetch(4), nil, 3, 1); w.Total != 5 {
		t.Fatalf("total = %d, want sentinel total 5", w.Total)
	}
}

func TestThreadContextKeepsAgentsNewestReplyInView(t *testing.T) {
	mine := reply(50, agent, "my earlier answer", idN(1), idN(1))
	fetched := append(threadFetch(4), mine)
	w := BuildThreadContext(idN(1), fetched, &mine, 3, -1)
	if want := []string{idN(1), idN(50), idN(102), idN(103)}; !reflect.DeepEqual(ids(w.Messages), want) {
		t.Fatalf("agent reply should replace the oldest shown reply, got %v", ids(w.Messages))
	}
	// Already in view: nothing replaced.
	w = BuildThreadContext(idN(1), threadFetch(3), &nostr.Event{ID: idN(102)}, 3, -1)
	if want := []string{idN(1), idN(100), idN(101), idN(102)}; !reflect.DeepEqual(ids(w.Messages), want) {
		t.Fatalf("got %v", ids(w.Messages))
	}
}

func TestThreadContextWithoutRootReportsRootMissing(t *testing.T) {
	w := BuildThreadContext(idN(1), threadFetch(2)[1:], nil, 5, -1)
	if w.RootPresent || len(w.Messages) != 2 || w.Total != 2 {
		t.Fatalf("got root=%v msgs=%d total=%d", w.RootPresent, len(w.Messages), w.Total)
	}
}

func TestThreadContextDedupsRepeatedReplies(t *testing.T) {
	f := threadFetch(2)
	f = append(f, f[1], f[0])
	w := BuildThreadContext(idN(1), f, nil, 5, -1)
	if len(w.Messages) != 3 {
		t.Fatalf("got %v", ids(w.Messages))
	}
}

func TestConversationContextFullPageCountsAsTruncated(t *testing.T) {
	var f []nostr.Event
	for i := 0; i < 4; i++ {
		f = append(f, msg(60+i, alice, "m"))
	}
	w := BuildConversationContext(f, 4)
	if !w.Truncated || w.Total != 5 || w.Kind != ConversationWindowKind {
		t.Fatalf("got %+v", w)
	}
	w = BuildConversationContext(f[:3], 4)
	if w.Truncated || w.Total != 3 {
		t.Fatalf("short page: got truncated=%v total=%d", w.Truncated, w.Total)
	}
	if want := []string{idN(60), idN(61), idN(62)}; !reflect.DeepEqual(ids(w.Messages), want) {
		t.Fatalf("not chronological: %v", ids(w.Messages))
	}
}

func TestDeltaDropsDeliveredAndBatchButKeepsIDless(t *testing.T) {
	w := ThreadWindow{Messages: []nostr.Event{tRoot, tBob, {Content: "no id"}, tTrigger}}
	out, had := w.Delta(map[string]bool{tBob.ID: true}, IDSet([]nostr.Event{tTrigger}))
	if !had {
		t.Error("hadDelivered should be true")
	}
	if want := []string{tRoot.ID, ""}; !reflect.DeepEqual(ids(out.Messages), want) {
		t.Fatalf("got %v", ids(out.Messages))
	}
	if _, had := w.Delta(nil, IDSet([]nostr.Event{tBob})); had {
		t.Error("batch ids must not count as previously delivered")
	}
}

func TestRenderReportsDeliveredIDsAndStats(t *testing.T) {
	in := completeInput()
	in.Standing, in.IncludeStanding = Standing{Base: "b"}, true
	res := Build(in)
	if want := []string{tTrigger.ID, tRoot.ID, tBob.ID, tAgent.ID}; !reflect.DeepEqual(res.DeliveredIDs, want) {
		t.Fatalf("delivered ids %v", res.DeliveredIDs)
	}
	total := 0
	for _, b := range res.Blocks {
		total += len(b)
	}
	st := res.Stats
	if st.PromptBytes != total || !st.StandingIncluded || st.EventDeltaCount != 1 || st.StandingBytes != len("[Base]\nb") {
		t.Fatalf("stats %+v (blocks total %d)", st, total)
	}
	wantContent := len(tTrigger.Content) + len(tRoot.Content) + len(tBob.Content) + len(tAgent.Content)
	if st.ContentBytes != wantContent {
		t.Fatalf("content bytes %d want %d", st.ContentBytes, wantContent)
	}
}
