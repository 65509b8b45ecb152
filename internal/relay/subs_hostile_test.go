package relay_test

// Subscription bloat (issue 28, item 2): one socket held 1,024 subscriptions of ~512 KiB #h
// lists and the relay grew to 4 GB. Lists, and the filter bytes a connection and a pubkey hold
// live, are bounded; a refusal is a CLOSED the client treats as final.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/google/uuid"

	"github.com/buzz-harness/buzz/internal/relay"
	"github.com/buzz-harness/buzz/internal/relay/relaytest"
)

// channelIDs is n made-up channel ids, as an #h list.
func channelIDs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = uuid.NewString()
	}
	return out
}

func TestHostileFilterListLongerThanTheCapIsRefused(t *testing.T) {
	s := relaytest.Start(t)
	c, u := authedRaw(t, s)
	long := channelIDs(relay.DefaultMaxFilterValues + 1)
	for _, label := range []string{"REQ", "COUNT"} {
		c.send(label, "bloat", map[string]any{"#h": long, "limit": 0})
		got := c.readUntil("CLOSED")
		if !hasPrefix(got[2], `invalid: filter "#h" has 1001 values (max 1000)`) {
			t.Fatalf("%s with 1001 #h values: %v, want refused as invalid", label, got)
		}
	}
	body, _ := json.Marshal([]map[string]any{{"authors": []string{}, "#p": long}})
	if status, raw := s.Post(t, u.sk, "/query", body); status != http.StatusBadRequest {
		t.Fatalf("bridge /query with 1001 #p values answered %d %s", status, raw)
	}
	// The cap itself is allowed.
	c.send("REQ", "ok", map[string]any{"#h": long[:relay.DefaultMaxFilterValues], "limit": 0})
	if got := c.readUntil("EOSE"); got[1] != "ok" {
		t.Fatalf("REQ with 1000 values: %v", got)
	}
}

// bloatedFilter is a filter of about kb KiB as sent.
func bloatedFilter(kb int) map[string]any {
	return map[string]any{"#h": channelIDs(kb * 1024 / 39), "limit": 0}
}

func TestHostileSubscriptionBytesAreCappedPerConnection(t *testing.T) {
	s := relaytest.StartWith(t, func(c *relay.Config) { c.MaxSubBytesPerConn = 100 << 10 })
	c, _ := authedRaw(t, s)
	for i := range 3 {
		c.send("REQ", fmt.Sprintf("s%d", i), bloatedFilter(30))
		if got := c.readUntil("EOSE"); got[1] != fmt.Sprintf("s%d", i) {
			t.Fatalf("subscription %d: %v", i, got)
		}
	}
	c.send("REQ", "s3", bloatedFilter(30))
	got := c.readUntil("CLOSED")
	if got[1] != "s3" || !hasPrefix(got[2], "invalid: this connection's subscriptions would hold") {
		t.Fatalf("a fourth 30 KiB subscription past 100 KiB: %v, want refused as invalid", got)
	}
	// Closing one gives its bytes back; replacing one counts only the new filters.
	c.send("CLOSE", "s0")
	c.send("REQ", "s3", bloatedFilter(30))
	if got := c.readUntil("EOSE"); got[1] != "s3" {
		t.Fatalf("after a CLOSE: %v, want the subscription accepted", got)
	}
	c.send("REQ", "s3", bloatedFilter(30))
	if got := c.readUntil("EOSE"); got[1] != "s3" {
		t.Fatalf("replacing a subscription by one of its size: %v, want accepted", got)
	}
}

func TestHostileSubscriptionBytesAreCappedPerPubkey(t *testing.T) {
	s := relaytest.StartWith(t, func(c *relay.Config) {
		c.MaxSubBytesPerConn = 100 << 10
		c.MaxSubBytesPerKey = 130 << 10
	})
	u := newUser()
	first := dialRaw(t, s.URL)
	first.mustAuth(u.sk, s.URL)
	second := dialRaw(t, s.URL)
	second.mustAuth(u.sk, s.URL)
	for i := range 3 {
		first.send("REQ", fmt.Sprintf("a%d", i), bloatedFilter(30))
		first.readUntil("EOSE")
	}
	second.send("REQ", "b0", bloatedFilter(30))
	if got := second.read(); got[0] != "EOSE" {
		t.Fatalf("the same key within 130 KiB on a second connection: %v", got)
	}
	second.send("REQ", "b1", bloatedFilter(30))
	got := second.readUntil("CLOSED")
	if got[1] != "b1" || !hasPrefix(got[2], "invalid: your subscriptions would hold more than") {
		t.Fatalf("the same key past 130 KiB on a second connection: %v, want refused as invalid", got)
	}
	// Another key is not affected, and the first connection's bytes come back when it goes.
	other, _ := authedRaw(t, s)
	other.send("REQ", "x", bloatedFilter(30))
	if got := other.readUntil("EOSE"); got[1] != "x" {
		t.Fatalf("another key: %v", got)
	}
	first.ws.CloseNow()
	eventually(t, "the closed connection's filter bytes are given back", func() bool {
		second.send("REQ", "b1", bloatedFilter(30))
		for {
			m := second.read()
			if m[0] == "EOSE" {
				return true
			}
			if m[0] == "CLOSED" {
				return false
			}
		}
	})
}
