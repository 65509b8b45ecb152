package relay

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/relay/store"
)

func TestChannelLocksSerializeOneChannelAndForgetIdleOnes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var l channelLocks
		unlockA := l.lock("a")
		unlockB := l.lock("b") // another channel's lock is free
		took := make(chan struct{})
		go func() {
			unlock := l.lock("a")
			close(took)
			unlock()
		}()
		synctest.Wait()
		select {
		case <-took:
			t.Fatal("a channel's lock was taken while it was held")
		default:
		}
		unlockA()
		synctest.Wait()
		select {
		case <-took:
		default:
			t.Fatal("the waiter did not get the lock once it was released")
		}
		unlockB()
		if n := l.held(); n != 0 {
			t.Fatalf("%d idle channel locks kept, want none", n)
		}
	})
}

// holdEvent holds one admin event inside its channel's lock: submitAdmin's first store call,
// made under the lock, looks the event up.
type holdEvent struct {
	store.Store
	id      string
	entered chan struct{}
	release chan struct{}
}

func (s *holdEvent) Event(ctx context.Context, id string) (*nostr.Event, string, error) {
	if id == s.id {
		close(s.entered)
		<-s.release
	}
	return s.Store.Event(ctx, id)
}

func TestAdminEventOfOneChannelDoesNotWaitForAnotherChannels(t *testing.T) {
	const chA, chB = testChannel, otherChannel
	sk := nostr.GeneratePrivateKey()
	signed := func(kind int, tags ...nostr.Tag) *nostr.Event {
		ev := &nostr.Event{Kind: kind, CreatedAt: nostr.Now(), Tags: tags}
		if err := ev.Sign(sk); err != nil {
			t.Fatal(err)
		}
		return ev
	}
	editA := signed(protocol.KindEditMetadata, nostr.Tag{"h", chA}, nostr.Tag{"topic", "a"})
	editB := signed(protocol.KindEditMetadata, nostr.Tag{"h", chB}, nostr.Tag{"topic", "b"})
	hold := &holdEvent{id: editA.ID, entered: make(chan struct{}), release: make(chan struct{})}
	r := openTestRelayWith(t, Config{wrapStore: func(st store.Store) store.Store { hold.Store = st; return hold }})
	submit := func(ev *nostr.Event) result { return r.submit(context.Background(), ev, fromBridge(ev.PubKey)) }
	for _, id := range []string{chA, chB} {
		if res := submit(signed(protocol.KindCreateGroup, nostr.Tag{"h", id}, nostr.Tag{"name", id[:4]})); !res.OK {
			t.Fatalf("create %s: %s", id, res.Msg)
		}
	}

	resA := make(chan result, 1)
	go func() { resA <- submit(editA) }()
	<-hold.entered // channel A's admin path now waits inside its lock
	resB := make(chan result, 1)
	go func() { resB <- submit(editB) }()
	select {
	case res := <-resB:
		if !res.OK {
			t.Fatalf("channel B's edit: %s", res.Msg)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("channel B's admin event waited behind channel A's")
	}
	close(hold.release)
	if res := <-resA; !res.OK {
		t.Fatalf("channel A's edit: %s", res.Msg)
	}
	if n := r.admin.held(); n != 0 {
		t.Fatalf("%d channel locks kept after both edits, want none", n)
	}
}
