package prompt

import (
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr"
)

func parsedLine(t *testing.T, blocks []string) string {
	t.Helper()
	for _, b := range blocks {
		for _, l := range strings.Split(b, "\n") {
			if strings.HasPrefix(l, "Parsed: ") {
				return l
			}
		}
	}
	return ""
}

func TestParsedOmitsParentOnlyWhenItEqualsRoot(t *testing.T) {
	root, mid := idN(1), idN(2)
	cases := []struct {
		name string
		ev   nostr.Event
		want string
	}{
		{"direct reply (reply marker only)", reply(4, alice, "x", root, root), "Parsed: root=" + root},
		{"direct reply (root and reply markers both the root)", msg(4, alice, "x",
			nostr.Tag{"e", root, "", "root"}, nostr.Tag{"e", root, "", "reply"}), "Parsed: root=" + root},
		{"root marker only", msg(4, alice, "x", nostr.Tag{"e", root, "", "root"}), "Parsed: root=" + root},
		{"nested reply keeps parent", reply(4, alice, "x", root, mid), "Parsed: parent=" + mid + ", root=" + root},
		{"mentions survive", reply(4, alice, "x", root, root, mention(bob)),
			"Parsed: root=" + root + ", mentions=[Bob (" + bob + ")]"},
		{"top-level with no mentions has no Parsed line", msg(4, alice, "x"), ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := parsedLine(t, renderBlocks(Input{Events: []nostr.Event{c.ev}, Channel: stdChannel, Profiles: stdProfiles}))
			if got != c.want {
				t.Errorf("got %q\nwant %q", got, c.want)
			}
		})
	}
}

func TestDirectReplyKeepsRawTagsIdentityAndReplyInstruction(t *testing.T) {
	ev := reply(4, alice, "x", idN(1), idN(1), mention(agent))
	out := strings.Join(renderBlocks(Input{Events: []nostr.Event{ev}, Channel: stdChannel, Profiles: stdProfiles, Self: agent}), "\n")
	for _, want := range []string{
		`Tags: [["h","` + chanID + `"],["e","` + idN(1) + `","","reply"],["p","` + agent + `"]]`,
		"Event ID: " + ev.ID,
		"hex: " + alice + ")",
		"--reply-to " + idN(1) + "`",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("prompt lacks %q", want)
		}
	}
}

// retrievalHint reports whether the [Context] block still tells the agent how to fetch history.
func retrievalHint(ctx string) bool {
	for _, l := range strings.Split(ctx, "\n") {
		if strings.HasPrefix(l, "Hint: ") {
			return strings.Contains(l, "Use `buzz messages ")
		}
	}
	return false
}

// completeInput is a thread turn that meets all four conditions of change 3b.
func completeInput() Input {
	return Input{
		Events:    []nostr.Event{tTrigger},
		Channel:   stdChannel,
		Profiles:  stdProfiles,
		Self:      agent,
		Context:   window(tRoot, tBob, tAgent, tTrigger),
		Delivered: map[string]bool{},
	}
}

func TestRetrievalHintDroppedOnlyWhenContextComplete(t *testing.T) {
	cases := []struct {
		name     string
		mutate   func(*Input)
		wantHint bool
	}{
		{"all four conditions hold", func(*Input) {}, false},
		{"complete DM conversation", func(in *Input) {
			in.Channel.Type = "dm"
			d := msg(40, alice, "hi")
			w := BuildConversationContext([]nostr.Event{msg(39, bob, "earlier"), d}, 12)
			in.Events, in.Context = []nostr.Event{d}, &w
		}, false},
		{"1: truncated window", func(in *Input) { in.Context.Truncated = true }, true},
		{"1: no context fetched", func(in *Input) { in.Context = nil }, true},
		{"1: context empty after delta", func(in *Input) {
			w := window(tTrigger)
			in.Context = w
		}, true},
		{"2: root missing from the fetch", func(in *Input) { in.Context = window(tBob, tAgent, tTrigger) }, true},
		{"3: batch event outside the window (mixed threads)", func(in *Input) {
			in.Events = []nostr.Event{msg(0, bob, "@Builder Bot elsewhere", mention(agent)), tTrigger}
		}, true},
		{"3: cancelled event outside the window", func(in *Input) {
			in.Cancelled = []nostr.Event{reply(9, bob, "older ask", idN(50), idN(50))}
		}, true},
		{"3: trigger itself not in the window", func(in *Input) { in.Context = window(tRoot, tBob, tAgent) }, true},
		{"4: a context message was delivered before", func(in *Input) { in.Delivered[tBob.ID] = true }, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := completeInput()
			c.mutate(&in)
			res := Build(in)
			ctx := res.Blocks[0]
			if got := retrievalHint(ctx); got != c.wantHint {
				t.Errorf("retrieval hint present=%v, want %v\n%s", got, c.wantHint, ctx)
			}
			if res.ContextComplete == c.wantHint {
				t.Errorf("ContextComplete=%v contradicts hint=%v", res.ContextComplete, c.wantHint)
			}
		})
	}
}

func TestContextIncompleteSaysWhyOnlyWhenSomethingIsMissing(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*Input)
		want   string
	}{
		{"complete thread", func(*Input) {}, ""},
		{"top-level channel message needs no context", func(in *Input) {
			in.Events, in.Context = []nostr.Event{msg(4, alice, "@Builder Bot hi", mention(agent))}, nil
		}, ""},
		{"earlier context already delivered", func(in *Input) { in.Delivered[tBob.ID] = true }, ""},
		{"thread not fetched", func(in *Input) { in.Context = nil }, "thread context was not fetched"},
		{"truncated thread", func(in *Input) {
			w := BuildThreadContext(idN(1), []nostr.Event{tRoot, tBob, tAgent, tTrigger}, nil, 2, 40)
			in.Context = &w
		}, "thread truncated to 3 of 41 messages"},
		{"truncated DM conversation", func(in *Input) {
			in.Channel.Type = "dm"
			d := msg(40, alice, "hi")
			w := BuildConversationContext([]nostr.Event{msg(39, bob, "earlier"), d}, 2)
			in.Events, in.Context = []nostr.Event{d}, &w
		}, "conversation truncated to its newest 2 messages"},
		{"root missing", func(in *Input) { in.Context = window(tBob, tAgent, tTrigger) }, "root message was not found"},
		{"batch event from another thread", func(in *Input) {
			in.Events = []nostr.Event{msg(0, bob, "@Builder Bot elsewhere", mention(agent)), tTrigger}
		}, "outside the fetched thread"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := completeInput()
			c.mutate(&in)
			res := Build(in)
			if got := res.ContextIncomplete; (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
				t.Errorf("ContextIncomplete = %q, want %q", got, c.want)
			}
			if res.ContextComplete && res.ContextIncomplete != "" {
				t.Errorf("complete context with a reason %q", res.ContextIncomplete)
			}
		})
	}
}

func TestCancelledEventInsideWindowKeepsContextComplete(t *testing.T) {
	in := completeInput()
	in.Events = []nostr.Event{tNested}
	in.Cancelled = []nostr.Event{tTrigger}
	in.Context = window(tRoot, tBob, tAgent, tTrigger, tNested)
	if !Build(in).ContextComplete {
		t.Fatal("window holding root, every batch and cancelled event should be complete")
	}
}

func TestDroppingHintLeavesEverythingElseUnchanged(t *testing.T) {
	complete := renderBlocks(completeInput())
	in := completeInput()
	in.Context.Truncated = true // only the hint (and the header's flag) may differ
	kept := renderBlocks(in)
	if !strings.HasSuffix(kept[0], complete[0][strings.Index(complete[0], "\nIMPORTANT"):]) {
		t.Errorf("reply instruction differs")
	}
	wantCtx := strings.Replace(kept[1], " messages, truncated)]", " messages)]", 1)
	if complete[1] != wantCtx || complete[2] != kept[2] {
		t.Errorf("context section or event block changed with the hint:\n%s\n---\n%s", complete[1], kept[1])
	}
	if !strings.HasPrefix(complete[1], "[Thread Context (3 of 4 messages)]\n[1] Alice ("+alice+")") {
		t.Errorf("unexpected context header:\n%s", complete[1])
	}
}
