package relay_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/relay"
	"github.com/buzz-harness/buzz/internal/relay/relaytest"
	"github.com/buzz-harness/buzz/internal/relay/store"
	"github.com/buzz-harness/buzz/internal/relay/store/postgres/pgtest"
)

// twoNodes starts two relay nodes on one PostgreSQL database with the same relay key (the
// second uses the first's data dir), as a multi-node deployment runs them.
func twoNodes(t *testing.T, more func(*relay.Config)) (a, b *relaytest.Server) {
	t.Helper()
	db := pgtest.URL(t)
	a = relaytest.StartWith(t, func(c *relay.Config) {
		c.Database = db
		if more != nil {
			more(c)
		}
	})
	b = relaytest.StartWith(t, func(c *relay.Config) {
		c.Database = db
		c.DataDir = a.DataDir
		if more != nil {
			more(c)
		}
	})
	if a.Relay.PublicKey() != b.Relay.PublicKey() {
		t.Fatal("nodes sign with different relay keys")
	}
	return a, b
}

// readEvent skips frames until an EVENT for sub arrives and returns its content.
func readEvent(c *rawConn, sub string) string {
	c.t.Helper()
	for {
		m := c.read()
		if len(m) == 3 && m[0] == "EVENT" && m[1] == sub {
			return m[2].(map[string]any)["content"].(string)
		}
	}
}

func TestClusterEventPublishedOnOneNodeReachesSubscriberOnAnother(t *testing.T) {
	a, b := twoNodes(t, nil)
	alice, bob := newUser(), newUser()
	ch := a.CreateChannel(t, alice.sk, "general", false)

	sub := dialRaw(t, b.URL)
	sub.mustAuth(bob.sk, b.URL)
	sub.send("REQ", "live", map[string]any{"kinds": []int{9, protocol.KindTyping}, "#h": []string{ch}})
	sub.readUntil("EOSE")

	a.Publish(t, alice.sk, msg(ch, "stored on A"))
	if got := readEvent(sub, "live"); got != "stored on A" {
		t.Fatalf("subscriber on B got %q", got)
	}
	// Ephemeral events are never stored, so they travel in the notice itself.
	pub := dialRaw(t, a.URL)
	pub.mustAuth(alice.sk, a.URL)
	if ok := pub.publish(alice.sk, nostr.Event{Kind: protocol.KindTyping, Content: "typing on A", Tags: nostr.Tags{{"h", ch}}}); ok[2] != true {
		t.Fatalf("typing refused: %v", ok)
	}
	if got := readEvent(sub, "live"); got != "typing on A" {
		t.Fatalf("subscriber on B got %q", got)
	}
}

func TestClusterMemberRemovedOnOneNodeGetsNoMoreFanOutOnAnother(t *testing.T) {
	a, b := twoNodes(t, nil)
	alice, bob := newUser(), newUser()
	ch := a.CreateChannel(t, alice.sk, "secret", true)
	open := a.CreateChannel(t, alice.sk, "lobby", false)
	a.AddMember(t, alice.sk, ch, bob.pk, "member")
	a.Publish(t, alice.sk, msg(ch, "before"))
	// B learns of the membership from A's notice; until then it rightly shows bob nothing.
	eventually(t, "B to let bob read the private channel", func() bool {
		return len(b.Query(t, bob.sk, nostr.Filter{Kinds: []int{9}, Tags: nostr.TagMap{"h": {ch}}})) == 1
	})

	bc := dialRaw(t, b.URL)
	bc.mustAuth(bob.sk, b.URL)
	bc.send("REQ", "h", map[string]any{"kinds": []int{9}, "#h": []string{ch}})
	bc.readUntil("EOSE")
	bc.send("REQ", "all", map[string]any{"kinds": []int{9}, "since": nostr.Now()})
	bc.readUntil("EOSE")
	ac := dialRaw(t, b.URL) // alice watches on B too: her copy shows when B has fanned out
	ac.mustAuth(alice.sk, b.URL)
	ac.send("REQ", "all", map[string]any{"kinds": []int{9}, "since": nostr.Now()})
	ac.readUntil("EOSE")

	a.Publish(t, alice.sk, nostr.Event{Kind: protocol.KindRemoveUser, Tags: nostr.Tags{{"h", ch}, {"p", bob.pk}}})
	if m := bc.readUntil("CLOSED"); m[1] != "h" || m[2] != "restricted: channel access revoked" {
		t.Fatalf("bob's channel sub on B: %v", m)
	}
	a.Publish(t, alice.sk, msg(ch, "after"))
	if got := readEvent(ac, "all"); got != "after" {
		t.Fatalf("alice on B got %q", got)
	}
	// B has fanned "after" out; a marker bob can see comes after anything queued for him.
	a.Publish(t, alice.sk, msg(open, "marker"))
	if got := readEvent(bc, "all"); got != "marker" {
		t.Fatalf("removed member on B received %q from the private channel", got)
	}
}

// Every node stamps 39000-39002 past the newest stored one, so edits alternating between nodes
// within one second all land (an older stamp would lose to NIP-01's replaceable rule).
func TestClusterRelayStampsIncreaseAcrossAlternatingNodes(t *testing.T) {
	now := time.Now()
	a, b := twoNodes(t, func(c *relay.Config) { c.Now = func() time.Time { return now } })
	alice := newUser()
	ch := a.CreateChannel(t, alice.sk, "v0", false)
	var stamps []nostr.Timestamp
	for i, node := range []*relaytest.Server{a, b, a, b, b, a} {
		name := fmt.Sprintf("v%d", i+1)
		node.Publish(t, alice.sk, nostr.Event{Kind: protocol.KindEditMetadata, Tags: nostr.Tags{{"h", ch}, {"name", name}}})
		meta := latest(t, node, alice.sk, nostr.Filter{Kinds: []int{39000}, Tags: nostr.TagMap{"d": {ch}}})
		if got := protocol.TagValue(meta.Tags, "name"); got != name {
			t.Fatalf("edit %d on node %d: 39000 names %q, want %q", i+1, i%2, got, name)
		}
		stamps = append(stamps, meta.CreatedAt)
	}
	for i := 1; i < len(stamps); i++ {
		if stamps[i] <= stamps[i-1] {
			t.Fatalf("39000 created_at not strictly increasing across nodes: %v", stamps)
		}
	}
}

// Two nodes adding members to one channel at once: the per-channel lock makes each decide on
// the other's result, so the member list ends with both.
func TestClusterConcurrentAdminActionsOnTwoNodesBothLand(t *testing.T) {
	a, b := twoNodes(t, nil)
	alice := newUser()
	ch := a.CreateChannel(t, alice.sk, "team", true)
	const n = 6
	added := make([]string, n)
	errs := make(chan error, n)
	for i := range n {
		added[i] = newUser().pk
		node := []*relaytest.Server{a, b}[i%2]
		go func() {
			ev := nostr.Event{Kind: protocol.KindPutUser, Tags: nostr.Tags{{"h", ch}, {"p", added[i]}, {"role", "member"}}}
			status, res := node.TryPublish(t, alice.sk, &ev)
			if status != http.StatusOK || !res.Accepted {
				errs <- fmt.Errorf("add %d: %d %s", i, status, res.Error)
				return
			}
			errs <- nil
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	members := protocol.ParseMembers(latest(t, b, alice.sk, nostr.Filter{Kinds: []int{39002}, Tags: nostr.TagMap{"d": {ch}}}))
	for _, pk := range added {
		if !slices.ContainsFunc(members, func(m protocol.Member) bool { return m.Pubkey == pk }) {
			t.Fatalf("39002 lost a member added concurrently: %d members %v", len(members), members)
		}
	}
}

// A node that loses its change feed refuses writes with a retryable error, and once
// reconnected delivers what other nodes stored meanwhile, read from the database.
func TestClusterNodeCatchesUpAfterLosingItsFeedAndRefusesWritesMeanwhile(t *testing.T) {
	a, b := twoNodes(t, func(c *relay.Config) { c.ReconnectDelay = 3 * time.Second })
	alice, bob := newUser(), newUser()
	ch := a.CreateChannel(t, alice.sk, "general", false)
	sub := dialRaw(t, b.URL)
	sub.mustAuth(bob.sk, b.URL)
	sub.send("REQ", "live", map[string]any{"kinds": []int{9}, "#h": []string{ch}})
	sub.readUntil("EOSE")
	eventually(t, "B's feed", func() bool { return relay.FeedLive(b.Relay) })

	cutFeed(t, relay.FeedName(b.Relay))
	eventually(t, "B to notice its feed is gone", func() bool { return !relay.FeedLive(b.Relay) })
	ev := msg(ch, "from B while cut off")
	status, res := b.TryPublish(t, bob.sk, &ev)
	if status != http.StatusServiceUnavailable || !strings.HasPrefix(res.Error, "error:") || !strings.Contains(res.Error, "retry") {
		t.Fatalf("write on a node without its feed: %d %q, want 503 error: … retry", status, res.Error)
	}
	a.Publish(t, alice.sk, msg(ch, "stored while B was cut off"))

	// Only B's catch-up after it reconnects can bring this event: A's notification went out while
	// B was not listening. (The catch-up hands events on before B marks its feed live.)
	if got := readEvent(sub, "live"); got != "stored while B was cut off" {
		t.Fatalf("subscriber on B got %q", got)
	}
	eventually(t, "B's feed back", func() bool { return relay.FeedLive(b.Relay) })
	b.Publish(t, bob.sk, msg(ch, "from B again"))
}

// cutFeed ends the database session called name, as a network cut or server restart would.
func cutFeed(t *testing.T, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT COUNT(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`, name).Scan(&n); err != nil || n != 1 {
		t.Fatalf("terminate %s: %d sessions (%v)", name, n, err)
	}
}

// failingUpdates is a store whose writes fail, as a PostgreSQL write does when its connection
// drops mid-request.
type failingUpdates struct{ store.Store }

func (failingUpdates) Update(context.Context, func(store.Tx) error) error {
	return errors.New("conn closed")
}

func TestClusterFailedWriteIsAnsweredAsRetryable(t *testing.T) {
	db := pgtest.URL(t)
	s := relaytest.StartWith(t, relay.WithStore(func(inner store.Store) store.Store { return failingUpdates{inner} },
		func(c *relay.Config) { c.Database = db }))
	ev := nostr.Event{Kind: 1, Content: "x"}
	status, res := s.TryPublish(t, newUser().sk, &ev)
	if status != http.StatusServiceUnavailable || !strings.HasPrefix(res.Error, "error:") || !strings.Contains(res.Error, "retry") {
		t.Fatalf("failed write on a shared database: %d %q, want 503 error: … retry", status, res.Error)
	}
}

// A burst of events sent without waiting for their OKs commits in batches on A (one notice per
// batch, listing its events); B's subscriber still gets every one, in the order sent.
func TestClusterPipelinedBurstReachesTheOtherNodeWholeAndInOrder(t *testing.T) {
	a, b := twoNodes(t, nil)
	alice, bob := newUser(), newUser()
	ch := a.CreateChannel(t, alice.sk, "burst", false)
	sub := dialRaw(t, b.URL)
	sub.mustAuth(bob.sk, b.URL)
	sub.send("REQ", "live", map[string]any{"kinds": []int{9}, "#h": []string{ch}})
	sub.readUntil("EOSE")

	pub := dialRaw(t, a.URL)
	pub.mustAuth(alice.sk, a.URL)
	const n = 300
	for i := range n {
		ev := msg(ch, fmt.Sprintf("burst %03d", i))
		ev.CreatedAt = nostr.Now()
		ev.Sign(alice.sk)
		pub.send("EVENT", ev)
	}
	for i := range n {
		if ok := pub.readUntil("OK"); ok[2] != true {
			t.Fatalf("event %d refused: %v", i, ok)
		}
	}
	for i := range n {
		if got, want := readEvent(sub, "live"), fmt.Sprintf("burst %03d", i); got != want {
			t.Fatalf("subscriber on B got %q, want %q", got, want)
		}
	}
}
