package harness

import (
	"testing"

	"github.com/nbd-wtf/go-nostr"
)

func TestParseOwnerCommandTakesOneValueForModelAndModeWithMentionsAround(t *testing.T) {
	type want struct{ setting, value string }
	for content, w := range map[string]want{
		"!model sonnet":                 {settingModel, "sonnet"},
		"  !mode   accept-edits ":       {settingMode, "accept-edits"},
		"@Agent Smith !model opus":      {settingModel, "opus"},
		"!mode plan @Agent":             {settingMode, "plan"},
		"nostr:npub1xyz !model gpt-5.2": {settingModel, "gpt-5.2"},
		"!model":                        {},
		"!model @Agent":                 {},
		"!model sonnet please":          {},
		"please !model sonnet":          {},
		"!models sonnet":                {},
		"!rotate":                       {},
		"!model sonnet opus":            {},
	} {
		e := &nostr.Event{Kind: 9, PubKey: ownerPK, Content: content, Tags: nostr.Tags{{"p", agentPK}}}
		cmd, _ := ParseOwnerCommand(e, ownerPK, agentPK)
		s, v := cmd.setting(), cmd.Value
		ok := s != ""
		if ok != (w.setting != "") || s != w.setting || v != w.value {
			t.Errorf("%q: got %q %q %v, want %q %q", content, s, v, ok, w.setting, w.value)
		}
	}
}

func TestParseOwnerCommandIgnoresANonOwnersOrUnmentionedSetting(t *testing.T) {
	e := &nostr.Event{Kind: 9, PubKey: otherPK, Content: "!model x", Tags: nostr.Tags{{"p", agentPK}}}
	if _, ok := ParseOwnerCommand(e, ownerPK, agentPK); ok {
		t.Error("a non-owner's !model was recognised")
	}
	e = &nostr.Event{Kind: 9, PubKey: ownerPK, Content: "!model x"}
	if _, ok := ParseOwnerCommand(e, ownerPK, agentPK); ok {
		t.Error("a !model not mentioning the agent was recognised")
	}
}
