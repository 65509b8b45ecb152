package cli_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/relay/relaytest"
)

func (u *user) createForum(name string) string {
	u.t.Helper()
	var out struct {
		ChannelID string `json:"channel_id"`
	}
	u.ok(&out, "", "channels", "create", "--name", name, "--type", "forum")
	return out.ChannelID
}

func ids(ms []msg) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	slices.Sort(out)
	return out
}

func sortedIDs(s ...string) []string { slices.Sort(s); return s }

func TestBinaryMessagesGetLimitKindsAndThreadDepthLimit(t *testing.T) {
	t.Parallel()
	s := relaytest.Start(t)
	alice := newUser(t, s.URL)
	forum := alice.createForum("ideas")
	var chat, post, comment, reply sent
	alice.ok(&chat, "", "messages", "send", "--channel", forum, "--content", "chat line")
	alice.ok(&post, "", "messages", "send", "--channel", forum, "--kind", "45001", "--content", "a post")
	alice.ok(&comment, "", "messages", "send", "--channel", forum, "--kind", "45003", "--reply-to", post.EventID, "--content", "a comment")
	alice.ok(&reply, "", "messages", "send", "--channel", forum, "--kind", "45003", "--reply-to", comment.EventID, "--content", "a reply to it")

	var got []msg
	alice.ok(&got, "", "messages", "get", "--channel", forum, "--kinds", "45001")
	if len(got) != 1 || got[0].ID != post.EventID || got[0].Kind != protocol.KindForumPost {
		t.Fatalf("get --kinds 45001 = %+v", got)
	}
	alice.ok(&got, "", "messages", "get", "--channel", forum, "--kinds", "9,45003", "--limit", "5")
	if !slices.Equal(ids(got), sortedIDs(chat.EventID, comment.EventID, reply.EventID)) {
		t.Fatalf("get --kinds 9,45003 = %+v", got)
	}
	alice.ok(&got, "", "messages", "get", "--channel", forum, "--limit", "1")
	if len(got) != 1 {
		t.Fatalf("get --limit 1 = %d messages", len(got))
	}
	// A 45003 without --reply-to is refused before sending.
	if e := alice.fails(1, "messages", "send", "--channel", forum, "--kind", "45003", "--content", "x"); !strings.Contains(e.Message, "--reply-to") {
		t.Fatalf("45003 without a parent: %+v", e)
	}

	alice.ok(&got, "", "messages", "thread", "--channel", forum, "--event", reply.EventID)
	if !slices.Equal(ids(got), sortedIDs(post.EventID, comment.EventID, reply.EventID)) {
		t.Fatalf("thread = %+v", got)
	}
	alice.ok(&got, "", "messages", "thread", "--channel", forum, "--event", reply.EventID, "--depth-limit", "1")
	if !slices.Equal(ids(got), sortedIDs(post.EventID, comment.EventID)) {
		t.Fatalf("thread --depth-limit 1 = %+v, want the root and its direct comment", got)
	}
	alice.ok(&got, "", "messages", "thread", "--channel", forum, "--event", post.EventID, "--limit", "1")
	if len(got) != 2 || got[0].ID != post.EventID {
		t.Fatalf("thread --limit 1 = %+v, want the root and one reply", got)
	}
}

func TestBinaryMessagesSendBroadcastReplyCarriesTheBroadcastTag(t *testing.T) {
	t.Parallel()
	s := relaytest.Start(t)
	alice := newUser(t, s.URL)
	ch := alice.createChannel("general", false)
	var top, bc sent
	alice.ok(&top, "", "messages", "send", "--channel", ch, "--content", "top")
	alice.ok(&bc, "", "messages", "send", "--channel", ch, "--content", "for everyone", "--reply-to", top.EventID, "--broadcast")
	var got []msg
	alice.ok(&got, "", "messages", "get", "--channel", ch)
	for _, m := range got {
		if m.ID == bc.EventID {
			if !slices.ContainsFunc(m.Tags, func(t nostr.Tag) bool { return slices.Equal(t, nostr.Tag{"broadcast", "1"}) }) || protocol.ParseThread(m.Tags).Parent != top.EventID {
				t.Fatalf("broadcast reply tags %v", m.Tags)
			}
			return
		}
	}
	t.Fatalf("the broadcast reply is not in messages get: %+v", got)
}

func TestBinaryMessagesSendDiffPublishesKind40008WithUpstreamTags(t *testing.T) {
	t.Parallel()
	s := relaytest.Start(t)
	alice := newUser(t, s.URL)
	ch := alice.createChannel("code", false)
	var top sent
	alice.ok(&top, "", "messages", "send", "--channel", ch, "--content", "review please")
	diff := "--- a/main.go\n+++ b/main.go\n@@ -1 +1 @@\n-package x\n+package y\n"
	var w struct {
		EventID  string `json:"event_id"`
		Accepted bool   `json:"accepted"`
	}
	alice.ok(&w, diff, "messages", "send-diff", "--channel", ch, "--diff", "-", "--repo", "https://github.com/o/r",
		"--commit", "ABCDEF1", "--file", "main.go", "--parent-commit", "1234567", "--source-branch", "fix", "--target-branch", "main",
		"--pr", "42", "--description", "rename the package", "--reply-to", top.EventID)
	var got []msg
	alice.ok(&got, "", "messages", "get", "--channel", ch, "--kinds", "40008")
	if len(got) != 1 || got[0].ID != w.EventID || got[0].Content != diff {
		t.Fatalf("get --kinds 40008 = %+v", got)
	}
	want := nostr.Tags{{"h", ch}, {"repo", "https://github.com/o/r"}, {"commit", "abcdef1"}, {"file", "main.go"},
		{"parent-commit", "1234567"}, {"branch", "fix", "main"}, {"pr", "42"}, {"l", "go"}, {"description", "rename the package"},
		{"e", top.EventID, "", "reply"}}
	if !slices.EqualFunc(got[0].Tags, want, func(a, b nostr.Tag) bool { return slices.Equal(a, b) }) {
		t.Fatalf("tags\n got %v\nwant %v", got[0].Tags, want)
	}
	for _, bad := range [][]string{
		{"--repo", "git@github.com:o/r", "--commit", "abcdef1"},
		{"--repo", "https://github.com/o/r", "--commit", "abc"},
		{"--repo", "https://github.com/o/r", "--commit", "abcdef1", "--source-branch", "fix"},
	} {
		args := append([]string{"messages", "send-diff", "--channel", ch, "--diff", diff}, bad...)
		if e := alice.fails(1, args...); e.Error != "user_error" {
			t.Fatalf("%v: %+v", bad, e)
		}
	}
	big := strings.Repeat("+x\n", 21000) // 63 KB: under the 64 KiB message cap, over the 60 KiB diff cap
	if e := alice.failsIn(1, big, "messages", "send-diff", "--channel", ch, "--diff", "-", "--repo", "https://r", "--commit", "abcdef1"); !strings.Contains(e.Message, "60 KiB") {
		t.Fatalf("oversized diff: %+v", e)
	}
}

func TestBinaryMessagesVoteCountsOnlyOnForumPosts(t *testing.T) {
	t.Parallel()
	s := relaytest.Start(t)
	alice, bob := newUser(t, s.URL), newUser(t, s.URL)
	forum := alice.createForum("ideas")
	var post, chat sent
	alice.ok(&post, "", "messages", "send", "--channel", forum, "--kind", "45001", "--content", "ship friday?")
	alice.ok(&chat, "", "messages", "send", "--channel", forum, "--content", "just chat")
	var w struct{ Accepted bool }
	bob.ok(&w, "", "messages", "vote", "--event", post.EventID, "--direction", "up")
	votes := s.Query(t, alice.sk, nostr.Filter{Kinds: []int{protocol.KindForumVote}, Tags: nostr.TagMap{"e": {post.EventID}}})
	if !w.Accepted || len(votes) != 1 || votes[0].Content != "+" || votes[0].PubKey != bob.pk || protocol.TagValue(votes[0].Tags, "h") != forum {
		t.Fatalf("vote: %+v, stored %+v", w, votes)
	}
	if e := bob.fails(2, "messages", "vote", "--event", chat.EventID, "--direction", "down"); !strings.Contains(e.Message, "vote target must be a forum post or comment") {
		t.Fatalf("vote on chat: %+v", e)
	}
	if e := bob.fails(1, "messages", "vote", "--event", post.EventID, "--direction", "sideways"); e.Error != "user_error" {
		t.Fatalf("bad direction: %+v", e)
	}
}

type channelHit struct {
	ChannelID string `json:"channel_id"`
	Name      string `json:"name"`
	About     string `json:"about"`
	Archived  bool   `json:"archived"`
}

func TestBinaryChannelsSearchUpdateAndDelete(t *testing.T) {
	t.Parallel()
	s := relaytest.Start(t)
	alice, bob := newUser(t, s.URL), newUser(t, s.URL)
	train := alice.createChannel("release-train", false)
	var notes struct {
		ChannelID string `json:"channel_id"`
	}
	alice.ok(&notes, "", "channels", "create", "--name", "random", "--description", "Release notes and banter")
	old := alice.createChannel("release-2025", false)
	alice.ok(nil, "", "channels", "archive", "--channel", old)

	var hits []channelHit
	bob.ok(&hits, "", "channels", "search", "--query", "RELEASE")
	if len(hits) != 2 || hits[0].ChannelID != notes.ChannelID || hits[1].ChannelID != train {
		t.Fatalf("search release = %+v, want random (by description) then release-train, archived left out", hits)
	}
	bob.ok(&hits, "", "channels", "search", "--query", "release-train", "--exact")
	if len(hits) != 1 || hits[0].ChannelID != train {
		t.Fatalf("search --exact = %+v", hits)
	}
	bob.ok(&hits, "", "channels", "search", "--query", "release", "--include-archived")
	if len(hits) != 3 || hits[0].Name != "random" || hits[1].ChannelID != old || !hits[1].Archived {
		t.Fatalf("search --include-archived = %+v", hits)
	}

	alice.ok(nil, "", "channels", "update", "--channel", train, "--name", "release-bus", "--description", "ships weekly")
	var info struct {
		Name        string `json:"name"`
		Description string `json:"description"`
	}
	bob.ok(&info, "", "channels", "get", "--channel", train)
	if info.Name != "release-bus" || info.Description != "ships weekly" {
		t.Fatalf("after update: %+v", info)
	}
	bob.ok(nil, "", "channels", "join", "--channel", train)
	if e := bob.fails(2, "channels", "update", "--channel", train, "--name", "mine"); e.Error != "relay_error" {
		t.Fatalf("a member's rename: %+v", e)
	}
	if e := alice.fails(1, "channels", "update", "--channel", train); !strings.Contains(e.Message, "nothing to update") {
		t.Fatalf("update without fields: %+v", e)
	}

	if e := bob.fails(2, "channels", "delete", "--channel", train); !strings.Contains(e.Message, "only owners") {
		t.Fatalf("a member's delete: %+v", e)
	}
	alice.ok(nil, "", "channels", "delete", "--channel", train)
	if e := bob.fails(1, "channels", "get", "--channel", train); e.Error != "not_found" {
		t.Fatalf("get after delete: %+v", e)
	}
}

func TestBinaryUsersSetPresenceIsWhatPresenceReports(t *testing.T) {
	t.Parallel()
	s := relaytest.Start(t)
	alice, bob := newUser(t, s.URL), newUser(t, s.URL)
	var got []struct {
		Pubkey string `json:"pubkey"`
		Status string `json:"status"`
	}
	bob.ok(nil, "", "users", "set-presence", "away")
	alice.ok(&got, "", "users", "presence", "--pubkeys", bob.pk)
	if len(got) != 1 || got[0].Status != "away" {
		t.Fatalf("after set-presence away: %+v", got)
	}
	bob.ok(nil, "", "users", "set-presence", "--status", "online")
	alice.ok(&got, "", "users", "presence", "--pubkeys", bob.pk)
	if len(got) != 1 || got[0].Status != "online" {
		t.Fatalf("after --status online: %+v", got)
	}
	bob.ok(nil, "", "users", "set-presence", "offline")
	alice.ok(&got, "", "users", "presence", "--pubkeys", bob.pk)
	if len(got) != 0 {
		t.Fatalf("after offline: %+v", got)
	}
	if e := bob.fails(1, "users", "set-presence", "busy"); e.Error != "user_error" {
		t.Fatalf("bad status: %+v", e)
	}
}

func TestBinaryDMsHideTakesTheDMOffYourListOnly(t *testing.T) {
	t.Parallel()
	s := relaytest.Start(t)
	alice, bob := newUser(t, s.URL), newUser(t, s.URL)
	var dm struct {
		DMID string `json:"dm_id"`
	}
	alice.ok(&dm, "", "dms", "open", "--pubkey", bob.pk)
	type dmLine struct {
		DMID   string `json:"dm_id"`
		Hidden bool   `json:"hidden"`
	}
	var list []dmLine
	alice.ok(nil, "", "dms", "hide", "--channel", dm.DMID)
	alice.ok(&list, "", "dms", "list")
	if len(list) != 0 {
		t.Fatalf("alice's list after hide = %+v", list)
	}
	alice.ok(&list, "", "dms", "list", "--include-hidden")
	if len(list) != 1 || list[0].DMID != dm.DMID || !list[0].Hidden {
		t.Fatalf("--include-hidden = %+v", list)
	}
	list = nil // decoding into the old elements would keep their hidden=true
	bob.ok(&list, "", "dms", "list")
	if len(list) != 1 || list[0].Hidden {
		t.Fatalf("bob's list = %+v, want the DM (only alice hid it)", list)
	}
	// Hidden, not gone: alice still writes there.
	alice.ok(nil, "", "dms", "send", "--channel", dm.DMID, "--content", "still here")
	general := alice.createChannel("general", false)
	if e := alice.fails(2, "dms", "hide", "--channel", general); !strings.Contains(e.Message, "not a DM") {
		t.Fatalf("hide of a stream channel: %+v", e)
	}
}
