package subrules

import (
	"strings"
	"testing"
	"time"

	"github.com/expr-lang/expr/vm"
	"github.com/nbd-wtf/go-nostr"
)

const (
	self  = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	chanA = "11111111-1111-4111-8111-111111111111"
	chanB = "22222222-2222-4222-8222-222222222222"
)

func event(kind int, content string, mention bool) *nostr.Event {
	ev := &nostr.Event{Kind: kind, Content: content, PubKey: strings.Repeat("b", 64), CreatedAt: 1000}
	if mention {
		ev.Tags = nostr.Tags{{"p", self}}
	}
	return ev
}

const forumConfig = `
[[rules]]
name = "forum"
channels = ["` + chanA + `"]
kinds = [45001, 45003]
prompt_tag = "forum post"

[[rules]]
name = "deploys"
channels = "all"
kinds = [9]
filter = 'str_contains(content, "deploy") && str_len(content) < 100'

[[rules]]
name = "mentions"
channels = "all"
require_mention = true
`

func mustParse(t *testing.T, doc string) *Set {
	t.Helper()
	s, err := Parse([]byte(doc), nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestFirstMatchingRuleGivesItsPromptTag(t *testing.T) {
	s := mustParse(t, forumConfig)
	for _, c := range []struct {
		ev      *nostr.Event
		channel string
		tag     string
	}{
		{event(45001, "a post", false), chanA, "forum post"},
		{event(9, "please deploy now", true), chanA, "deploys"}, // deploys comes before mentions
		{event(9, "hello", true), chanB, "mentions"},
		{event(45003, "a comment", true), chanB, "mentions"}, // the forum rule covers only chanA
	} {
		if tag, ok := s.Match(c.ev, c.channel, self); !ok || tag != c.tag {
			t.Errorf("%d %q in %s: got %q %v, want %q", c.ev.Kind, c.ev.Content, c.channel, tag, ok, c.tag)
		}
	}
}

func TestEventNoRuleMatchesIsDropped(t *testing.T) {
	s := mustParse(t, forumConfig)
	if tag, ok := s.Match(event(9, "hello", false), chanB, self); ok {
		t.Fatalf("unmentioned chat matched %q", tag)
	}
}

func TestRequireMentionAcceptsUpstreamMentionTag(t *testing.T) {
	s := ForMode(ModeMentions, []int{9}, false)
	ev := event(9, "hi", false)
	ev.Tags = nostr.Tags{{"mention", self}}
	if _, ok := s.Match(ev, chanA, self); !ok {
		t.Fatal("a mention tag naming the agent did not count as a mention")
	}
}

func TestFilterErrorIsNoMatchForTheWholeEvent(t *testing.T) {
	s := mustParse(t, `
[[rules]]
name = "first"
channels = "all"
filter = 'content matches content || kind == 9'
[[rules]]
name = "fallback"
channels = "all"
`)
	// The content is not a valid regular expression: the filter fails when it runs.
	if tag, ok := s.Match(event(9, "[unclosed", false), chanA, self); ok {
		t.Fatalf("an evaluation error fell through to rule %q", tag)
	}
}

func TestRuleDisabledAfterFiveTimeoutsInARow(t *testing.T) {
	var warned []string
	s, err := New([]Rule{{Name: "slow", Filter: "kind == 9"}, {Name: "rest"}}, func(rule, msg string) { warned = append(warned, rule+": "+msg) })
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	defer close(release)
	s.timeout = time.Millisecond
	s.run = func(*vm.Program, any) (any, error) { <-release; return true, nil }
	for i := range DisableAfter {
		if tag, ok := s.Match(event(9, "x", false), chanA, self); ok {
			t.Fatalf("timeout %d matched %q (fail closed)", i+1, tag)
		}
	}
	if len(warned) != 1 || !strings.Contains(warned[0], "slow: ") || !strings.Contains(warned[0], "disabled") {
		t.Fatalf("warnings %q, want one saying rule slow is disabled", warned)
	}
	if tag, _ := s.Match(event(9, "x", false), chanA, self); tag != "rest" {
		t.Fatalf("after disabling: matched %q, want the next rule", tag)
	}
}

func TestFilterThatDoesNotParseNamesItsRule(t *testing.T) {
	for _, bad := range []string{`kind ==`, `unknown_var == 1`, `len(content) > 3`, `1..5 == 1`, `all([1], # > 0)`, `content`} {
		_, err := Parse([]byte("[[rules]]\nname = \"broken\"\nchannels = \"all\"\nfilter = '"+bad+"'\n"), nil)
		if err == nil || !strings.Contains(err.Error(), `rule "broken"`) {
			t.Errorf("filter %q: error %v, want one naming rule broken", bad, err)
		}
	}
}

func TestConfigRefusesWhatUpstreamRefuses(t *testing.T) {
	many := strings.Repeat("[[rules]]\nchannels = \"all\"\nname = \"r\"\n", 1)
	for name, doc := range map[string]string{
		"channels other than all": "[[rules]]\nname = \"x\"\nchannels = \"some\"\n",
		"channel not a UUID":      "[[rules]]\nname = \"x\"\nchannels = [\"general\"]\n",
		"missing channels":        "[[rules]]\nname = \"x\"\n",
		"missing name":            "[[rules]]\nchannels = \"all\"\n",
		"duplicate name":          many + many,
		"unknown key":             "[[rules]]\nname = \"x\"\nchannels = \"all\"\ncolour = 1\n",
		"stale channel tables":    "[channel.x]\nkinds = [9]\n",
		"no rules":                "",
		"filter too long":         "[[rules]]\nname = \"x\"\nchannels = \"all\"\nfilter = '" + strings.Repeat(" ", MaxFilterBytes) + "kind == 1'\n",
		"too many rules":          manyRules(MaxRules + 1),
	} {
		if _, err := Parse([]byte(doc), nil); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := Parse([]byte(manyRules(MaxRules)), nil); err != nil {
		t.Errorf("%d rules refused: %v", MaxRules, err)
	}
}

func manyRules(n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString("[[rules]]\nchannels = \"all\"\nname = \"r" + strings.Repeat("x", i) + "\"\n")
	}
	return b.String()
}

func TestChannelFilterIsTheUnionOfItsRules(t *testing.T) {
	s := mustParse(t, `
[[rules]]
name = "forum"
channels = ["`+chanA+`"]
kinds = [45001, 45003]
[[rules]]
name = "mentions"
channels = "all"
kinds = [9]
require_mention = true
`)
	a := s.Filter([]string{chanA}, self)
	if got := a.Kinds; len(got) != 3 || got[0] != 9 || got[2] != 45003 {
		t.Errorf("forum channel kinds %v, want 9, 45001, 45003", got)
	}
	if _, ok := a.Tags["p"]; ok {
		t.Error("forum channel filter requires a mention, though the forum rule does not")
	}
	b := s.Filter([]string{chanB}, self)
	if len(b.Kinds) != 1 || b.Kinds[0] != 9 || b.Tags["p"][0] != self {
		t.Errorf("other channel filter %+v, want kind 9 with #p", b)
	}
}

func TestRuleWithoutKindsSubscribesToAnyKind(t *testing.T) {
	s := ForMode(ModeAll, nil, false)
	if f := s.Filter([]string{chanA}, self); f.Kinds != nil || f.Tags["p"] != nil {
		t.Fatalf("all mode filter %+v, want any kind, no #p", f)
	}
	if tag, ok := s.Match(event(30023, "x", false), chanA, self); !ok || tag != "all" {
		t.Fatalf("all mode: %q %v", tag, ok)
	}
}

func TestChannelNoRuleCoversIsNotCovered(t *testing.T) {
	s := mustParse(t, "[[rules]]\nname = \"one\"\nchannels = [\""+chanA+"\"]\n")
	if !s.Covers(chanA) || s.Covers(chanB) {
		t.Fatalf("Covers(a)=%v Covers(b)=%v", s.Covers(chanA), s.Covers(chanB))
	}
}
