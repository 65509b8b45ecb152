package harness

import (
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
)

func TestConversationOf(t *testing.T) {
	const (
		ch     = "6f1c2a0e-0000-4000-8000-000000000001"
		self   = "1111111111111111111111111111111111111111111111111111111111111111"
		root   = "2222222222222222222222222222222222222222222222222222222222222222"
		parent = "3333333333333333333333333333333333333333333333333333333333333333"
	)
	stream := channel{ID: ch, Type: "stream"}
	dm := channel{ID: ch, Type: "dm"}
	ev := func(tags ...nostr.Tag) *nostr.Event {
		return &nostr.Event{ID: self, Tags: append(nostr.Tags{{"h", ch}}, tags...)}
	}
	cases := []struct {
		name   string
		policy SessionPolicy
		ch     channel
		ev     *nostr.Event
		want   convKey
	}{
		{"top-level opens its own thread", PolicyThread, stream, ev(), convKey{Channel: ch, Root: self}},
		{"direct reply keys on the root", PolicyThread, stream, ev(nostr.Tag{"e", root, "", "reply"}), convKey{Channel: ch, Root: root}},
		{"nested reply keys on the root, not the parent", PolicyThread, stream,
			ev(nostr.Tag{"e", root, "", "root"}, nostr.Tag{"e", parent, "", "reply"}), convKey{Channel: ch, Root: root}},
		{"lone root marker counts as top-level", PolicyThread, stream, ev(nostr.Tag{"e", root, "", "root"}), convKey{Channel: ch, Root: self}},
		{"unmarked e tag is ignored", PolicyThread, stream, ev(nostr.Tag{"e", root}), convKey{Channel: ch, Root: self}},
		{"DM is one conversation", PolicyThread, dm, ev(nostr.Tag{"e", root, "", "reply"}), convKey{Channel: ch}},
		{"channel policy is one conversation", PolicyChannel, stream, ev(nostr.Tag{"e", root, "", "reply"}), convKey{Channel: ch}},
	}
	for _, c := range cases {
		if got := conversationOf(c.policy, c.ch, c.ev); got != c.want {
			t.Errorf("%s: got %+v, want %+v", c.name, got, c.want)
		}
	}
}

func TestConversationKeyForms(t *testing.T) {
	const ch = "6f1c2a0e-0000-4000-8000-000000000001"
	th := convKey{Channel: ch, Root: "ab"}
	if th.String() != ch+":ab" || th.ID() != "buzz:"+ch+":ab" {
		t.Errorf("thread forms %q %q", th.String(), th.ID())
	}
	// A channel conversation's store key is the bare channel id: records from before thread
	// sessions load as channel conversations.
	c := protocol.ChannelConversation(ch)
	if c.String() != ch || c.ID() != "buzz:"+ch+":channel:"+ch {
		t.Errorf("channel forms %q %q", c.String(), c.ID())
	}
}

func TestHeartbeatHasNoConversation(t *testing.T) {
	// Heartbeats claim a slot with the zero conversation and keep their own session
	// (slot.heartbeat), never one of the conversation sessions.
	s := &slot{ready: true}
	convs := newTestQueue()
	convs.update(protocol.ChannelConversation("c"), func(c *conversation) { c.setSession(s, &convSession{ID: "x"}) })
	p := &pool{slots: []*slot{s}}
	if p.claim(convs, convKey{}) != s {
		t.Fatal("an idle slot is not claimable for a heartbeat")
	}
	if convs.sessionOn(convKey{}, s) != nil {
		t.Fatal("the zero conversation names a session")
	}
}

func TestPromptContextIsTheConversationsThread(t *testing.T) {
	const (
		ch   = "6f1c2a0e-0000-4000-8000-000000000001"
		self = "1111111111111111111111111111111111111111111111111111111111111111"
		root = "2222222222222222222222222222222222222222222222222222222222222222"
	)
	loneRoot := &nostr.Event{ID: self, Tags: nostr.Tags{{"e", root, "", "root"}}}
	// Under the thread policy a lone root marker opened its own thread: nothing to show yet,
	// and never the thread its marker names.
	if got := contextRoot(conversationOf(PolicyThread, channel{ID: ch, Type: "stream"}, loneRoot), loneRoot); got != "" {
		t.Errorf("lone root marker, thread policy: context of %q, want none", got)
	}
	reply := &nostr.Event{ID: self, Tags: nostr.Tags{{"e", root, "", "reply"}}}
	if got := contextRoot(conversationOf(PolicyThread, channel{ID: ch, Type: "stream"}, reply), reply); got != root {
		t.Errorf("reply: context of %q, want the root", got)
	}
	if got := contextRoot(protocol.ChannelConversation(ch), reply); got != root {
		t.Errorf("channel policy reply: context of %q, want the root", got)
	}
}
