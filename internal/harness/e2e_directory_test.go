package harness_test

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/protocol/ownerauth"
	"github.com/buzz-harness/buzz/internal/testwait"
)

// directoryEntry is the agent's kind-10100 content as a map ("" when it has none).
func (s *stack) directoryEntry() map[string]any {
	s.t.Helper()
	evs := s.relay.Query(s.t, s.ownerSK, nostr.Filter{Kinds: []int{protocol.KindAgentProfile}, Authors: []string{s.agentPK}})
	ev := protocol.NewestEvent(evs)
	if ev == nil {
		return nil
	}
	var c map[string]any
	if err := json.Unmarshal([]byte(ev.Content), &c); err != nil {
		s.t.Fatalf("directory entry content %q: %v", ev.Content, err)
	}
	return c
}

// waitDirectory waits until the agent's directory entry lists exactly the channel ids want.
func (s *stack) waitDirectory(want ...string) map[string]any {
	s.t.Helper()
	slices.Sort(want)
	var c map[string]any
	testwait.Eventually(s.t, 20*time.Second, func() bool {
		c = s.directoryEntry()
		return slices.Equal(stringList(c["channel_ids"]), want)
	}, "the directory entry to list the channels")
	return c
}

// stringList is a JSON array of strings as a sorted slice.
func stringList(v any) []string {
	arr, _ := v.([]any)
	out := []string{}
	for _, x := range arr {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

func TestDirectoryEntryPublishedAtStartListsTheChannelsAndWhoIsAnswered(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start(nil, "BUZZ_ACP_SESSION_TITLE=Bee")
	c := s.waitDirectory(s.channel)
	if c["agent_type"] != "agent" || c["status"] != "online" || c["name"] != "Bee" {
		t.Fatalf("entry %v", c)
	}
	if got := stringList(c["channels"]); !slices.Equal(got, []string{"general"}) {
		t.Fatalf("channels %v", got)
	}
	if caps, ok := c["capabilities"].([]any); !ok || len(caps) != 0 {
		t.Fatalf("capabilities %v, want []", c["capabilities"])
	}
	// owner-only with a known owner is published as an allowlist of the owner, as upstream.
	if c["respond_to"] != "allowlist" || !slices.Equal(stringList(c["respond_to_allowlist"]), []string{s.ownerPK}) {
		t.Fatalf("respond_to %v, allowlist %v", c["respond_to"], c["respond_to_allowlist"])
	}
}

func TestJoiningAChannelRepublishesTheDirectoryEntry(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start(nil)
	s.waitDirectory(s.channel)
	second := s.relay.CreateChannel(t, s.ownerSK, "second", false)
	s.relay.AddMember(t, s.ownerSK, second, s.agentPK, "bot")
	s.waitDirectory(s.channel, second)

	s.relay.Publish(t, s.ownerSK, nostr.Event{Kind: protocol.KindRemoveUser, CreatedAt: nostr.Now(),
		Tags: nostr.Tags{{"h", second}, {"p", s.agentPK}}})
	s.waitDirectory(s.channel)
}

func TestDirectoryEntryKeepsTheChannelAddPolicyAndOtherFields(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.relay.Publish(t, s.agentSK, nostr.Event{Kind: protocol.KindAgentProfile,
		Content: `{"channel_add_policy":"nobody","picture":"https://example.com/bee.png","respond_to_allowlist":["stale"]}`})
	s.start(nil, "BUZZ_ACP_RESPOND_TO=anyone")
	c := s.waitDirectory(s.channel)
	if c["channel_add_policy"] != "nobody" || c["picture"] != "https://example.com/bee.png" {
		t.Fatalf("fields the harness does not own were lost: %v", c)
	}
	if c["respond_to"] != "anyone" {
		t.Fatalf("respond_to %v", c["respond_to"])
	}
	if _, ok := c["respond_to_allowlist"]; ok {
		t.Fatalf("a stale allowlist survived outside allowlist mode: %v", c)
	}
}

func TestNoPublishDirectoryLeavesTheEntryAlone(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start(nil, "BUZZ_ACP_NO_PUBLISH_DIRECTORY=true")
	// A whole turn later, a start-time write would long have landed.
	s.waitReply(s.mention(s.ownerSK, "hello").ID)
	if c := s.directoryEntry(); c != nil {
		t.Fatalf("directory entry published with the opt-out: %v", c)
	}
}

// With BUZZ_AUTH_TAG, the events buzz-acp signs (its 👀 and the deletion of it, its directory
// entry) and the reply its agent sends with the buzz CLI all carry the exact tag.
func TestAuthTagGoesOnTheEventsTheHarnessAndItsAgentSign(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	tag, err := ownerauth.Issue(s.ownerSK, s.agentPK, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	s.start(nil, "BUZZ_AUTH_TAG="+tag.JSON())
	m := s.mention(s.ownerSK, "hello")
	reply := s.waitReply(m.ID)
	var del nostr.Event
	testwait.Eventually(t, 20*time.Second, func() bool {
		evs := s.relay.Query(t, s.ownerSK, nostr.Filter{Kinds: []int{protocol.KindDeletion}, Authors: []string{s.agentPK}})
		if len(evs) > 0 {
			del = evs[0]
		}
		return len(evs) > 0
	}, "the 👀 to be removed")
	s.waitDirectory(s.channel)
	entry := s.relay.Query(t, s.ownerSK, nostr.Filter{Kinds: []int{protocol.KindAgentProfile}, Authors: []string{s.agentPK}})
	for name, ev := range map[string]nostr.Event{"reply": reply, "deletion": del, "directory entry": entry[0]} {
		n := 0
		for _, tg := range ev.Tags {
			if slices.Equal(tg, tag.NostrTag()) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%s tags %v, want the auth tag once", name, ev.Tags)
		}
	}
}
