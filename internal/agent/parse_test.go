package agent

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestParsePromptReadsChannelReplyToAndLastEvent(t *testing.T) {
	ch := "0b5e8c1a-2f4d-4c3b-9a7e-1d2c3b4a5f60"
	anchor := strings.Repeat("c", 64)
	cases := []struct {
		name   string
		blocks []string
		want   promptInfo
	}{
		{"thread", harnessPrompt(ch, anchor, strings.Repeat("d", 64), "hi there"),
			promptInfo{ChannelID: ch, ReplyTo: anchor, EventID: strings.Repeat("d", 64), Content: "hi there", HasEvent: true}},
		{"bare uuid channel, no anchor", []string{"[Context]\nScope: channel\nChannel: " + strings.ToUpper(ch), "[Buzz event: x]\nEvent ID: " + anchor + "\nContent: yo\nTags: []"},
			promptInfo{ChannelID: ch, EventID: anchor, Content: "yo", HasEvent: true}},
		{"multi events, last wins", []string{"[Buzz events — 2 events]\n\n--- Event 1 (m) ---\nEvent ID: " + anchor + "\nContent: one\nTags: []\n\n--- Event 2 (m) ---\nEvent ID: " + strings.Repeat("e", 64) + "\nContent: two\nTags: []"},
			promptInfo{EventID: strings.Repeat("e", 64), Content: "two", HasEvent: true}},
		{"no context", []string{"just text"}, promptInfo{}},
		{"reply-to outside [Context] ignored", []string{"use --reply-to " + anchor}, promptInfo{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := parsePrompt(tc.blocks); got != tc.want {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func FuzzParsePrompt(f *testing.F) {
	for _, b := range harnessPrompt("0b5e8c1a-2f4d-4c3b-9a7e-1d2c3b4a5f60", strings.Repeat("c", 64), strings.Repeat("d", 64), "x\ny") {
		f.Add(b)
	}
	f.Add("[Context]\nChannel:\nContent:")
	f.Add("Event ID: \nContent: a\n--- Event 2\nEvent ID: z")
	f.Fuzz(func(t *testing.T, s string) {
		pi := parsePrompt(strings.Split(s, "\n\n"))
		if pi.ChannelID != "" && !uuidRe.MatchString(pi.ChannelID) {
			t.Errorf("channel %q is not a uuid", pi.ChannelID)
		}
		if pi.ReplyTo != "" && !hex64Re.MatchString(pi.ReplyTo) {
			t.Errorf("reply-to %q is not 64 hex", pi.ReplyTo)
		}
		_ = standingSummary(s, s, s, false)
	})
}

func FuzzParseSystemPrompt(f *testing.F) {
	f.Add(`"plain"`)
	f.Add(`{"mode":"append","content":[{"type":"text","text":"[Base]\nx"}]}`)
	f.Add(`{"mode":"override","content":[]}`)
	f.Add(`{"mode":"bogus"}`)
	f.Add(`null`)
	f.Add(`[1,2]`)
	f.Fuzz(func(t *testing.T, raw string) {
		text, ok, err := parseSystemPrompt(json.RawMessage(raw))
		if err != nil && (ok || text != "") {
			t.Errorf("error %v with result %q/%v", err, text, ok)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("multi-line error %q", err)
		}
	})
}

func TestParseSystemPromptForms(t *testing.T) {
	for raw, want := range map[string]string{
		`"s"`: "s",
		`{"mode":"append","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}`: "a\n\nb",
		`{"mode":"override","content":[{"type":"text","text":"o"}]}`:                          "o",
	} {
		got, ok, err := parseSystemPrompt(json.RawMessage(raw))
		if err != nil || !ok || got != want {
			t.Errorf("%s: %q %v %v", raw, got, ok, err)
		}
	}
	if _, ok, err := parseSystemPrompt(nil); ok || err != nil {
		t.Errorf("absent: ok=%v err=%v", ok, err)
	}
}

func TestShellOutputIsCappedAndSaysSo(t *testing.T) {
	res := runCommand(context.Background(), t.TempDir(), baseEnv(), nil, 10*time.Second, 1000, "sh", "-c", "head -c 5000 /dev/zero | tr '\\0' x")
	if len(res.Output) != 1000 || res.Truncated != 4000 || res.ExitCode != 0 {
		t.Fatalf("output %d bytes, truncated %d, exit %d", len(res.Output), res.Truncated, res.ExitCode)
	}
	if !strings.Contains(res.String(), "[output truncated: 4000 more bytes not shown]") {
		t.Errorf("rendered: %q", res.String()[1000:])
	}
}

func TestShellTimeoutKillsTheProcessGroup(t *testing.T) {
	start := time.Now()
	// The grandchild sleep holds the pipe open; only a group kill ends it promptly.
	res := runCommand(context.Background(), t.TempDir(), baseEnv(), nil, 300*time.Millisecond, 1000, "sh", "-c", "sleep 30 & sleep 30")
	if !res.TimedOut || !res.Failed() || !strings.Contains(res.String(), "timed out") {
		t.Errorf("result = %+v", res)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("timeout took %v", d)
	}
}

func TestShellReportsNonZeroExit(t *testing.T) {
	res := runCommand(context.Background(), t.TempDir(), baseEnv(), nil, 10*time.Second, 1000, "sh", "-c", "echo oops >&2; exit 3")
	if res.ExitCode != 3 || res.String() != "oops\n[exit code: 3]" {
		t.Errorf("result %+v rendered %q", res, res.String())
	}
}
