package relay_test

import (
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
)

// What buzz-acp's acknowledgements need of the relay: presence and typing fanned out and never
// stored, typing kept inside its channel, and an author able to take back a reaction.

func TestRelayFansOutPresenceWithoutTagsAndDoesNotStoreIt(t *testing.T) {
	s := sharedRelay
	agent, watcher := newUser(), newUser()
	sub := subscribe(t, s.Connect(t, watcher.sk), nostr.Filter{Kinds: []int{protocol.KindPresence}, Authors: []string{agent.pk}})
	c := dialRaw(t, s.URL)
	c.mustAuth(agent.sk, s.URL)
	if ok := c.publish(agent.sk, nostr.Event{Kind: protocol.KindPresence, Content: "online"}); ok[2] != true {
		t.Fatalf("presence: %v", ok)
	}
	if got := nextEvent(t, sub); got.Content != "online" {
		t.Fatalf("presence content %q", got.Content)
	}
	// A presence query is answered from memory with the relay's own signed summary
	// (presence.go); the agent's event itself is never stored.
	for _, ev := range s.Query(t, watcher.sk, nostr.Filter{Kinds: []int{protocol.KindPresence}, Authors: []string{agent.pk}}) {
		if ev.PubKey == agent.pk {
			t.Fatalf("presence stored: %+v", ev)
		}
	}
}

func TestRelayRefusesTypingWithoutChannel(t *testing.T) {
	s := sharedRelay
	u := newUser()
	c := dialRaw(t, s.URL)
	c.mustAuth(u.sk, s.URL)
	if ok := c.publish(u.sk, nostr.Event{Kind: protocol.KindTyping}); ok[2] != false || !hasPrefix(ok[3], "invalid:") {
		t.Fatalf("typing without h: %v, want OK false invalid:", ok)
	}
}

func TestRelayTypingInPrivateChannelReachesOnlyMembers(t *testing.T) {
	s := sharedRelay
	owner, agent, member, outsider := newUser(), newUser(), newUser(), newUser()
	ch := s.CreateChannel(t, owner.sk, "secret", true)
	s.AddMember(t, owner.sk, ch, agent.pk, "bot")
	s.AddMember(t, owner.sk, ch, member.pk, "member")
	f := nostr.Filter{Kinds: []int{protocol.KindPresence, protocol.KindTyping}, Authors: []string{agent.pk}}
	in := subscribe(t, s.Connect(t, member.sk), f)
	out := subscribe(t, s.Connect(t, outsider.sk), f)

	c := dialRaw(t, s.URL)
	c.mustAuth(agent.sk, s.URL)
	if ok := c.publish(agent.sk, nostr.Event{Kind: protocol.KindTyping, Tags: nostr.Tags{{"h", ch}}}); ok[2] != true {
		t.Fatalf("typing: %v", ok)
	}
	// Presence goes to everyone and is fanned out after the typing event: once the outsider has
	// it, the typing event would have arrived first.
	if ok := c.publish(agent.sk, nostr.Event{Kind: protocol.KindPresence, Content: "online"}); ok[2] != true {
		t.Fatalf("presence: %v", ok)
	}
	// A channel event and a global one are fanned out on different paths; the member gets both,
	// in either order.
	if a, b := nextEvent(t, in), nextEvent(t, in); a.Kind != protocol.KindTyping && b.Kind != protocol.KindTyping {
		t.Fatalf("member got kinds %d and %d, want the typing event among them", a.Kind, b.Kind)
	}
	if got := nextEvent(t, out); got.Kind != protocol.KindPresence {
		t.Fatalf("a non-member of the private channel got kind %d (typing leaked)", got.Kind)
	}
}

func TestRelayLetsAuthorDeleteOwnReactionInChannel(t *testing.T) {
	s := sharedRelay
	owner, agent := newUser(), newUser()
	ch := s.CreateChannel(t, owner.sk, "general", true)
	s.AddMember(t, owner.sk, ch, agent.pk, "bot")
	s.Publish(t, owner.sk, msg(ch, "hi"))
	target := latest(t, s, owner.sk, nostr.Filter{Kinds: []int{9}, Tags: nostr.TagMap{"h": {ch}}}).ID
	s.Publish(t, agent.sk, nostr.Event{Kind: protocol.KindReaction, Content: "👀", Tags: nostr.Tags{{"e", target}, {"h", ch}}})
	mine := nostr.Filter{Kinds: []int{protocol.KindReaction}, Authors: []string{agent.pk}, Tags: nostr.TagMap{"e": {target}}}
	r := latest(t, s, owner.sk, mine)

	deletions := subscribe(t, s.Connect(t, owner.sk), nostr.Filter{Kinds: []int{protocol.KindDeletion}, Tags: nostr.TagMap{"h": {ch}}})
	// Someone else's kind 5 does not take it away.
	s.Publish(t, owner.sk, nostr.Event{Kind: protocol.KindDeletion, Tags: nostr.Tags{{"e", r.ID}, {"h", ch}}})
	if got := s.Query(t, owner.sk, mine); len(got) != 1 {
		t.Fatal("another user's kind 5 deleted the agent's reaction")
	}
	nextEvent(t, deletions)
	s.Publish(t, agent.sk, nostr.Event{Kind: protocol.KindDeletion, Tags: nostr.Tags{{"e", r.ID}, {"h", ch}}})
	if got := s.Query(t, owner.sk, mine); len(got) != 0 {
		t.Fatalf("reaction still returned after its author's kind 5: %v", got)
	}
	if d := nextEvent(t, deletions); d.PubKey != agent.pk || protocol.TagValue(d.Tags, "e") != r.ID {
		t.Fatalf("subscribers got deletion %v, want the agent's naming %s", d, r.ID)
	}
}
