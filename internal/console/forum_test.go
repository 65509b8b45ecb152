package console_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/console"
	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/relay/relaytest"
)

// In a forum the composer posts a forum post, and a reply in a thread is a comment on it.
func TestConsolePostsForumPostsAndComments(t *testing.T) {
	r := relaytest.Start(t)
	ownerSK := nostr.GeneratePrivateKey()
	forum := uuid.NewString()
	r.Publish(t, ownerSK, nostr.Event{Kind: protocol.KindCreateGroup, Tags: nostr.Tags{
		{"h", forum}, {"name", "ideas"}, {"visibility", "open"}, {"channel_type", protocol.TypeForum}}})
	s, err := console.New(console.Config{RelayURL: r.URL, OwnerKey: ownerSK})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	send := func(body map[string]any) (m struct {
		ID   string
		Kind int
	}) {
		t.Helper()
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest("POST", ts.URL+"/api/messages", bytes.NewReader(b))
		req.Header.Set("X-Buzz-Token", s.Token())
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("POST /api/messages: %s", resp.Status)
		}
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	post := send(map[string]any{"channel": forum, "content": "an idea"})
	comment := send(map[string]any{"channel": forum, "content": "a comment", "replyTo": post.ID})
	if post.Kind != protocol.KindForumPost || comment.Kind != protocol.KindForumComment {
		t.Fatalf("kinds: post %d, comment %d; want 45001 and 45003", post.Kind, comment.Kind)
	}
}

// A code diff (kind 40008, buzz messages send-diff) is a message of the channel, with its repo,
// commit, file and language for the page to show it as a diff.
func TestConsoleListsDiffMessagesWithTheirDiffTags(t *testing.T) {
	r := relaytest.Start(t)
	ownerSK := nostr.GeneratePrivateKey()
	ch := r.CreateChannel(t, ownerSK, "code", false)
	diff := "--- a/x.go\n+++ b/x.go\n@@ -1 +1 @@\n-a\n+b\n"
	r.Publish(t, ownerSK, nostr.Event{Kind: protocol.KindDiffMessage, Content: diff, Tags: nostr.Tags{
		{"h", ch}, {"repo", "https://example.com/r"}, {"commit", "abcdef1"}, {"file", "x.go"}, {"l", "go"}, {"description", "rename"}}})
	s, err := console.New(console.Config{RelayURL: r.URL, OwnerKey: ownerSK})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	var msgs []struct {
		Kind    int    `json:"kind"`
		Content string `json:"content"`
		Diff    *struct {
			Repo, Commit, File, Lang, Description string
		} `json:"diff"`
	}
	getJSON(t, ts.URL+"/api/messages?channel="+ch, s.Token(), &msgs)
	for _, m := range msgs {
		if m.Kind != protocol.KindDiffMessage {
			continue
		}
		if m.Content != diff || m.Diff == nil || m.Diff.Repo != "https://example.com/r" || m.Diff.Commit != "abcdef1" ||
			m.Diff.File != "x.go" || m.Diff.Lang != "go" || m.Diff.Description != "rename" {
			t.Fatalf("diff message = %+v (diff %+v)", m, m.Diff)
		}
		return
	}
	t.Fatalf("no diff message among %+v", msgs)
}

// A thread reply sent with --broadcast is marked so, for the page to show it in the channel too.
func TestConsoleMarksBroadcastReplies(t *testing.T) {
	r := relaytest.Start(t)
	ownerSK := nostr.GeneratePrivateKey()
	ch := r.CreateChannel(t, ownerSK, "general", false)
	top := nostr.Event{Kind: protocol.KindStreamMessage, Content: "top", CreatedAt: nostr.Now(), Tags: nostr.Tags{{"h", ch}}}
	if err := top.Sign(ownerSK); err != nil {
		t.Fatal(err)
	}
	r.Publish(t, ownerSK, top)
	for _, bc := range []bool{false, true} {
		tags := nostr.Tags{{"h", ch}, {"e", top.ID, "", "reply"}}
		if bc {
			tags = append(tags, nostr.Tag{"broadcast", "1"})
		}
		r.Publish(t, ownerSK, nostr.Event{Kind: protocol.KindStreamMessage, Content: fmt.Sprint("broadcast ", bc), Tags: tags})
	}
	s, err := console.New(console.Config{RelayURL: r.URL, OwnerKey: ownerSK})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	var msgs []struct {
		Content   string `json:"content"`
		Broadcast bool   `json:"broadcast"`
	}
	getJSON(t, ts.URL+"/api/messages?channel="+ch, s.Token(), &msgs)
	seen := 0
	for _, m := range msgs {
		if strings.HasPrefix(m.Content, "broadcast ") {
			seen++
			if m.Broadcast != (m.Content == "broadcast true") {
				t.Errorf("%q: broadcast = %v", m.Content, m.Broadcast)
			}
		}
	}
	if seen != 2 {
		t.Fatalf("replies listed: %+v", msgs)
	}
}
