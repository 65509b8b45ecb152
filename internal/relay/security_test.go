package relay_test

import (
	"net/http"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/relay/relaytest"
)

func keypair(t *testing.T) (string, string) {
	sk := nostr.GeneratePrivateKey()
	pk, err := protocol.PublicKey(sk)
	if err != nil {
		t.Fatal(err)
	}
	return sk, pk
}

// A second h tag must not smuggle a non-member's message into a private channel's readers.
func TestRelayRefusesEventWithSeveralChannelTags(t *testing.T) {
	s := relaytest.Start(t)
	aliceSK, _ := keypair(t)
	eveSK, _ := keypair(t)
	private := s.CreateChannel(t, aliceSK, "secret", true)
	open := s.CreateChannel(t, eveSK, "lobby", false)
	ev := &nostr.Event{Kind: 9, Content: "injected", CreatedAt: nostr.Now(), Tags: nostr.Tags{{"h", open}, {"h", private}}}
	if err := ev.Sign(eveSK); err != nil {
		t.Fatal(err)
	}
	status, res := s.TryPublish(t, eveSK, ev)
	if status != http.StatusBadRequest || res.Accepted {
		t.Fatalf("status %d, %+v: an event naming two channels was accepted", status, res)
	}
	if got := s.Query(t, aliceSK, nostr.Filter{Kinds: []int{9}, Tags: nostr.TagMap{"h": {private}}}); len(got) != 0 {
		t.Fatalf("the private channel's member sees %d injected events", len(got))
	}
}

func TestRelayRefusesGloballyStoredKindNamingAPrivateChannelFromNonMember(t *testing.T) {
	s := relaytest.Start(t)
	aliceSK, _ := keypair(t)
	eveSK, _ := keypair(t)
	private := s.CreateChannel(t, aliceSK, "secret", true)
	ev := &nostr.Event{Kind: 0, Content: `{"name":"eve"}`, CreatedAt: nostr.Now(), Tags: nostr.Tags{{"h", private}}}
	if err := ev.Sign(eveSK); err != nil {
		t.Fatal(err)
	}
	if status, res := s.TryPublish(t, eveSK, ev); res.Accepted {
		t.Fatalf("status %d: a non-member's profile tagged with a private channel was accepted", status)
	}
}

func TestEngramIsReadableOnlyByItsAuthorOrTaggedPubkey(t *testing.T) {
	s := relaytest.Start(t)
	agentSK, agentPK := keypair(t)
	strangerSK, _ := keypair(t)
	s.Publish(t, agentSK, nostr.Event{Kind: protocol.KindEngram, Content: "core memory", CreatedAt: nostr.Now(), Tags: nostr.Tags{{"d", "core"}}})
	if got := s.Query(t, strangerSK, nostr.Filter{Kinds: []int{protocol.KindEngram}}); len(got) != 0 {
		t.Fatalf("a stranger read %d engrams", len(got))
	}
	if got := s.Query(t, agentSK, nostr.Filter{Kinds: []int{protocol.KindEngram}, Authors: []string{agentPK}}); len(got) != 1 {
		t.Fatalf("the author reads %d of its own engrams, want 1", len(got))
	}
}
