package harness_test

import (
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
)

func TestAddedToChannelLiveSubscribesAndRemovedLeaves(t *testing.T) {
	s := newStack(t)
	s.start(nil)
	second := s.relay.CreateChannel(t, s.ownerSK, "second", false)
	s.relay.AddMember(t, s.ownerSK, second, s.agentPK, "bot")
	s.waitLog("name=second", 20*time.Second)

	m := nostr.Event{Kind: 9, Content: "hello second", CreatedAt: nostr.Now(), Tags: nostr.Tags{{"h", second}, {"p", s.agentPK}}}
	if err := m.Sign(s.ownerSK); err != nil {
		t.Fatal(err)
	}
	s.relay.Publish(t, s.ownerSK, m)
	s.waitReply(m.ID)

	s.relay.Publish(t, s.ownerSK, nostr.Event{Kind: protocol.KindRemoveUser, CreatedAt: nostr.Now(),
		Tags: nostr.Tags{{"h", second}, {"p", s.agentPK}}})
	s.waitLog("left channel", 20*time.Second)
}
