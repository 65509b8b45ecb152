package client

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/protocol/ownerauth"
)

// The channel_add_policy values of a kind-10100 agent profile: who may add the agent to a channel.
const (
	AddPolicyAnyone    = "anyone"
	AddPolicyOwnerOnly = "owner_only"
	AddPolicyNobody    = "nobody"
)

// CheckAddPolicy refuses anything but the three policy values.
func CheckAddPolicy(p string) error {
	switch p {
	case AddPolicyAnyone, AddPolicyOwnerOnly, AddPolicyNobody:
		return nil
	}
	return fmt.Errorf("channel add policy must be anyone, owner_only or nobody, got %q", p)
}

// PublishAddPolicy publishes the signer's kind-10100 agent profile with channel_add_policy set
// to policy, keeping every other content field of the current profile (the directory fields
// other tools maintain). A refusal comes back as Accepted=false, as from Publish. authTagJSON ("" = none) is the NIP-OA tag in BUZZ_AUTH_TAG form; it
// goes on the event because the relay takes the owner for owner_only from the 10100's own tag.
func PublishAddPolicy(ctx context.Context, b *Bridge, policy, authTagJSON string) (PublishResult, error) {
	if err := CheckAddPolicy(policy); err != nil {
		return PublishResult{}, err
	}
	tags := nostr.Tags{}
	if authTagJSON != "" {
		tag, err := ownerauth.Parse(authTagJSON)
		if err != nil {
			return PublishResult{}, err
		}
		if err := tag.Verify(b.PublicKey()); err != nil {
			return PublishResult{}, err
		}
		tags = append(tags, tag.NostrTag())
	}
	evs, err := b.Query(ctx, F(nostr.Filter{Kinds: []int{protocol.KindAgentProfile}, Authors: []string{b.PublicKey()}, Limit: 1})...)
	if err != nil {
		return PublishResult{}, err
	}
	content := map[string]any{}
	var cur *nostr.Event
	for i := range evs {
		if cur == nil || evs[i].CreatedAt > cur.CreatedAt {
			cur = &evs[i]
		}
	}
	if cur != nil {
		// Content that is not an object is replaced: the relay would ignore it anyway.
		if json.Unmarshal([]byte(cur.Content), &content) != nil || content == nil {
			content = map[string]any{}
		}
	}
	content["channel_add_policy"] = policy
	raw, err := json.Marshal(content)
	if err != nil {
		return PublishResult{}, err
	}
	ev := &nostr.Event{Kind: protocol.KindAgentProfile, Content: string(raw), Tags: tags}
	// A replaceable-event tie goes to the lower id; a second update within the same second must
	// still replace the first.
	now := nostr.Timestamp(b.now().Unix())
	if cur != nil && now <= cur.CreatedAt {
		now = cur.CreatedAt + 1
	}
	ev.CreatedAt = now
	return b.Publish(ctx, ev)
}
