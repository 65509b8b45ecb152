package relay_test

import (
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/relay/relaytest"
)

// BenchmarkFanOutBesideBloatedConnection times one normal subscriber's delivery, with and
// without another connection holding as many live filters as its budget allows (1,024
// subscriptions of 10 filters, ~600 KiB, none matching). The bloated connection should cost
// only itself: compare p50-ms of bloated=1 with bloated=0 (docs/benchmarks.md).
//
//	go test -run '^$' -bench FanOutBesideBloated -benchtime 2000x -count 3 ./internal/relay/
func BenchmarkFanOutBesideBloatedConnection(b *testing.B) {
	for _, bloated := range []int{0, 1} {
		b.Run(fmt.Sprintf("bloated=%d", bloated), func(b *testing.B) {
			s := relaytest.Start(b)
			owner := newUser()
			ch := s.CreateChannel(b, owner.sk, "fanout", false)
			if bloated == 1 {
				bc := benchDial(b, s, newUser().sk)
				for i := range 1024 {
					fs := []any{"REQ", "b" + strconv.Itoa(i)}
					for range 10 {
						fs = append(fs, map[string]any{"kinds": []int{9}, "#h": channelIDs(1), "limit": 0})
					}
					bc.write(b, fs)
					if m := bc.waitFor(b, "EOSE"); m[1] != "b"+strconv.Itoa(i) {
						b.Fatalf("bloated REQ %d: %v", i, m)
					}
				}
			}
			sub := benchDial(b, s, newUser().sk)
			sub.write(b, []any{"REQ", "live", map[string]any{"kinds": []int{9}, "#h": []string{ch}, "limit": 0}})
			sub.waitFor(b, "EOSE")
			pub := benchDial(b, s, owner.sk)
			events := make([]nostr.Event, b.N)
			for i := range events {
				events[i] = nostr.Event{Kind: 9, CreatedAt: nostr.Now(), Content: "fan " + strconv.Itoa(i), Tags: nostr.Tags{{"h", ch}}}
				events[i].Sign(owner.sk)
			}
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range events {
				sent := time.Now()
				pub.write(b, []any{"EVENT", events[i]})
				sub.waitFor(b, "EVENT")
				lat = append(lat, time.Since(sent))
				pub.waitFor(b, "OK")
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}
