package main

import (
	"strings"
	"testing"
	"unicode/utf8"
)

const (
	uuidA = "0a1b2c3d-0000-4000-8000-00000000000a"
	uuidB = "0a1b2c3d-0000-4000-8000-00000000000b"
	ev1   = "1111111111111111111111111111111111111111111111111111111111111111"
	ev2   = "2222222222222222222222222222222222222222222222222222222222222222"
	root  = "3333333333333333333333333333333333333333333333333333333333333333"
)

func TestParsePromptFindsChannelEventsAndReplyInstruction(t *testing.T) {
	text := "[Context]\nScope: thread\nChannel: dev (#" + uuidA + ")\nThread root: " + root +
		"\nIMPORTANT: use `--reply-to " + root + "` on buzz messages send.\n\n" +
		"[Buzz events — 2 events]\n\n--- Event 1 (message) ---\nEvent ID: " + ev1 + "\nChannel: other (#" + uuidB + ")\nContent: first codeword=KIWI\n\n" +
		"--- Event 2 (message) ---\nEvent ID: " + ev2 + "\nContent: second line one\nmore content\nTags: []"
	p := parsePrompt(text)
	if p.ChannelID != uuidA {
		t.Errorf("channel %q, want the [Context] one", p.ChannelID)
	}
	if p.LastEventID() != ev2 || len(p.EventIDs) != 2 {
		t.Errorf("events %v", p.EventIDs)
	}
	if p.replyTarget() != root {
		t.Errorf("reply target %q, want the instructed %q", p.replyTarget(), root)
	}
	if p.LastContent() != "second line one" {
		t.Errorf("last content %q", p.LastContent())
	}
	if p.learnCodeword() != "KIWI" {
		t.Errorf("codeword %q", p.learnCodeword())
	}
}

func TestParsePromptFallbacks(t *testing.T) {
	cases := []struct {
		name, text, channel, target string
	}{
		{"bare uuid line in context", "[Context]\nScope: dm\n" + uuidB + "\n\nEvent ID: " + ev1, uuidB, ev1},
		{"no context block", "Event ID: " + ev1 + "\nChannel: x (#" + uuidA + ")", uuidA, ev1},
		{"nothing", "hello", "", ""},
		{"uppercase hex is not an event id", "Event ID: " + strings.Repeat("A", 64), "", ""},
	}
	for _, tc := range cases {
		p := parsePrompt(tc.text)
		if p.ChannelID != tc.channel || p.replyTarget() != tc.target {
			t.Errorf("%s: channel %q target %q, want %q %q", tc.name, p.ChannelID, p.replyTarget(), tc.channel, tc.target)
		}
	}
}

func TestSplitKeepsTextAndRunes(t *testing.T) {
	for _, tc := range []struct {
		s string
		n int
	}{{"echo: hello", 3}, {"héllo wörld ✓", 4}, {"ab", 5}, {"", 2}, {"abc", 0}} {
		parts := split(tc.s, tc.n)
		if strings.Join(parts, "") != tc.s || len(parts) == 0 {
			t.Errorf("split(%q,%d) = %q", tc.s, tc.n, parts)
		}
		for _, p := range parts {
			if !utf8.ValidString(p) {
				t.Errorf("split(%q,%d) cut a rune: %q", tc.s, tc.n, p)
			}
		}
	}
}

func FuzzParsePrompt(f *testing.F) {
	f.Add("[Context]\nChannel: a (#" + uuidA + ")\n\nEvent ID: " + ev1 + "\nContent: hi codeword=X")
	f.Add("--reply-to " + root)
	f.Add("[Context]")
	f.Fuzz(func(t *testing.T, text string) {
		p := parsePrompt(text)
		if p.ChannelID != "" && !strings.Contains(text, p.ChannelID) {
			t.Fatalf("channel %q not in the text", p.ChannelID)
		}
		if id := p.replyTarget(); id != "" && len(id) != 64 {
			t.Fatalf("reply target %q is not an event id", id)
		}
		_ = p.learnCodeword()
	})
}
