package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/client"
	"github.com/buzz-harness/buzz/internal/relay/relaytest"
)

// subRecorder stands in for the live session: it records REQs and CLOSEs and answers Resume
// with a floor the test sets.
type subRecorder struct {
	subs   map[string][]nostr.Filter
	floors map[string]nostr.Timestamp
	reqs   []string
	closes []string
}

func newSubRecorder() *subRecorder {
	return &subRecorder{subs: map[string][]nostr.Filter{}, floors: map[string]nostr.Timestamp{}}
}

func (r *subRecorder) Subscribe(id string, fs ...nostr.Filter) {
	r.subs[id] = fs
	r.reqs = append(r.reqs, id)
	delete(r.floors, id)
}

func (r *subRecorder) Unsubscribe(id string) {
	delete(r.subs, id)
	r.closes = append(r.closes, id)
}

func (r *subRecorder) Resume(id string) (*nostr.Timestamp, bool) {
	fs, ok := r.subs[id]
	if !ok {
		return nil, false
	}
	if fl, ok := r.floors[id]; ok {
		return &fl, true
	}
	return fs[0].Since, true
}

// channelsOf lists the channels of a recorded REQ, checking every filter's since and size.
func channelsOf(t *testing.T, fs []nostr.Filter, since nostr.Timestamp) []string {
	t.Helper()
	var ids []string
	for _, f := range fs {
		if f.Since == nil || *f.Since != since {
			t.Fatalf("a filter's since is %v, want %d", f.Since, since)
		}
		if len(f.Tags["h"]) > subFilterSize {
			t.Fatalf("a filter lists %d channels, over %d", len(f.Tags["h"]), subFilterSize)
		}
		ids = append(ids, f.Tags["h"]...)
	}
	if len(fs) > 10 {
		t.Fatalf("%d filters in one REQ; the relay takes 10", len(fs))
	}
	return ids
}

func hFilter(ids []string) nostr.Filter { return nostr.Filter{Tags: nostr.TagMap{"h": ids}} }

func chanID(i int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", i) }

func TestThousandChannelsUseTenSubscriptionsEachChannelInOne(t *testing.T) {
	g, rec := newSubGroups(), newSubRecorder()
	start := time.Unix(1_000_000, 0)
	for i := range 1000 {
		g.add(chanID(i), start, false)
	}
	g.flush(rec, hFilter)
	if len(rec.subs) != 10 || len(rec.reqs) != 10 {
		t.Fatalf("%d subscriptions (%d REQs), want 10", len(rec.subs), len(rec.reqs))
	}
	covered := map[string]int{}
	for _, fs := range rec.subs {
		for _, id := range channelsOf(t, fs, nostr.Timestamp(start.Unix())) {
			covered[id]++
		}
	}
	for i := range 1000 {
		if covered[chanID(i)] != 1 {
			t.Fatalf("channel %d is in %d subscriptions", i, covered[chanID(i)])
		}
	}
}

// A joined channel re-sends only its group's REQ, from the earlier of the group's resume point
// and the channel's own since; the channel that left does the same, and an emptied group closes.
func TestJoinAndLeaveResendOnlyTheirGroupFromASinceThatLosesNothing(t *testing.T) {
	g, rec := newSubGroups(), newSubRecorder()
	start := time.Unix(1_000_000, 0)
	for i := range 150 {
		g.add(chanID(i), start, false)
	}
	g.flush(rec, hFilter)
	rec.reqs = nil
	rec.floors[groupSubID(0)] = 1_000_500 // group 0 has delivered up to here
	rec.floors[groupSubID(1)] = 1_000_900

	g.remove(chanID(3)) // room in group 0
	joined := time.Unix(1_000_200, 0)
	g.add(chanID(1000), joined, false)
	g.flush(rec, hFilter)
	if len(rec.reqs) != 1 || rec.reqs[0] != groupSubID(0) {
		t.Fatalf("REQs %v, want only %s", rec.reqs, groupSubID(0))
	}
	// The joined channel's since is before the group's floor.
	if ids := channelsOf(t, rec.subs[groupSubID(0)], 1_000_200); len(ids) != 100 {
		t.Fatalf("group 0 lists %d channels, want 100", len(ids))
	}

	rec.reqs = nil
	g.remove(chanID(120))
	g.flush(rec, hFilter)
	if len(rec.reqs) != 1 || rec.reqs[0] != groupSubID(1) {
		t.Fatalf("after a leave: REQs %v, want %s", rec.reqs, groupSubID(1))
	}
	channelsOf(t, rec.subs[groupSubID(1)], 1_000_900) // from its floor
	for i := 100; i < 150; i++ {
		g.remove(chanID(i))
	}
	g.flush(rec, hFilter)
	if len(rec.closes) != 1 || rec.closes[0] != groupSubID(1) || g.count() != 1 {
		t.Fatalf("closes %v, groups %d; want %s closed and 1 group left", rec.closes, g.count(), groupSubID(1))
	}
	g.add(chanID(2000), joined, false) // reuses the freed number
	g.flush(rec, hFilter)
	if _, ok := rec.subs[groupSubID(1)]; !ok || g.count() != 2 {
		t.Fatalf("a new group did not reuse %s", groupSubID(1))
	}
}

// A group the relay closed (the live session forgot it) is sent again from where it would have
// resumed.
func TestClosedGroupIsResentFromWhereItLastAsked(t *testing.T) {
	g, rec := newSubGroups(), newSubRecorder()
	start := time.Unix(1_000_000, 0)
	for i := range 5 {
		g.add(chanID(i), start, false)
	}
	g.flush(rec, hFilter)
	delete(rec.subs, groupSubID(0)) // the relay's CLOSED: Live forgets the id
	g.closed(0, time.Unix(1_000_300, 0))
	g.remove(chanID(1))
	rec.reqs = nil
	g.flush(rec, hFilter)
	if len(rec.reqs) != 1 || len(channelsOf(t, rec.subs[groupSubID(0)], 1_000_300)) != 4 {
		t.Fatalf("REQs %v, want group 0 again from 1000300 with 4 channels", rec.reqs)
	}
}

// BenchmarkSubscribe1000Channels is one live session listening to 1,000 channels through the
// real relay, from connect until every subscription's stored history is in (EOSE): one REQ per
// channel (before) against the groups of subGroupSize (now). It reports the subscriptions held
// and the REQ bytes sent.
func BenchmarkSubscribe1000Channels(b *testing.B) {
	r := relaytest.Start(b)
	sk, pk := testKey(b)
	ids := make([]string, 1000)
	for i := range ids {
		ids[i] = chanID(i)
	}
	filter := func(ids []string) nostr.Filter {
		return nostr.Filter{Kinds: []int{9}, Tags: nostr.TagMap{"h": ids, "p": {pk}}}
	}
	plans := map[string]func() map[string][]nostr.Filter{
		"per-channel": func() map[string][]nostr.Filter {
			out := map[string][]nostr.Filter{}
			for _, id := range ids {
				out["ch-"+id] = []nostr.Filter{filter([]string{id})}
			}
			return out
		},
		"grouped": func() map[string][]nostr.Filter {
			g, rec := newSubGroups(), newSubRecorder()
			for _, id := range ids {
				g.add(id, time.Now(), false)
			}
			g.flush(rec, filter)
			return rec.subs
		},
	}
	for _, name := range []string{"per-channel", "grouped"} {
		b.Run(name, func(b *testing.B) {
			var subs, bytes int
			for b.Loop() {
				plan := plans[name]()
				subs, bytes = len(plan), 0
				ctx, cancel := context.WithCancel(context.Background())
				live := client.NewLive(client.LiveConfig{RelayURL: r.URL, SecretKey: sk})
				for id, fs := range plan {
					raw, _ := json.Marshal(append([]any{"REQ", id}, anySlice(fs)...))
					bytes += len(raw)
					live.Subscribe(id, fs...)
				}
				done := make(chan error, 1)
				go func() { done <- live.Run(ctx) }()
				for eose := 0; eose < len(plan); {
					in := <-live.Events()
					switch {
					case in.EOSE:
						eose++
					case in.Closed != "":
						b.Fatalf("relay closed %s: %s", in.SubID, in.Closed)
					}
				}
				cancel()
				<-done
			}
			b.ReportMetric(float64(subs), "subs")
			b.ReportMetric(float64(bytes), "req-bytes")
		})
	}
}

func anySlice(fs []nostr.Filter) []any {
	out := make([]any, len(fs))
	for i, f := range fs {
		out[i] = f
	}
	return out
}

// The owner's channels never share a subscription with others' channels, whatever the order
// they come in.
func TestOwnerChannelsNeverShareAGroupWithOthers(t *testing.T) {
	g, rec := newSubGroups(), newSubRecorder()
	owned := map[string]bool{}
	for i := range 250 {
		owned[chanID(i)] = i%7 == 0
		g.add(chanID(i), time.Unix(1_000_000, 0), owned[chanID(i)])
	}
	g.flush(rec, hFilter)
	for sub, fs := range rec.subs {
		ids := channelsOf(t, fs, 1_000_000)
		for _, id := range ids {
			if owned[id] != owned[ids[0]] {
				t.Fatalf("%s mixes the owner's channels with others'", sub)
			}
		}
	}
	if len(rec.subs) != 4 { // 36 owner-shared in one group, 214 others in three
		t.Fatalf("%d subscriptions, want 4", len(rec.subs))
	}
}
