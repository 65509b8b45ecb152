package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/buzz-harness/buzz/internal/client"
	"github.com/buzz-harness/buzz/internal/relay/relaytest"
	"github.com/nbd-wtf/go-nostr"
)

func TestSplitRelayURLsTrimsAndDropsBlanks(t *testing.T) {
	got := client.SplitRelayURLs(" ws://a:1 ,, http://b:2/ ,")
	if len(got) != 2 || got[0] != "ws://a:1" || got[1] != "http://b:2/" {
		t.Fatalf("got %q", got)
	}
	if ws := client.WSURLs("http://a:1,https://b"); ws[0] != "ws://a:1" || ws[1] != "wss://b" {
		t.Fatalf("WSURLs: %q", ws)
	}
}

func TestLiveMovesToNextRelayAndResubscribesWhenFirstDies(t *testing.T) {
	a, b := relaytest.Start(t), relaytest.Start(t)
	owner := nostr.GeneratePrivateKey()
	chA := a.CreateChannel(t, owner, "on-a", false)
	chB := b.CreateChannel(t, owner, "on-b", false)

	l := runLive(t, a.URL+", "+b.URL, owner, nil)
	sub := "both"
	l.Subscribe(sub, nostr.Filter{Kinds: []int{9}, Tags: nostr.TagMap{"h": {chA, chB}}})
	waitReady(t, l)
	if l.URL() != a.URL {
		t.Fatalf("connected to %s, want the first listed relay %s", l.URL(), a.URL)
	}
	a.Publish(t, owner, nostr.Event{Kind: 9, Content: "via a", Tags: nostr.Tags{{"h", chA}}})
	if ev := nextEvent(t, l, sub); ev.Content != "via a" {
		t.Fatalf("got %q", ev.Content)
	}

	a.Stop()
	// The subscription must be re-sent on b: an event that only b has arrives.
	b.Publish(t, owner, nostr.Event{Kind: 9, Content: "via b", Tags: nostr.Tags{{"h", chB}}})
	if ev := nextEvent(t, l, sub); ev.Content != "via b" {
		t.Fatalf("got %q", ev.Content)
	}
	if l.URL() != b.URL {
		t.Fatalf("connected to %s, want %s", l.URL(), b.URL)
	}
}

func TestLiveTriesListedRelaysInOrderUntilOneWorks(t *testing.T) {
	dead, b := relaytest.Start(t), relaytest.Start(t)
	dead.Stop()
	owner := nostr.GeneratePrivateKey()
	// The second relay must be tried at once, not after a backoff wait.
	l := runLive(t, dead.URL+","+b.URL, owner, func(int) time.Duration {
		t.Error("backed off before trying the second relay")
		return time.Hour
	})
	waitReady(t, l)
	if l.URL() != b.URL {
		t.Fatalf("connected to %s, want %s", l.URL(), b.URL)
	}
}

func TestBridgeFallsThroughToNextRelayAndStaysThere(t *testing.T) {
	dead, b := relaytest.Start(t), relaytest.Start(t)
	dead.Stop()
	owner := nostr.GeneratePrivateKey()
	ch := b.CreateChannel(t, owner, "general", false)
	br := client.NewBridge(dead.HTTPURL+","+b.HTTPURL, owner)
	br.Attempts = 1 // no retry: the fall-through happens within one attempt
	res, err := br.Publish(context.Background(), &nostr.Event{Kind: 9, Content: "hi", Tags: nostr.Tags{{"h", ch}}})
	if err != nil || !res.Accepted {
		t.Fatalf("publish: %+v %v", res, err)
	}
	if br.BaseURL() != b.HTTPURL {
		t.Fatalf("BaseURL %s, want %s", br.BaseURL(), b.HTTPURL)
	}
	evs, err := br.Query(context.Background(), client.F(nostr.Filter{Kinds: []int{9}, Tags: nostr.TagMap{"h": {ch}}})...)
	if err != nil || len(evs) != 1 {
		t.Fatalf("query: %d events, %v", len(evs), err)
	}
}
