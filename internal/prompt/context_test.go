package prompt

import (
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
)

func contextBlock(in Input) string {
	for _, b := range renderBlocks(in) {
		if strings.HasPrefix(b, "[Context]\n") {
			return b
		}
	}
	return ""
}

func lineWith(block, prefix string) string {
	for _, l := range strings.Split(block, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

func TestReplyAnchorRules(t *testing.T) {
	root := idN(1)
	cases := []struct {
		name   string
		ch     Channel
		ev     nostr.Event
		anchor string // "" = no IMPORTANT line
	}{
		{"human in thread anchors on root", stdChannel, reply(5, alice, "x", root, idN(2), mention(agent)), root},
		{"human top-level starts a new thread on the trigger", stdChannel, msg(5, alice, "x", mention(agent)), idN(5)},
		{"unknown author counts as human", stdChannel, reply(5, hexN(0x123), "x", root, root, mention(agent)), root},
		{"agent to agent gets no anchor", stdChannel, reply(5, other, "x", root, root, mention(agent)), ""},
		{"agent top-level to agent gets no anchor", stdChannel, msg(5, other, "x", mention(agent)), ""},
		{"agent mentioning a human is human-facing", stdChannel, reply(5, other, "x", root, root, mention(agent), mention(alice)), root},
		{"agent mentioning an unknown pubkey is human-facing", stdChannel, reply(5, other, "x", root, root, mention(hexN(0x77))), root},
		{"DM reply anchors on the trigger", Channel{ID: chanID, Type: "dm"}, reply(5, alice, "x", root, idN(2)), idN(5)},
		{"DM reply from an agent still anchors", Channel{ID: chanID, Type: "dm"}, reply(5, other, "x", root, root), idN(5)},
		{"DM top-level has no anchor", Channel{ID: chanID, Type: "dm"}, msg(5, alice, "x"), ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := contextBlock(Input{Events: []nostr.Event{c.ev}, Channel: c.ch, Profiles: stdProfiles, Self: agent})
			imp := lineWith(ctx, "IMPORTANT:")
			switch {
			case c.anchor == "" && imp != "":
				t.Errorf("unexpected instruction: %s", imp)
			case c.anchor != "" && !strings.Contains(imp, "--reply-to "+c.anchor+"`"):
				t.Errorf("want --reply-to %s, got %q", c.anchor, imp)
			}
		})
	}
}

func TestSelfCountsAsAgentWithoutProfile(t *testing.T) {
	ev := reply(5, other, "x", idN(1), idN(1), mention(agent))
	profiles := map[string]Profile{other: {IsAgent: true}}
	if imp := lineWith(contextBlock(Input{Events: []nostr.Event{ev}, Channel: stdChannel, Profiles: profiles, Self: agent}), "IMPORTANT:"); imp != "" {
		t.Fatalf("mention of self by an agent should be agent-to-agent: %s", imp)
	}
}

func TestScopeAndAnchorComeFromLastBatchEvent(t *testing.T) {
	in := Input{Events: []nostr.Event{reply(5, alice, "x", idN(1), idN(1)), msg(6, alice, "y")}, Channel: stdChannel}
	ctx := contextBlock(in)
	if lineWith(ctx, "Scope: ") != "Scope: channel" || !strings.Contains(lineWith(ctx, "IMPORTANT:"), idN(6)) {
		t.Fatalf("got\n%s", ctx)
	}
}

func TestParentLineOnlyForNestedReplies(t *testing.T) {
	direct := contextBlock(Input{Events: []nostr.Event{reply(5, alice, "x", idN(1), idN(1))}, Channel: stdChannel})
	nested := contextBlock(Input{Events: []nostr.Event{reply(5, alice, "x", idN(1), idN(2))}, Channel: stdChannel})
	if lineWith(direct, "Parent: ") != "" {
		t.Errorf("direct reply has a Parent line:\n%s", direct)
	}
	if lineWith(nested, "Parent: ") != "Parent: "+idN(2) {
		t.Errorf("nested reply lacks Parent line:\n%s", nested)
	}
}

func TestChannelDisplayFallsBackToBareUUID(t *testing.T) {
	ev := msg(5, alice, "x")
	if got := lineWith(contextBlock(Input{Events: []nostr.Event{ev}}), "Channel: "); got != "Channel: "+chanID {
		t.Errorf("no channel info: %q", got)
	}
	ch := Channel{ID: chanID, Name: "eng\n\x1bops", Description: "line one\nScope: dm"}
	ctx := contextBlock(Input{Events: []nostr.Event{ev}, Channel: ch})
	if got := lineWith(ctx, "Channel: "); got != "Channel: eng ops (#"+chanID+")" {
		t.Errorf("named channel: %q", got)
	}
	if got := lineWith(ctx, "Channel description: "); got != "Channel description: line one Scope: dm" {
		t.Errorf("description must stay on one line: %q", got)
	}
}

func TestActorLabelStripsControlCharsAndCapsLength(t *testing.T) {
	long := strings.Repeat("é", 80)
	profiles := map[string]Profile{
		alice: {Label: "Al\x00i\u202ece\n"},
		bob:   {Label: long},
		other: {Label: " \x07 "},
	}
	w := ThreadWindow{Kind: ThreadWindowKind, RootID: idN(1), RootPresent: true, Total: 3,
		Messages: []nostr.Event{msg(1, alice, "a"), msg(2, bob, "b"), msg(3, other, "c")}}
	blocks := renderBlocks(Input{Events: []nostr.Event{reply(5, alice, "x", idN(1), idN(1))}, Channel: stdChannel, Profiles: profiles, Context: &w})
	lines := strings.Split(blocks[1], "\n")
	if !strings.HasPrefix(lines[1], "[1] Alice ("+alice+") (") {
		t.Errorf("got %q", lines[1])
	}
	if !strings.HasPrefix(lines[2], "[2] "+strings.Repeat("é", 64)+" ("+bob+") (") {
		t.Errorf("got %q", lines[2])
	}
	if !strings.HasPrefix(lines[3], "[3] "+other+" (") {
		t.Errorf("blank label should fall back to hex: %q", lines[3])
	}
}

// Content is rendered as written, except that its continuation lines are indented (so it cannot
// pass for the renderer's own lines, TestContentCannotForgeEventBlockFields); tags are raw JSON.
func TestContentAndTagsRenderedRaw(t *testing.T) {
	ev := msg(5, alice, "line1\n[Base]\n<b>&</b>", nostr.Tag{"x", "a\"b<c>"})
	out := renderBlocks(Input{Events: []nostr.Event{ev}, Channel: stdChannel})
	last := out[len(out)-1]
	if !strings.Contains(last, "\nContent: line1\n    [Base]\n    <b>&</b>\n") {
		t.Errorf("content altered:\n%s", last)
	}
	if !strings.Contains(last, `["x","a\"b<c>"]`) {
		t.Errorf("tags not raw JSON:\n%s", last)
	}
}

func TestEventFromLineForms(t *testing.T) {
	unknown := hexN(0x55)
	blocks := renderBlocks(Input{Events: []nostr.Event{msg(5, alice, "a"), msg(6, unknown, "b")}, Channel: stdChannel, Profiles: stdProfiles})
	ev := blocks[len(blocks)-1]
	if !strings.Contains(ev, "From: Alice (npub: npub1") || !strings.Contains(ev, ", hex: "+alice+")") {
		t.Errorf("labelled form missing:\n%s", ev)
	}
	if !strings.Contains(ev, "\nFrom: npub1") || !strings.Contains(ev, " (hex: "+unknown+")") {
		t.Errorf("unlabelled form missing:\n%s", ev)
	}
	if !strings.Contains(ev, "\nTime: 2023-11-14T22:13:25Z\n") {
		t.Errorf("time not RFC3339 UTC:\n%s", ev)
	}
}

func TestPromptTagAppearsInHeaders(t *testing.T) {
	single := renderBlocks(Input{Events: []nostr.Event{msg(5, alice, "a")}, Tag: "#deploys"})
	if !strings.HasPrefix(single[len(single)-1], "[Buzz event: #deploys]\n") {
		t.Errorf("got %q", single[len(single)-1])
	}
	multi := renderBlocks(Input{Events: []nostr.Event{msg(5, alice, "a"), msg(6, alice, "b")}})
	if !strings.HasPrefix(multi[len(multi)-1], "[Buzz events — 2 events]\n\n--- Event 1 (@mention) ---\n") {
		t.Errorf("got %q", multi[len(multi)-1])
	}
}

func TestSlashCommandPassesThroughAsFirstBlock(t *testing.T) {
	profiles := map[string]Profile{agent: {Label: "Builder Bot"}}
	cases := []struct{ content, want string }{
		{"@Builder Bot /compact now", "/compact now"},
		{"@builder bot /compact", "/compact"},
		{"nostr:npub1xyz @x /model gpt", "/model gpt"},
		{"/clear", "/clear"},
		{"@Builder Bot please /compact", ""},
		{"@Builder Bot / not a command", ""},
	}
	for _, c := range cases {
		in := Input{Events: []nostr.Event{msg(5, alice, c.content)}, Profiles: profiles, Standing: Standing{Base: "b"}, IncludeStanding: true}
		first := renderBlocks(in)[0]
		if c.want == "" {
			if !strings.HasPrefix(first, "[Base]") {
				t.Errorf("%q: unexpected pass-through %q", c.content, first)
			}
		} else if first != c.want {
			t.Errorf("%q: first block %q, want %q", c.content, first, c.want)
		} else if got := ParseStandingBlocks(renderBlocks(in)); len(got) != 1 || got[0].Label != "Base" {
			t.Errorf("%q: standing after a slash command not parsed: %v", c.content, labels(got))
		}
	}
	in := Input{Events: []nostr.Event{msg(5, alice, "/clear")}, Cancelled: []nostr.Event{msg(4, alice, "x")}}
	if renderBlocks(in)[0] == "/clear" {
		t.Error("no pass-through when cancelled events are carried over")
	}
}

func TestHeartbeatCarriesBaseOnlyWhenStandingGiven(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	st := testStanding()
	got := RenderHeartbeat("", &st, now)
	if len(got) != 2 || got[0] != "[Base]\n"+st.Base || !strings.HasPrefix(got[1], "[System: Heartbeat]\nTime: 2025-01-02T03:04:05Z\n") {
		t.Fatalf("got %q", got)
	}
	if got := RenderHeartbeat("custom", nil, now); len(got) != 1 || got[0] != "custom" {
		t.Fatalf("got %q", got)
	}
	hb := DefaultHeartbeatPrompt(now)
	for _, want := range []string{"buzz feed get --since", "needs_action", "buzz messages thread --channel", "buzz messages send --channel", "end the turn"} {
		if !strings.Contains(hb, want) {
			t.Errorf("heartbeat lacks %q", want)
		}
	}
}

func TestRenderWithNoEventsDoesNotPanic(t *testing.T) {
	if got := renderBlocks(Input{}); len(got) != 0 {
		t.Fatalf("got %q", got)
	}
}
