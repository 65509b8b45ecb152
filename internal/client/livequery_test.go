package client

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
)

// queryAsync runs l.Query on its own goroutine.
func queryAsync(l *Live, f nostr.Filter) (<-chan []nostr.Event, <-chan error) {
	evs, errs := make(chan []nostr.Event, 1), make(chan error, 1)
	go func() {
		got, err := l.Query(context.Background(), f)
		evs <- got
		errs <- err
	}()
	return evs, errs
}

func TestLiveQueryReturnsTheStoredEventsToTheCallerAloneAndClosesItsSubscription(t *testing.T) {
	fr := newFakeRelay(t)
	l, _ := startLive(t, fr, func(l *Live) { l.Subscribe("s", nostr.Filter{Kinds: []int{9}}) })
	fc := fr.accept(t)
	fc.authenticate()
	fc.req()
	waitConnected(t, l)

	evs, errs := queryAsync(l, nostr.Filter{Kinds: []int{9}, Limit: 5})
	id, f := fc.req()
	if !strings.HasPrefix(id, querySubPfx) || f.Limit != 5 {
		t.Fatalf("query sent as REQ %s %+v", id, f)
	}
	a, b := signedEvent(t, 1001, "newer"), signedEvent(t, 1000, "older")
	fc.send("EVENT", id, a)
	fc.send("EVENT", id, b)
	fc.send("EVENT", id, a) // overlapping filters: one copy
	fc.send("EOSE", id)
	later := signedEvent(t, 1003, "live, before the relay reads our CLOSE")
	fc.send("EVENT", id, later) // not part of the answer
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	if got := <-evs; len(got) != 2 || got[0].ID != a.ID || got[1].ID != b.ID {
		t.Fatalf("query returned %v, want the two events in the relay's order", got)
	}
	if arr := fc.next("CLOSE"); string(arr[1]) != `"`+id+`"` {
		t.Fatalf("CLOSE %s, want the query's %s", arr[1], id)
	}
	// The subscription's own traffic comes next on Events: the query's events never did.
	c := signedEvent(t, 1002, "live")
	fc.send("EVENT", "s", c)
	if in := recv(t, l); in.Event == nil || in.Event.ID != c.ID {
		t.Fatalf("Events got %+v, want only the subscription's event", in)
	}
}

func TestLiveQueryFailsWhenTheRelayClosesItOrTheConnectionDrops(t *testing.T) {
	fr := newFakeRelay(t)
	l, _ := startLive(t, fr, nil)
	fc := fr.accept(t)
	fc.authenticate()
	waitConnected(t, l)

	_, errs := queryAsync(l, nostr.Filter{Kinds: []int{9}})
	id, _ := fc.req()
	fc.send("CLOSED", id, "restricted: not a member")
	if err := <-errs; err == nil || !strings.Contains(err.Error(), "restricted: not a member") {
		t.Fatalf("err = %v, want the relay's reason", err)
	}

	_, errs = queryAsync(l, nostr.Filter{Kinds: []int{9}})
	fc.req()
	fc.kill()
	if err := <-errs; err == nil || !strings.Contains(err.Error(), "connection lost") {
		t.Fatalf("err = %v, want the lost connection", err)
	}
}

func TestLiveQueryWithNoConnectionFailsAtOnce(t *testing.T) {
	l := NewLive(LiveConfig{RelayURL: "ws://127.0.0.1:1", SecretKey: nostr.GeneratePrivateKey()}) // not run
	if _, err := l.Query(context.Background(), nostr.Filter{}); !errors.Is(err, errNotConnected) {
		t.Fatalf("err = %v, want errNotConnected", err)
	}
}

func TestLiveSinceStartsAtTheBacklogsEOSEAndEndsWithTheConnection(t *testing.T) {
	fr := newFakeRelay(t)
	l, _ := startLive(t, fr, func(l *Live) { l.Subscribe("own", nostr.Filter{Kinds: []int{9}}) })
	fc := fr.accept(t)
	fc.authenticate()
	fc.req()
	waitConnected(t, l)
	if _, ok := l.LiveSince("own"); ok {
		t.Fatal("live before its EOSE")
	}
	before := time.Now()
	fc.send("EOSE", "own")
	if in := recv(t, l); !in.EOSE {
		t.Fatalf("got %+v, want EOSE", in)
	}
	at, ok := l.LiveSince("own")
	if !ok || at.Before(before) {
		t.Fatalf("LiveSince = %v %v, want live from the EOSE on", at, ok)
	}
	fc.kill()
	fc2 := fr.accept(t) // the old connection is gone (lost ran) once the new one dials
	if _, ok := l.LiveSince("own"); ok {
		t.Fatal("still live after the connection dropped")
	}
	fc2.authenticate()
	fc2.req()
	fc2.send("EOSE", "own")
	recv(t, l)
	if again, ok := l.LiveSince("own"); !ok || !again.After(at) {
		t.Fatalf("LiveSince = %v %v after the new EOSE, want a later start", again, ok)
	}
}
