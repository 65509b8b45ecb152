package stack

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/protocol/ownerauth"
	"github.com/buzz-harness/buzz/internal/relay/relaytest"
)

// A data dir from before #general was private keeps its channel, which is turned private.
func TestBootstrapMakesAnOldOpenGeneralPrivateAndIssuesTheAgentsAuthTag(t *testing.T) {
	s := relaytest.Start(t)
	dataDir := t.TempDir()
	ids, err := LoadIdentities(dataDir, t.TempDir(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	old := s.CreateChannel(t, ids.Owner.SecretKey, "general", false)
	if err := writeState(dataDir, state{GeneralChannel: old, AgentName: "bee"}); err != nil {
		t.Fatal(err)
	}
	boot, err := bootstrap(context.Background(), s.URL, dataDir, ids, "agent")
	if err != nil {
		t.Fatal(err)
	}
	if boot.ChannelID != old {
		t.Fatalf("bootstrap made a new #general %s, want the old %s kept", boot.ChannelID, old)
	}
	meta := s.Query(t, ids.Owner.SecretKey, nostr.Filter{Kinds: []int{protocol.KindGroupMetadata}, Tags: nostr.TagMap{"d": {old}}})
	if len(meta) == 0 || protocol.ParseChannelMeta(&meta[0]).Visibility() != protocol.VisibilityPrivate {
		t.Fatalf("old #general is not private: %v", meta)
	}
	if owner, err := ownerauth.ResolveOwner(boot.AuthTag, ids.Agent.Pubkey); err != nil || owner != ids.Owner.Pubkey {
		t.Fatalf("auth tag %s: owner %q err %v", boot.AuthTag, owner, err)
	}
	mems := s.Query(t, ids.Owner.SecretKey, nostr.Filter{Kinds: []int{protocol.KindGroupMembers}, Tags: nostr.TagMap{"d": {old}}})
	if len(mems) == 0 || !protocol.IsMember(&mems[0], ids.Agent.Pubkey) {
		t.Fatalf("agent is not a member of #general")
	}
}

// agentProfile is the agent's newest kind 0.
func agentProfile(t *testing.T, s *relaytest.Server, ids Identities) *nostr.Event {
	t.Helper()
	return protocol.NewestEvent(s.Query(t, ids.Owner.SecretKey, nostr.Filter{Kinds: []int{protocol.KindProfile}, Authors: []string{ids.Agent.Pubkey}}))
}

func TestBootstrapPutsTheOwnersAttestationOnTheAgentsProfileAndKeepsIt(t *testing.T) {
	s := relaytest.Start(t)
	dataDir := t.TempDir()
	ids, err := LoadIdentities(dataDir, t.TempDir(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bootstrap(context.Background(), s.URL, dataDir, ids, "bee"); err != nil {
		t.Fatal(err)
	}
	first := agentProfile(t, s, ids)
	if !ownerauth.IsSibling(first, ids.Owner.Pubkey, time.Now().Unix()) {
		t.Fatalf("agent profile %v has no auth tag by the owner", first.Tags)
	}
	if _, err := bootstrap(context.Background(), s.URL, dataDir, ids, "bee"); err != nil {
		t.Fatal(err)
	}
	if again := agentProfile(t, s, ids); again.ID != first.ID {
		t.Fatalf("a second start rewrote an attested profile")
	}

	// A tool that rewrote the profile with empty tags stripped the attestation: the next start
	// puts it back and keeps the content.
	s.Publish(t, ids.Agent.SecretKey, nostr.Event{Kind: protocol.KindProfile, CreatedAt: first.CreatedAt + 1,
		Content: `{"name":"renamed"}`, Tags: nostr.Tags{}})
	if _, err := bootstrap(context.Background(), s.URL, dataDir, ids, "bee"); err != nil {
		t.Fatal(err)
	}
	fixed := agentProfile(t, s, ids)
	if fixed.Content != `{"name":"renamed"}` || !ownerauth.IsSibling(fixed, ids.Owner.Pubkey, time.Now().Unix()) {
		t.Fatalf("profile after the start: %s %v", fixed.Content, fixed.Tags)
	}
}
