package stack

import (
	"context"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/protocol/ownerauth"
	"github.com/buzz-harness/buzz/internal/relay/relaytest"
)

// A data dir from before #general was private keeps its channel, which is turned private.
func TestBootstrapMakesAnOldOpenGeneralPrivateAndIssuesTheAgentsAuthTag(t *testing.T) {
	s := relaytest.Start(t)
	dataDir := t.TempDir()
	ids, err := LoadIdentities(dataDir)
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
