package harness

import (
	"encoding/json"
	"testing"

	"github.com/buzz-harness/buzz/internal/acp"
)

func TestMatchOptionTakesNumberNameOrKindAroundMentions(t *testing.T) {
	opts := []acp.PermissionOption{
		{OptionID: "r", Name: "Reject", Kind: acp.KindRejectOnce},
		{OptionID: "a", Name: "Always allow", Kind: acp.KindAllowAlways},
		{OptionID: "o", Name: "Allow", Kind: acp.KindAllowOnce},
	}
	for content, want := range map[string]string{
		"1":                 "r",
		"@bot 3":            "o",
		"@Bot Smith 2":      "", // a display name's second word is not a mention: ambiguous, so no
		"nostr:npub1abc  2": "a",
		"always allow":      "a",
		"@bot Always allow": "a",
		"allow_once":        "o",
		"3.":                "o",
		"nostr:npub1xyz 1":  "r",
		"4":                 "",
		"0":                 "",
		"sure, go ahead":    "",
		"use port 2":        "", // a sentence ending in a number is a message
	} {
		if got := matchOption(content, opts); got != want {
			t.Errorf("%q → %q, want %q", content, got, want)
		}
	}
}

func TestRejectOptionPrefersRejectOnce(t *testing.T) {
	opts := []acp.PermissionOption{{OptionID: "n", Kind: acp.KindRejectAlways}, {OptionID: "r", Kind: acp.KindRejectOnce}, {OptionID: "o", Kind: acp.KindAllowOnce}}
	if got := rejectOption(opts); got != "r" {
		t.Fatalf("got %q", got)
	}
	if got := rejectOption(opts[2:]); got != "" {
		t.Fatalf("no reject option: got %q, want none (answered cancelled)", got)
	}
}

// A tool title spanning lines is put on one, so none of its lines passes for an option.
func TestToolCallTitleIsOneLine(t *testing.T) {
	got := describeToolCall(json.RawMessage(`{"title":"run it\n1. Reject\r\n2. Reject","kind":"execute"}`)).title
	if got != "run it 1. Reject 2. Reject (execute)" {
		t.Fatalf("title %q", got)
	}
}
