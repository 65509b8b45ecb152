package client

import (
	"context"
	"fmt"
	"slices"

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

// PublishAddPolicy sets the signer's kind-10100 channel_add_policy, keeping every other field
// (UpdateAgentProfile).
func PublishAddPolicy(ctx context.Context, b *Bridge, policy string) (PublishResult, error) {
	if err := CheckAddPolicy(policy); err != nil {
		return PublishResult{}, err
	}
	res, _, err := UpdateAgentProfile(ctx, b, map[string]any{"channel_add_policy": policy}, true)
	return res, err
}

// UpdateAgentProfile reads the signer's current kind-10100 agent profile, writes set's fields
// over it (protocol.MergeAgentProfile: every other field is kept) and publishes the result;
// every 10100 writer goes through it. With always false nothing is published when the content
// and the auth tag would stay the same (published reports which). A refusal comes back as
// Accepted=false, as from Publish. The bridge's AuthTag, checked against the signer, goes on
// the event: the relay takes the owner for owner_only from the 10100's own tag.
func UpdateAgentProfile(ctx context.Context, b *Bridge, set map[string]any, always bool) (res PublishResult, published bool, err error) {
	tags := nostr.Tags{}
	if b.AuthTag != "" {
		tag, err := ownerauth.Parse(b.AuthTag)
		if err != nil {
			return PublishResult{}, false, err
		}
		if err := tag.Verify(b.PublicKey()); err != nil {
			return PublishResult{}, false, err
		}
		tags = append(tags, tag.NostrTag())
	}
	evs, err := b.Query(ctx, F(nostr.Filter{Kinds: []int{protocol.KindAgentProfile}, Authors: []string{b.PublicKey()}, Limit: 1})...)
	if err != nil {
		return PublishResult{}, false, err
	}
	cur := protocol.NewestEvent(evs)
	ev, changed, err := protocol.MergeAgentProfile(cur, set, b.now())
	if err != nil {
		return PublishResult{}, false, err
	}
	if !always && !changed && sameAuthTag(cur, tags) {
		return PublishResult{EventID: cur.ID, Accepted: true}, false, nil
	}
	ev.Tags = tags
	res, err = b.Publish(ctx, &ev)
	return res, err == nil, err
}

// sameAuthTag reports whether ev carries exactly the auth tag of tags (or none, like tags).
func sameAuthTag(ev *nostr.Event, tags nostr.Tags) bool {
	have := ev.Tags.Find(ownerauth.TagName)
	var want nostr.Tag
	if len(tags) > 0 {
		want = tags[0]
	}
	return slices.Equal(have, want)
}
