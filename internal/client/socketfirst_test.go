package client_test

import (
	"context"
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/client"
	"github.com/buzz-harness/buzz/internal/relay/relaytest"
)

// deadBridge points at a port nothing listens on: a publish that succeeds did not use it.
func deadBridge(sk string) *client.Bridge { return client.NewBridge("http://127.0.0.1:1", sk) }

func TestSocketFirstSendsOverTheSocketWhileItIsConnected(t *testing.T) {
	s := relaytest.Start(t)
	owner := nostr.GeneratePrivateKey()
	ch := s.CreateChannel(t, owner, "general", false)
	l := runLive(t, s.URL, owner, nil)
	waitReady(t, l)
	p := &client.SocketFirst{Live: l, Bridge: deadBridge(owner)}
	res, err := p.Publish(context.Background(), &nostr.Event{Kind: 9, Content: "over the socket", Tags: nostr.Tags{{"h", ch}}})
	if err != nil || !res.Accepted || res.EventID == "" {
		t.Fatalf("publish: %+v %v", res, err)
	}
	got := s.Query(t, owner, nostr.Filter{IDs: []string{res.EventID}})
	if len(got) != 1 || got[0].Content != "over the socket" {
		t.Fatalf("relay has %v, want the event", got)
	}
}

func TestSocketFirstUsesTheBridgeWhileNoSessionIsUp(t *testing.T) {
	s := relaytest.Start(t)
	owner := nostr.GeneratePrivateKey()
	ch := s.CreateChannel(t, owner, "general", false)
	never := client.NewLive(client.LiveConfig{RelayURL: s.URL, SecretKey: owner}) // not run
	p := &client.SocketFirst{Live: never, Bridge: client.NewBridge(s.HTTPURL, owner)}
	res, err := p.Publish(context.Background(), &nostr.Event{Kind: 9, Content: "over http", Tags: nostr.Tags{{"h", ch}}})
	if err != nil || !res.Accepted {
		t.Fatalf("publish: %+v %v", res, err)
	}
	if got := s.Query(t, owner, nostr.Filter{IDs: []string{res.EventID}}); len(got) != 1 {
		t.Fatalf("relay has %d events, want the one published", len(got))
	}
}

func TestSocketFirstReportsASocketRefusalAsNotAcceptedWithTheRelaysReason(t *testing.T) {
	s := relaytest.Start(t)
	owner, stranger := nostr.GeneratePrivateKey(), nostr.GeneratePrivateKey()
	ch := s.CreateChannel(t, owner, "private", true)
	l := runLive(t, s.URL, stranger, nil)
	waitReady(t, l)
	p := &client.SocketFirst{Live: l, Bridge: deadBridge(stranger)}
	res, err := p.Publish(context.Background(), &nostr.Event{Kind: 9, Content: "let me in", Tags: nostr.Tags{{"h", ch}}})
	if err != nil {
		t.Fatalf("a refusal is not an error: %v", err)
	}
	if res.Accepted || !strings.HasPrefix(res.Message, "restricted:") {
		t.Fatalf("result %+v, want refused as restricted", res)
	}
}

func TestSocketFirstQueriesOverTheSocketWhileItIsConnected(t *testing.T) {
	s := relaytest.Start(t)
	owner := nostr.GeneratePrivateKey()
	ch := s.CreateChannel(t, owner, "general", false)
	posted := storedMessage(t, s, owner, ch)
	l := runLive(t, s.URL, owner, nil)
	waitReady(t, l)
	p := &client.SocketFirst{Live: l, Bridge: deadBridge(owner)}
	got, err := p.Query(context.Background(), nostr.Filter{Kinds: []int{9}, Tags: nostr.TagMap{"h": {ch}}})
	if err != nil || len(got) != 1 || got[0].ID != posted.ID {
		t.Fatalf("query: %v %v, want the stored message", got, err)
	}
}

func TestSocketFirstQueriesOverTheBridgeWhileNoSessionIsUp(t *testing.T) {
	s := relaytest.Start(t)
	owner := nostr.GeneratePrivateKey()
	ch := s.CreateChannel(t, owner, "general", false)
	posted := storedMessage(t, s, owner, ch)
	never := client.NewLive(client.LiveConfig{RelayURL: s.URL, SecretKey: owner}) // not run
	p := &client.SocketFirst{Live: never, Bridge: client.NewBridge(s.HTTPURL, owner)}
	got, err := p.Query(context.Background(), nostr.Filter{Kinds: []int{9}, Tags: nostr.TagMap{"h": {ch}}})
	if err != nil || len(got) != 1 || got[0].ID != posted.ID {
		t.Fatalf("query: %v %v, want the stored message", got, err)
	}
}

// storedMessage publishes a message in ch and returns it.
func storedMessage(t *testing.T, s *relaytest.Server, sk, ch string) nostr.Event {
	t.Helper()
	ev := nostr.Event{Kind: 9, Content: "stored", CreatedAt: nostr.Now(), Tags: nostr.Tags{{"h", ch}}}
	if err := ev.Sign(sk); err != nil {
		t.Fatal(err)
	}
	s.Publish(t, sk, ev)
	return ev
}
