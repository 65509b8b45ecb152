package stack_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/client"
	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/protocol/ownerauth"
	"github.com/buzz-harness/buzz/internal/testwait"
)

// checkStackLockedDown asserts what `buzz up` promises about who can reach the agent: #general
// is private, and the agent's kind 10100 says owner_only under the owner's attestation, so a
// stranger can neither join #general nor pull the agent into a channel of theirs.
func checkStackLockedDown(t *testing.T, relayHTTP, channel, ownerSK, agentPK string) {
	t.Helper()
	ctx := context.Background()
	owner := client.NewBridge(relayHTTP, ownerSK)
	ownerPK := owner.PublicKey()
	meta, err := owner.Query(ctx, client.F(nostr.Filter{Kinds: []int{protocol.KindGroupMetadata}, Tags: nostr.TagMap{"d": {channel}}})...)
	if err != nil || len(meta) == 0 {
		t.Fatalf("#general metadata: %v (%d events)", err, len(meta))
	}
	if v := protocol.ParseChannelMeta(&meta[0]).Visibility(); v != protocol.VisibilityPrivate {
		t.Errorf("#general visibility = %q, want private", v)
	}
	stranger := client.NewBridge(relayHTTP, nostr.GeneratePrivateKey())
	agentView := client.NewBridge(relayHTTP, nostr.GeneratePrivateKey())

	// The harness publishes the policy as it starts, which may be just after the banner.
	var profiles []nostr.Event
	testwait.Eventually(t, 20*time.Second, func() bool {
		var err error
		profiles, err = agentView.Query(ctx, client.F(nostr.Filter{Kinds: []int{protocol.KindAgentProfile}, Authors: []string{agentPK}})...)
		if err != nil {
			t.Fatal(err)
		}
		return len(profiles) > 0
	}, "the agent's kind 10100")
	if len(profiles) != 1 {
		t.Fatalf("agent's kind 10100: %d events, want 1", len(profiles))
	}
	var c map[string]any
	_ = json.Unmarshal([]byte(profiles[0].Content), &c)
	if c["channel_add_policy"] != client.AddPolicyOwnerOnly {
		t.Errorf("agent's channel_add_policy = %v, want owner_only", c["channel_add_policy"])
	}
	if tag, err := ownerauth.OfEvent(&profiles[0]); err != nil || tag.Owner != ownerPK {
		t.Errorf("agent's 10100 auth tag: owner %q err %v, want the stack's owner", tag.Owner, err)
	}

	res, err := stranger.Publish(ctx, &nostr.Event{Kind: protocol.KindJoinRequest, Tags: nostr.Tags{{"h", channel}}})
	if err == nil && res.Accepted {
		t.Errorf("a stranger joined #general: %+v", res)
	}
	lure := uuid.NewString()
	if res, err := stranger.Publish(ctx, &nostr.Event{Kind: protocol.KindCreateGroup, Tags: nostr.Tags{
		{"h", lure}, {"name", "general"}, {"visibility", protocol.VisibilityOpen}, {"channel_type", protocol.TypeStream}}}); err != nil || !res.Accepted {
		t.Fatalf("stranger's channel: %v %+v", err, res)
	}
	res, err = stranger.Publish(ctx, &nostr.Event{Kind: protocol.KindPutUser, Tags: nostr.Tags{{"h", lure}, {"p", agentPK}}})
	msg := res.Message
	if err != nil {
		msg = err.Error()
	}
	if err == nil && res.Accepted {
		t.Errorf("a stranger added the agent to their channel")
	} else if !strings.Contains(msg, "owner_only") {
		t.Errorf("stranger's add refused for %q, want the owner_only policy", msg)
	}
}
