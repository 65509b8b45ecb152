package cli_test

import (
	"strings"
	"testing"

	"github.com/buzz-harness/buzz/internal/protocol/engram"
	"github.com/buzz-harness/buzz/internal/relay/relaytest"
)

type memValue struct {
	Slug      string `json:"slug"`
	Value     string `json:"value"`
	Hash      string `json:"hash"`
	EventID   string `json:"event_id"`
	CreatedAt int64  `json:"created_at"`
}

type memWrite struct {
	Slug      string  `json:"slug"`
	Hash      string  `json:"hash"`
	EventID   string  `json:"event_id"`
	CreatedAt int64   `json:"created_at"`
	Accepted  bool    `json:"accepted"`
	DryRun    bool    `json:"dry_run"`
	Value     *string `json:"value"`
}

type memListing struct {
	Slug      string `json:"slug"`
	EventID   string `json:"event_id"`
	CreatedAt int64  `json:"created_at"`
}

func TestBinaryMemSetCoreIsReadByAgentAndOwner(t *testing.T) {
	t.Parallel()
	s := relaytest.Start(t)
	agent, owner := newUser(t, s.URL), newUser(t, s.URL)
	profile := "I am Hexa.\nI keep the build green.\n"
	var w memWrite
	agent.ok(&w, profile, "mem", "set", "core", "-", "--owner", owner.pk)
	if !w.Accepted || w.Slug != "core" || w.Hash != engram.Hash(profile) {
		t.Fatalf("set core = %+v", w)
	}
	var asAgent, asOwner memValue
	agent.ok(&asAgent, "", "mem", "get", "core", "--owner", owner.pk)
	owner.ok(&asOwner, "", "mem", "get", "core", "--agent", agent.pk)
	for who, got := range map[string]memValue{"agent": asAgent, "owner": asOwner} {
		if got.Value != profile || got.EventID != w.EventID || got.Hash != w.Hash {
			t.Fatalf("get core as %s = %+v, want the profile just written", who, got)
		}
	}
	// A third key can neither read the relay's copy nor decrypt it.
	stranger := newUser(t, s.URL)
	if e := stranger.fails(1, "mem", "get", "core", "--agent", agent.pk); e.Error != "not_found" {
		t.Fatalf("stranger get core: %+v", e)
	}
}

func TestBinaryMemLsListsLiveMemoriesButNotCore(t *testing.T) {
	t.Parallel()
	s := relaytest.Start(t)
	agent, owner := newUser(t, s.URL), newUser(t, s.URL)
	own := "--owner=" + owner.pk
	agent.ok(nil, "", "mem", "set", "core", "who I am", own)
	agent.ok(nil, "", "mem", "set", "notes", "buy honey", own)
	agent.ok(nil, "", "mem", "set", "mem/todo/today", "ship it", own)
	agent.ok(nil, "", "mem", "set", "gone", "soon deleted", own)
	agent.ok(nil, "", "mem", "rm", "gone", own)
	for _, args := range [][]string{{"mem", "ls", own}, {"mem", "ls", "--agent", agent.pk}} {
		u := agent
		if args[2] == "--agent" {
			u = owner
		}
		var ls []memListing
		u.ok(&ls, "", args...)
		if len(ls) != 2 || ls[0].Slug != "mem/notes" || ls[1].Slug != "mem/todo/today" {
			t.Fatalf("%v = %+v, want mem/notes and mem/todo/today", args, ls)
		}
	}
	if e := agent.fails(1, "mem", "get", "gone", own); e.Error != "not_found" {
		t.Fatalf("get of a removed memory: %+v", e)
	}
}

func TestBinaryMemPatchChecksBaseHashAndDryRunPublishesNothing(t *testing.T) {
	t.Parallel()
	s := relaytest.Start(t)
	agent, owner := newUser(t, s.URL), newUser(t, s.URL)
	own := "--owner=" + owner.pk
	agent.ok(nil, "", "mem", "set", "notes", "one\ntwo\nthree\n", own)
	var h struct{ Hash string }
	agent.ok(&h, "", "mem", "hash", "notes", own)
	if h.Hash != engram.Hash("one\ntwo\nthree\n") {
		t.Fatalf("hash = %q", h.Hash)
	}
	diff := "--- a\n+++ b\n@@ -2,1 +2,1 @@\n-two\n+TWO\n"

	var dry memWrite
	agent.ok(&dry, diff, "mem", "patch", "notes", "--base-hash", h.Hash, "--dry-run", own)
	if !dry.DryRun || dry.Value == nil || *dry.Value != "one\nTWO\nthree\n" || dry.EventID != "" {
		t.Fatalf("dry run = %+v", dry)
	}
	var got memValue
	agent.ok(&got, "", "mem", "get", "notes", own)
	if got.Value != "one\ntwo\nthree\n" {
		t.Fatalf("a dry run changed the value to %q", got.Value)
	}

	var w memWrite
	agent.ok(&w, diff, "mem", "patch", "notes", "--base-hash", h.Hash, own)
	agent.ok(&got, "", "mem", "get", "notes", own)
	if got.Value != "one\nTWO\nthree\n" || w.Hash != engram.Hash(got.Value) || got.EventID != w.EventID {
		t.Fatalf("after patch: write %+v, get %+v", w, got)
	}
	// The same patch against the old hash is now stale.
	if e := agent.failsIn(1, diff, "mem", "patch", "notes", "--base-hash", h.Hash, own); e.Error != "conflict" {
		t.Fatalf("stale base hash: %+v", e)
	}
	if e := agent.failsIn(1, diff, "mem", "patch", "notes", own); e.Error != "user_error" || !strings.Contains(e.Message, "--no-base-hash") {
		t.Fatalf("patch without a base-hash choice: %+v", e)
	}
}

func TestBinaryMemRefusesBadInput(t *testing.T) {
	t.Parallel()
	s := relaytest.Start(t)
	agent, owner := newUser(t, s.URL), newUser(t, s.URL)
	own := "--owner=" + owner.pk
	cases := []struct {
		name, stdin, category string
		args                  []string
	}{
		{"unknown slug", "", "not_found", []string{"mem", "get", "nothing-here", own}},
		{"bad slug", "", "user_error", []string{"mem", "get", "Bad Slug", own}},
		{"no owner", "", "user_error", []string{"mem", "get", "core"}},
		{"empty stdin", "", "user_error", []string{"mem", "set", "core", "-", own}},
		{"owner writes", "", "user_error", []string{"mem", "set", "core", "x", "--agent", agent.pk}},
		{"owner and agent", "", "user_error", []string{"mem", "ls", own, "--agent", agent.pk}},
		{"rm core", "", "user_error", []string{"mem", "rm", "core", own}},
		{"oversized", strings.Repeat("x", engram.MaxBody+2), "user_error", []string{"mem", "set", "notes", "-", own}},
		{"unknown subcommand", "", "user_error", []string{"mem", "sett", "core", "x"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			u := agent
			u.t = t
			if e := u.failsIn(1, c.stdin, c.args...); e.Error != c.category {
				t.Fatalf("%v: %+v, want %s", c.args, e, c.category)
			}
		})
	}
	// --allow-empty lets an empty stdin through, and an explicit "" argument needs no flag.
	agent.ok(nil, "", "mem", "set", "core", "-", "--allow-empty", own)
	agent.ok(nil, "", "mem", "set", "notes", "", own)
}
