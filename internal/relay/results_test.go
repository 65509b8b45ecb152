package relay_test

// Slow readers (issue 28, item 9): results were held whole while they were sent, so memory grew
// with every client that asked for much and never read. History is read a page at a time within
// a relay-wide result budget.

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/buzz-harness/buzz/internal/relay"
	"github.com/buzz-harness/buzz/internal/relay/relaytest"
)

// bigHistory publishes n messages of about kb KiB each in a new channel.
func bigHistory(t testing.TB, s *relaytest.Server, n, kb int) (string, user) {
	owner := newUser()
	ch := s.CreateChannel(t, owner.sk, "big", false)
	for i := range n {
		s.Publish(t, owner.sk, msg(ch, fmt.Sprintf("%03d %s", i, strings.Repeat("x", kb<<10))))
	}
	return ch, owner
}

func TestReqHistoryOfSeveralPagesArrivesWholeNewestFirst(t *testing.T) {
	s := relaytest.Start(t)
	ch, owner := bigHistory(t, s, 6, 200) // ~1.2 MB: three pages
	c := dialRaw(t, s.URL)
	c.ws.SetReadLimit(1 << 20)
	c.mustAuth(owner.sk, s.URL)
	c.send("REQ", "h", map[string]any{"kinds": []int{9}, "#h": []string{ch}, "limit": 6},
		map[string]any{"kinds": []int{9}, "#h": []string{ch}, "limit": 3})
	var got []string
	last := int64(1 << 62)
	for {
		m := c.read()
		if m[0] == "EOSE" {
			break
		}
		if m[0] == "EVENT" {
			ev := m[2].(map[string]any)
			if at := int64(ev["created_at"].(float64)); at > last {
				t.Fatalf("history not newest first: %d after %d", at, last)
			} else {
				last = at
			}
			got = append(got, ev["content"].(string)[:3])
		}
	}
	slices.Sort(got)
	want := []string{"000", "001", "002", "003", "004", "005"}
	if !slices.Equal(got, want) {
		t.Fatalf("history %v, want each of the 6 once", got)
	}
	if now, _ := relay.ResultBytes(s.Relay); now != 0 {
		t.Fatalf("%d bytes of result budget still held after the history was written", now)
	}
}

func TestHostileSlowReadersHoldAtMostTheResultBudgetAndGiveItBack(t *testing.T) {
	// Room for the 4 slow readers' pages (each holds two) and the reading client's.
	const budget = 10 * relay.PageTicket
	s := relaytest.StartWith(t, func(c *relay.Config) { c.MaxResultBytes = budget })
	ch, owner := bigHistory(t, s, 10, 200) // 2 MB each client asks for
	var slow []*rawConn
	for range 4 {
		c := dialRaw(t, s.URL)
		c.mustAuth(owner.sk, s.URL)
		c.send("REQ", "h", map[string]any{"kinds": []int{9}, "#h": []string{ch}, "limit": 10})
		slow = append(slow, c) // and never read again
	}
	eventually(t, "the slow readers' pages in flight", func() bool { now, _ := relay.ResultBytes(s.Relay); return now > 0 })
	// A client that reads still gets its history meanwhile.
	c := dialRaw(t, s.URL)
	c.ws.SetReadLimit(1 << 20)
	c.mustAuth(owner.sk, s.URL)
	c.send("REQ", "h", map[string]any{"kinds": []int{9}, "#h": []string{ch}, "limit": 10})
	n := 0
	for m := c.read(); m[0] != "EOSE"; m = c.read() {
		if m[0] == "EVENT" {
			n++
		}
	}
	if n != 10 {
		t.Fatalf("a reading client got %d of 10 events beside 4 slow ones", n)
	}
	if _, peak := relay.ResultBytes(s.Relay); peak > budget {
		t.Fatalf("results in flight peaked at %d bytes, budget %d", peak, budget)
	}
	for _, c := range slow {
		c.ws.CloseNow()
	}
	eventually(t, "the budget given back once the slow readers are gone", func() bool {
		now, _ := relay.ResultBytes(s.Relay)
		return now == 0
	})
}
