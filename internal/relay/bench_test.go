package relay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/relay"
	"github.com/buzz-harness/buzz/internal/relay/relaytest"
)

// Run: go test -run '^$' -bench . -benchtime 4000x ./internal/relay/
// (docs/benchmarks.md, section Relay, records the figures.)

// benchConn is an authenticated raw client whose frames arrive on a channel.
type benchConn struct {
	ws  *websocket.Conn
	in  chan []any
	ctx context.Context
}

func benchDial(b *testing.B, s *relaytest.Server, sk string) *benchConn {
	b.Helper()
	c := dialRaw(b, s.URL)
	c.mustAuth(sk, s.URL)
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	bc := &benchConn{ws: c.ws, in: make(chan []any, 4096), ctx: ctx}
	go func() {
		defer close(bc.in)
		for {
			_, data, err := c.ws.Read(ctx)
			if err != nil {
				return
			}
			var m []any
			if json.Unmarshal(data, &m) == nil {
				bc.in <- m
			}
		}
	}()
	return bc
}

func (c *benchConn) write(b *testing.B, v any) {
	data, _ := json.Marshal(v)
	if err := c.ws.Write(c.ctx, websocket.MessageText, data); err != nil {
		b.Fatalf("write: %v", err)
	}
}

func (c *benchConn) waitFor(b *testing.B, label string) []any {
	for m := range c.in {
		if m[0] == label {
			return m
		}
	}
	b.Fatalf("connection closed waiting for %s", label)
	return nil
}

func BenchmarkIngestWS(b *testing.B) {
	for _, publishers := range []int{1, 4} {
		b.Run(fmt.Sprintf("publishers=%d", publishers), func(b *testing.B) {
			s := relaytest.StartWith(b, func(c *relay.Config) { c.MaxWritesPerSecond = -1 }) // one key, b.N events
			owner := newUser()
			ch := s.CreateChannel(b, owner.sk, "bench", false)
			// Sign outside the timer: signing is the client's cost, not the relay's.
			per := (b.N + publishers - 1) / publishers
			type pub struct {
				c   *benchConn
				evs []nostr.Event
			}
			pubs := make([]pub, publishers)
			for i := range pubs {
				u := newUser()
				pubs[i].c = benchDial(b, s, u.sk)
				for j := 0; j < per; j++ {
					ev := nostr.Event{Kind: 9, CreatedAt: nostr.Now(), Content: fmt.Sprintf("bench %d/%d", i, j), Tags: nostr.Tags{{"h", ch}}}
					ev.Sign(u.sk)
					pubs[i].evs = append(pubs[i].evs, ev)
				}
			}
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for _, p := range pubs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					// Pipeline with a bounded window so the relay is never idle waiting on us.
					window := make(chan struct{}, 256)
					done := make(chan struct{})
					go func() {
						defer close(done)
						for n := 0; n < len(p.evs); n++ {
							m := p.c.waitFor(b, "OK")
							if m[2] != true {
								b.Errorf("rejected: %v", m)
							}
							<-window
						}
					}()
					for _, ev := range p.evs {
						window <- struct{}{}
						p.c.write(b, []any{"EVENT", ev})
					}
					<-done
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(per*publishers)/elapsed.Seconds(), "events/s")
		})
	}
}

func BenchmarkFanOut100Subscribers(b *testing.B) {
	const subscribers = 100
	s := relaytest.Start(b)
	owner := newUser()
	ch := s.CreateChannel(b, owner.sk, "fanout", false)
	subs := make([]*benchConn, subscribers)
	for i := range subs {
		subs[i] = benchDial(b, s, newUser().sk)
		subs[i].write(b, []any{"REQ", "live", map[string]any{"kinds": []int{9}, "#h": []string{ch}, "limit": 0}})
		subs[i].waitFor(b, "EOSE")
	}
	pub := benchDial(b, s, owner.sk)
	events := make([]nostr.Event, b.N)
	for i := range events {
		events[i] = nostr.Event{Kind: 9, CreatedAt: nostr.Now(), Content: "fan " + strconv.Itoa(i), Tags: nostr.Tags{{"h", ch}}}
		events[i].Sign(owner.sk)
	}
	lat := make([]time.Duration, 0, b.N*subscribers)
	var mu sync.Mutex
	b.ResetTimer()
	for i := range events {
		// Closed loop: publish, then wait until all 100 subscribers have the event, so each
		// sample is pure delivery latency rather than queueing behind earlier events.
		sent := time.Now()
		pub.write(b, []any{"EVENT", events[i]})
		var wg sync.WaitGroup
		for _, c := range subs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c.waitFor(b, "EVENT")
				d := time.Since(sent)
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			}()
		}
		wg.Wait()
		pub.waitFor(b, "OK")
	}
	b.StopTimer()
	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}

// BenchmarkChannelCreateAndAdd creates a channel and adds a member, b.N times, over HTTP as
// `buzz channels create` and `buzz channels add` do: one pair's cost should not grow with the
// number of channels before it (stamping the relay's state events once scanned them all).
func BenchmarkChannelCreateAndAdd(b *testing.B) {
	s := relaytest.Start(b)
	owner, bot := newUser(), newUser()
	for i := range b.N {
		ch := s.CreateChannel(b, owner.sk, fmt.Sprintf("c%d", i), false)
		s.AddMember(b, owner.sk, ch, bot.pk, "bot")
	}
}
