package harness_test

import (
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/testwait"
)

func TestAddedToChannelLiveSubscribesAndRemovedLeaves(t *testing.T) {
	t.Parallel()
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

func TestLeavingAndRejoiningAChannelBriefsTheNewSession(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start(nil)
	before := s.mention(s.ownerSK, "before leaving")
	r1 := s.waitReply(before.ID)
	s.relay.Publish(t, s.ownerSK, nostr.Event{Kind: protocol.KindRemoveUser, CreatedAt: nostr.Now(),
		Tags: nostr.Tags{{"h", s.channel}, {"p", s.agentPK}}})
	s.waitLog("left channel", 20*time.Second)
	// Role "member", not the setup's "bot": an identical 9000 within the same second would be the
	// same event, which the relay stores once.
	s.relay.AddMember(t, s.ownerSK, s.channel, s.agentPK, "member")
	testwait.Eventually(t, 20*time.Second, func() bool { return strings.Count(s.logs.String(), "name=general") >= 2 },
		"buzz-acp to resubscribe after being added back")
	s.mention(s.ownerSK, "after rejoining", replyTo(before.ID)) // the same thread
	s.waitNewReply(before.ID, r1)
	ps := s.prompts()
	if len(ps) != 2 || !standingIn(ps[0]) || !standingIn(ps[1]) {
		t.Fatalf("the session after rejoining was not briefed (%d prompts)", len(ps))
	}
	if n := len(s.methods("session/new")); n != 2 {
		t.Fatalf("%d session/new, want 2: leaving forgets the session", n)
	}
}
