package harness_test

import (
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
)

// Channels share subscriptions, and the relay closes a whole subscription when the agent loses
// one private channel of it. The agent leaves that channel only: #general and the other private
// channel of the same subscription still get answers.
func TestLosingOnePrivateChannelKeepsTheOthersOfItsSubscription(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	lost := s.relay.CreateChannel(t, s.ownerSK, "lost", true)
	kept := s.relay.CreateChannel(t, s.ownerSK, "kept", true)
	for _, id := range []string{lost, kept} {
		s.relay.AddMember(t, s.ownerSK, id, s.agentPK, "bot")
	}
	s.start(nil)
	s.relay.Publish(t, s.ownerSK, nostr.Event{Kind: protocol.KindRemoveUser, CreatedAt: nostr.Now(),
		Tags: nostr.Tags{{"h", lost}, {"p", s.agentPK}}})
	s.waitLog("left channel", 20*time.Second)
	if !strings.Contains(s.logs.String(), "relay closed a channel subscription") {
		t.Fatalf("the relay did not close the shared subscription; the test no longer covers it:\n%s", s.logs.String())
	}
	s.waitReply(s.mention(s.ownerSK, "general still hears me?").ID)
	m := nostr.Event{Kind: 9, Content: "kept still hears me?", CreatedAt: nostr.Now(), Tags: nostr.Tags{{"h", kept}, {"p", s.agentPK}}}
	if err := m.Sign(s.ownerSK); err != nil {
		t.Fatal(err)
	}
	s.relay.Publish(t, s.ownerSK, m)
	s.waitReply(m.ID)
	if n := strings.Count(s.logs.String(), "left channel"); n != 1 {
		t.Fatalf("left %d channels, want 1", n)
	}
}
