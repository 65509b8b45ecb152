package relay_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/buzz-harness/buzz/internal/relay"
	"github.com/buzz-harness/buzz/internal/relay/relaytest"
)

// BenchmarkSlowReadersHeap measures the relay's heap while clients ask for 100 stored 400 KB
// events ten times each and never read (issue 28's slow-reader attack), for 4 and 32 clients.
// heap-MiB is the largest heap in use (after a GC) over 8 s of sampling, above the heap before
// the clients came. It should stay near the result budget (64 MiB) plus the clients' queues of
// live events, whatever the number of clients (docs/benchmarks.md).
//
//	go test -run '^$' -bench SlowReadersHeap -benchtime 1x -count 3 ./internal/relay/
func BenchmarkSlowReadersHeap(b *testing.B) {
	for _, clients := range []int{4, 32} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			s := relaytest.StartWith(b, func(c *relay.Config) { c.WriteTimeout = time.Minute })
			owner := newUser()
			ch := s.CreateChannel(b, owner.sk, "big", false)
			for i := range 100 {
				s.Publish(b, owner.sk, msg(ch, fmt.Sprintf("%03d %s", i, strings.Repeat("x", 400<<10))))
			}
			heap := func() uint64 {
				runtime.GC()
				var m runtime.MemStats
				runtime.ReadMemStats(&m)
				return m.HeapInuse
			}
			base := heap()
			b.ResetTimer()
			for range b.N {
				var conns []*rawConn
				for range clients {
					c := dialRaw(b, s.URL)
					c.mustAuth(newUser().sk, s.URL) // a key each, as an attacker would
					for j := range 10 {
						c.send("REQ", fmt.Sprintf("h%d", j), map[string]any{"kinds": []int{9}, "#h": []string{ch}, "limit": 100})
					}
					conns = append(conns, c) // never read
				}
				var peak uint64
				for end := time.Now().Add(8 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
					peak = max(peak, heap())
				}
				b.ReportMetric(float64(peak-min(peak, base))/(1<<20), "heap-MiB")
				for _, c := range conns {
					c.ws.CloseNow()
				}
			}
		})
	}
}
