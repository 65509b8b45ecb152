package relay_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol/reminder"
	"github.com/buzz-harness/buzz/internal/relay"
	"github.com/buzz-harness/buzz/internal/relay/relaytest"
)

// reminderRelay runs a relay whose clock the test moves, polling for due reminders every 10 ms.
func reminderRelay(t *testing.T) (*relaytest.Server, *atomic.Int64) {
	now := &atomic.Int64{}
	now.Store(time.Now().Unix())
	s := relaytest.StartWith(t, func(c *relay.Config) {
		c.ReminderPoll = 10 * time.Millisecond
		c.Now = func() time.Time { return time.Unix(now.Load(), 0) }
	})
	return s, now
}

func newReminder(t *testing.T, sk string, due int64) *nostr.Event {
	t.Helper()
	ev, err := reminder.Build(sk, reminder.NewID(), reminder.Content{Status: reminder.Pending, Note: "check the build"}, &due, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

func TestDueReminderIsSentAgainToItsAuthorOnly(t *testing.T) {
	s, now := reminderRelay(t)
	author, other := newUser(), newUser()
	mine := dialRaw(t, s.URL)
	mine.mustAuth(author.sk, s.URL)
	theirs := dialRaw(t, s.URL)
	theirs.mustAuth(other.sk, s.URL)
	f := nostr.Filter{Kinds: []int{reminder.Kind}}
	mine.send("REQ", "r", f)
	mine.readUntil("EOSE")
	theirs.send("REQ", "r", f)
	theirs.readUntil("EOSE")

	ev := newReminder(t, author.sk, now.Load()+60)
	s.Publish(t, author.sk, *ev) // over the bridge: this socket reads only subscription traffic
	if got := mine.readUntil("EVENT"); got[2].(map[string]any)["id"] != ev.ID {
		t.Fatalf("state sync: got %v", got)
	}
	now.Add(61) // due
	if got := mine.readUntil("EVENT"); got[2].(map[string]any)["id"] != ev.ID {
		t.Fatalf("due signal: got %v", got)
	}
	// The other pubkey's subscription got neither, and asking by id finds nothing.
	theirs.send("REQ", "q", nostr.Filter{IDs: []string{ev.ID}})
	for {
		m := theirs.read()
		if m[0] == "EVENT" {
			t.Fatalf("another pubkey got the reminder: %v", m)
		}
		if m[0] == "EOSE" && m[1] == "q" {
			break
		}
	}
}

func TestReminderWithBadNotBeforeIsRefused(t *testing.T) {
	s, _ := reminderRelay(t)
	u := newUser()
	c := dialRaw(t, s.URL)
	c.mustAuth(u.sk, s.URL)
	for name, tags := range map[string]nostr.Tags{
		"leading zero":       {{"d", "x"}, {"not_before", "0123"}},
		"two not_before":     {{"d", "x"}, {"not_before", "1"}, {"not_before", "2"}},
		"no d":               {{"not_before", "1"}},
		"expires before due": {{"d", "x"}, {"not_before", "100"}, {"expiration", "50"}},
		"sign":               {{"d", "x"}, {"not_before", "+5"}},
		"beyond 2^53":        {{"d", "x"}, {"not_before", "9007199254740992"}},
	} {
		if ok := c.publish(u.sk, nostr.Event{Kind: reminder.Kind, Tags: tags, Content: "x"}); ok[2] != false {
			t.Errorf("%s: accepted", name)
		}
	}
}

// The schedule is in the store: a reminder scheduled before the relay restarts fires after.
func TestReminderScheduledBeforeARestartFiresAfterIt(t *testing.T) {
	s, now := reminderRelay(t)
	u := newUser()
	ev := newReminder(t, u.sk, now.Load()+30)
	s.Publish(t, u.sk, *ev)
	s.Restart(t)
	c := dialRaw(t, s.URL)
	c.mustAuth(u.sk, s.URL)
	c.send("REQ", "r", nostr.Filter{Kinds: []int{reminder.Kind}})
	if got := c.readUntil("EVENT"); got[2].(map[string]any)["id"] != ev.ID { // the stored head
		t.Fatalf("backlog: got %v", got)
	}
	c.readUntil("EOSE")
	now.Add(31)
	if got := c.readUntil("EVENT"); got[2].(map[string]any)["id"] != ev.ID {
		t.Fatalf("due signal: got %v", got)
	}
}

// Two nodes on one PostgreSQL store both poll for due reminders; the store's claim hands each due
// reminder to one of them, so the author's subscription on either node sees the due signal once.
func TestClusterDueReminderIsSignalledOnceAcrossNodes(t *testing.T) {
	now := &atomic.Int64{}
	now.Store(time.Now().Unix())
	a, b := twoNodes(t, func(c *relay.Config) {
		c.ReminderPoll = 10 * time.Millisecond
		c.Now = func() time.Time { return time.Unix(now.Load(), 0) }
	})
	u := newUser()
	subs := map[string]*rawConn{}
	for name, node := range map[string]*relaytest.Server{"A": a, "B": b} {
		c := dialRaw(t, node.URL)
		c.mustAuth(u.sk, node.URL)
		c.send("REQ", "r", nostr.Filter{Kinds: []int{reminder.Kind}})
		c.readUntil("EOSE")
		subs[name] = c
	}
	// The second, due a minute after the first, is a fence: both nodes have polled many times by
	// the time its signal arrives, and nothing of the first may come in between.
	// Each is read on both nodes before the next is published: what one node stores reaches the
	// other's subscribers after a NOTIFY, with no order against what the other stores meanwhile.
	first, second := newReminder(t, u.sk, now.Load()+60), newReminder(t, u.sk, now.Load()+120)
	for _, head := range []struct {
		node *relaytest.Server
		ev   *nostr.Event
	}{{a, first}, {b, second}} {
		head.node.Publish(t, u.sk, *head.ev)
		for name, c := range subs { // the stored head, live
			if got := c.readUntil("EVENT"); got[2].(map[string]any)["id"] != head.ev.ID {
				t.Fatalf("node %s, state sync: got %v, want %s", name, got, head.ev.ID)
			}
		}
	}
	now.Add(61)
	for name, c := range subs {
		if got := c.readUntil("EVENT"); got[2].(map[string]any)["id"] != first.ID {
			t.Fatalf("node %s, due signal: got %v", name, got)
		}
	}
	now.Add(60)
	for name, c := range subs {
		if got := c.readUntil("EVENT"); got[2].(map[string]any)["id"] != second.ID {
			t.Fatalf("node %s: got %v, want only the second reminder's due signal", name, got)
		}
	}
}
