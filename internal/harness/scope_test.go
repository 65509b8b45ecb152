package harness

import (
	"testing"

	"github.com/nbd-wtf/go-nostr"
)

func TestScopeOf(t *testing.T) {
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
		want   scopeKey
	}{
		{"top-level opens its own thread", PolicyThread, stream, ev(), scopeKey{ch, self}},
		{"direct reply keys on the root", PolicyThread, stream, ev(nostr.Tag{"e", root, "", "reply"}), scopeKey{ch, root}},
		{"nested reply keys on the root, not the parent", PolicyThread, stream,
			ev(nostr.Tag{"e", root, "", "root"}, nostr.Tag{"e", parent, "", "reply"}), scopeKey{ch, root}},
		{"lone root marker counts as top-level", PolicyThread, stream, ev(nostr.Tag{"e", root, "", "root"}), scopeKey{ch, self}},
		{"unmarked e tag is ignored", PolicyThread, stream, ev(nostr.Tag{"e", root}), scopeKey{ch, self}},
		{"DM is one conversation", PolicyThread, dm, ev(nostr.Tag{"e", root, "", "reply"}), scopeKey{Channel: ch}},
		{"channel policy is one conversation", PolicyChannel, stream, ev(nostr.Tag{"e", root, "", "reply"}), scopeKey{Channel: ch}},
	}
	for _, c := range cases {
		if got := scopeOf(c.policy, c.ch, c.ev); got != c.want {
			t.Errorf("%s: got %+v, want %+v", c.name, got, c.want)
		}
	}
}

func TestScopeKeyForms(t *testing.T) {
	const ch = "6f1c2a0e-0000-4000-8000-000000000001"
	th := scopeKey{Channel: ch, Root: "ab"}
	if th.String() != ch+":ab" || th.conversationID() != "buzz:"+ch+":ab" {
		t.Errorf("thread forms %q %q", th.String(), th.conversationID())
	}
	// A channel conversation's store key is the bare channel id: records from before thread
	// sessions load as channel conversations.
	c := channelScope(ch)
	if c.String() != ch || c.conversationID() != "buzz:"+ch+":channel:"+ch {
		t.Errorf("channel forms %q %q", c.String(), c.conversationID())
	}
}

func TestHeartbeatHasNoConversation(t *testing.T) {
	// Heartbeats claim a slot with the zero scope and keep their own session (slot.heartbeat),
	// never one of the conversation sessions.
	s := &slot{ready: true, sessions: map[scopeKey]*chanSession{channelScope("c"): {ID: "x"}}}
	p := &pool{slots: []*slot{s}}
	if p.claim(scopeKey{}) != s {
		t.Fatal("an idle slot is not claimable for a heartbeat")
	}
	if _, ok := s.sessions[scopeKey{}]; ok {
		t.Fatal("the zero scope names a session")
	}
}

func TestPromptContextIsTheScopesThread(t *testing.T) {
	const (
		ch   = "6f1c2a0e-0000-4000-8000-000000000001"
		self = "1111111111111111111111111111111111111111111111111111111111111111"
		root = "2222222222222222222222222222222222222222222222222222222222222222"
	)
	loneRoot := &nostr.Event{ID: self, Tags: nostr.Tags{{"e", root, "", "root"}}}
	// Under the thread policy a lone root marker opened its own thread: nothing to show yet,
	// and never the thread its marker names.
	if got := contextRoot(scopeOf(PolicyThread, channel{ID: ch, Type: "stream"}, loneRoot), loneRoot); got != "" {
		t.Errorf("lone root marker, thread policy: context of %q, want none", got)
	}
	reply := &nostr.Event{ID: self, Tags: nostr.Tags{{"e", root, "", "reply"}}}
	if got := contextRoot(scopeOf(PolicyThread, channel{ID: ch, Type: "stream"}, reply), reply); got != root {
		t.Errorf("reply: context of %q, want the root", got)
	}
	if got := contextRoot(channelScope(ch), reply); got != root {
		t.Errorf("channel policy reply: context of %q, want the root", got)
	}
}
