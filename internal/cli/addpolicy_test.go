package cli_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/client"
	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/protocol/ownerauth"
	"github.com/buzz-harness/buzz/internal/relay/relaytest"
)

func TestBinarySetAddPolicyOwnerOnlyAdmitsOnlyTheAttestedOwner(t *testing.T) {
	t.Parallel()
	s := relaytest.Start(t)
	owner, agent, stranger := newUser(t, s.URL), newUser(t, s.URL), newUser(t, s.URL)
	tag, err := ownerauth.Issue(owner.sk, agent.pk, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		EventID  string `json:"event_id"`
		Accepted bool   `json:"accepted"`
	}
	agent.ok(&res, "", "channels", "set-add-policy", "--policy", "owner_only", "--auth-tag", tag.JSON())
	if !res.Accepted || !protocol.IsHex64(res.EventID) {
		t.Fatalf("set-add-policy = %+v", res)
	}

	theirs := stranger.createChannel("lure", false)
	e := stranger.fails(2, "channels", "add-member", "--channel", theirs, "--pubkey", agent.pk)
	if !strings.Contains(e.Message, "owner_only") {
		t.Fatalf("stranger's add refused with %q, want the owner_only refusal", e.Message)
	}
	mine := owner.createChannel("work", false)
	owner.ok(nil, "", "channels", "add-member", "--channel", mine, "--pubkey", agent.pk)

	agent.ok(nil, "", "channels", "set-add-policy", "--policy", "nobody")
	e = owner.fails(2, "channels", "add-member", "--channel", owner.createChannel("later", false), "--pubkey", agent.pk)
	if !strings.Contains(e.Message, "nobody") {
		t.Fatalf("owner's add under nobody refused with %q", e.Message)
	}
}

func TestBinarySetAddPolicyKeepsOtherProfileFields(t *testing.T) {
	t.Parallel()
	s := relaytest.Start(t)
	agent := newUser(t, s.URL)
	b := client.NewBridge(s.URL, agent.sk)
	ctx := context.Background()
	prev := &nostr.Event{Kind: protocol.KindAgentProfile, Content: `{"display_name":"Bee","channel_add_policy":"anyone","capabilities":["chat"]}`, Tags: nostr.Tags{}}
	if r, err := b.Publish(ctx, prev); err != nil || !r.Accepted {
		t.Fatalf("seed 10100: %v %+v", err, r)
	}
	agent.ok(nil, "", "channels", "set-add-policy", "--policy", "nobody")
	evs, err := b.Query(ctx, client.F(nostr.Filter{Kinds: []int{protocol.KindAgentProfile}, Authors: []string{agent.pk}})...)
	if err != nil || len(evs) != 1 {
		t.Fatalf("10100s: %v %d", err, len(evs))
	}
	var c map[string]any
	if err := json.Unmarshal([]byte(evs[0].Content), &c); err != nil {
		t.Fatal(err)
	}
	if c["channel_add_policy"] != "nobody" || c["display_name"] != "Bee" || c["capabilities"] == nil {
		t.Fatalf("profile content = %s", evs[0].Content)
	}
}

func TestBinarySetAddPolicyRefusesBadPolicyAndForeignAuthTag(t *testing.T) {
	t.Parallel()
	s := relaytest.Start(t)
	agent, other, owner := newUser(t, s.URL), newUser(t, s.URL), newUser(t, s.URL)
	if e := agent.fails(1, "channels", "set-add-policy", "--policy", "owners"); !strings.Contains(e.Message, "owner_only") {
		t.Fatalf("bad policy: %q", e.Message)
	}
	// A tag issued for another agent must not be put on this agent's profile.
	tag, _ := ownerauth.Issue(owner.sk, other.pk, "", nil)
	if e := agent.fails(1, "channels", "set-add-policy", "--policy", "owner_only", "--auth-tag", tag.JSON()); !strings.Contains(e.Message, "auth") {
		t.Fatalf("foreign tag: %q", e.Message)
	}
}
