package relay_test

import (
	"fmt"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/relay/relaytest"
)

// A connection does not wait for each event's commit before reading the next, but its OKs still
// come back in the order the events were sent, refusals included.
func TestPipelinedEventsAreAnsweredInTheOrderSent(t *testing.T) {
	s := relaytest.Start(t)
	owner := newUser()
	ch := s.CreateChannel(t, owner.sk, "pipeline", false)
	c := dialRaw(t, s.URL)
	c.mustAuth(owner.sk, s.URL)
	var ids []string
	for i := range 200 {
		ev := msg(ch, fmt.Sprintf("m%d", i))
		if i%7 == 3 { // a channel that does not exist: refused before any write
			ev = msg("00000000-0000-4000-8000-000000000000", fmt.Sprintf("m%d", i))
		}
		ev.CreatedAt = nostr.Now()
		ev.Sign(owner.sk)
		c.send("EVENT", ev)
		ids = append(ids, ev.ID)
	}
	for i, id := range ids {
		ok := c.readUntil("OK")
		if ok[1] != id {
			t.Fatalf("OK %d names %v, want %s (the %dth event sent)", i, ok[1], id, i)
		}
		if want := i%7 != 3; ok[2] != want {
			t.Fatalf("OK %d = %v, want accepted=%v", i, ok, want)
		}
	}
}

// A REQ sent right after a burst of events, on the same connection and before their OKs arrive,
// sees every one of them: a non-pipelined frame waits for the writes before it.
func TestREQAfterPipelinedEventsSeesThem(t *testing.T) {
	s := relaytest.Start(t)
	owner := newUser()
	ch := s.CreateChannel(t, owner.sk, "pipeline", false)
	c := dialRaw(t, s.URL)
	c.mustAuth(owner.sk, s.URL)
	const n = 100
	for i := range n {
		ev := msg(ch, fmt.Sprintf("m%d", i))
		ev.CreatedAt = nostr.Now()
		ev.Sign(owner.sk)
		c.send("EVENT", ev)
	}
	c.send("REQ", "after", nostr.Filter{Tags: nostr.TagMap{"h": {ch}}, Kinds: []int{9}, Limit: 500})
	got, oks := 0, 0
	for {
		m := c.read()
		switch m[0] {
		case "OK":
			oks++
		case "EVENT":
			got++
		case "EOSE":
			if oks != n || got != n {
				t.Fatalf("at EOSE: %d OKs and %d stored events seen, want %d and %d", oks, got, n, n)
			}
			return
		}
	}
}
