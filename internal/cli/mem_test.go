package cli_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/buzz-harness/buzz/internal/protocol"
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
	agent.ok(&w, profile, "mem", "set", "core", "-", "--owner", owner.pk, "--json")
	if !w.Accepted || w.Slug != "core" || w.Hash != engram.Hash(profile) {
		t.Fatalf("set core = %+v", w)
	}
	var asAgent, asOwner memValue
	agent.ok(&asAgent, "", "mem", "get", "core", "--owner", owner.pk, "--json")
	owner.ok(&asOwner, "", "mem", "get", "core", "--agent", agent.pk, "--json")
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
	agent.ok(nil, "", "mem", "set", "core", "who I am", own, "--json")
	agent.ok(nil, "", "mem", "set", "notes", "buy honey", own, "--json")
	agent.ok(nil, "", "mem", "set", "mem/todo/today", "ship it", own, "--json")
	agent.ok(nil, "", "mem", "set", "gone", "soon deleted", own, "--json")
	agent.ok(nil, "", "mem", "rm", "gone", own, "--json")
	for _, args := range [][]string{{"mem", "ls", "--json", own}, {"mem", "ls", "--json", "--agent", agent.pk}} {
		u := agent
		if args[3] == "--agent" {
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
	agent.ok(nil, "", "mem", "set", "notes", "one\ntwo\nthree\n", own, "--json")
	var h struct{ Hash string }
	agent.ok(&h, "", "mem", "hash", "notes", own, "--json")
	if h.Hash != engram.Hash("one\ntwo\nthree\n") {
		t.Fatalf("hash = %q", h.Hash)
	}
	diff := "--- a\n+++ b\n@@ -2,1 +2,1 @@\n-two\n+TWO\n"

	var dry memWrite
	agent.ok(&dry, diff, "mem", "patch", "notes", "--base-hash", h.Hash, "--dry-run", own, "--json")
	if !dry.DryRun || dry.Value == nil || *dry.Value != "one\nTWO\nthree\n" || dry.EventID != "" {
		t.Fatalf("dry run = %+v", dry)
	}
	var got memValue
	agent.ok(&got, "", "mem", "get", "notes", own, "--json")
	if got.Value != "one\ntwo\nthree\n" {
		t.Fatalf("a dry run changed the value to %q", got.Value)
	}

	var w memWrite
	agent.ok(&w, diff, "mem", "patch", "notes", "--base-hash", h.Hash, own, "--json")
	agent.ok(&got, "", "mem", "get", "notes", own, "--json")
	if got.Value != "one\nTWO\nthree\n" || w.Hash != engram.Hash(got.Value) || got.EventID != w.EventID {
		t.Fatalf("after patch: write %+v, get %+v", w, got)
	}
	// The same patch against the old hash is now stale.
	if e := agent.failsIn(5, diff, "mem", "patch", "notes", "--base-hash", h.Hash, own); e.Error != "conflict" {
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
	agent.ok(nil, "", "mem", "set", "core", "-", "--allow-empty", own, "--json")
	agent.ok(nil, "", "mem", "set", "notes", "", own, "--json")
}

// text runs the binary, requires exit 0 and returns stdout and stderr as they are.
func (u *user) text(stdin string, args ...string) (stdout, stderr string) {
	u.t.Helper()
	r := u.buzz(stdin, args...)
	if r.code != 0 {
		u.t.Fatalf("buzz %v: exit %d, stderr %s", args, r.code, r.stderr)
	}
	return r.stdout, r.stderr
}

func TestBinaryMemGetPrintsTheValueRawAndHashTheDigestAlone(t *testing.T) {
	t.Parallel()
	s := relaytest.Start(t)
	agent, owner := newUser(t, s.URL), newUser(t, s.URL)
	own := "--owner=" + owner.pk
	for _, value := range []string{"no newline", "two\nlines\n\n", `{"looks":"like json"}`} {
		agent.ok(nil, "", "mem", "set", "notes", value, own, "--json")
		if out, errOut := agent.text("", "mem", "get", "notes", own); out != value || errOut != "" {
			t.Fatalf("mem get of %q: stdout %q stderr %q", value, out, errOut)
		}
		if out, errOut := agent.text("", "mem", "hash", "notes", own); out != engram.Hash(value)+"\n" || errOut != "" {
			t.Fatalf("mem hash of %q: stdout %q stderr %q", value, out, errOut)
		}
	}
	// The owner's read prints the same bytes.
	if out, _ := owner.text("", "mem", "get", "notes", "--agent", agent.pk); out != `{"looks":"like json"}` {
		t.Fatalf("owner's mem get: %q", out)
	}
}

func TestBinaryMemLsPrintsSlugCreatedAtEventIDLines(t *testing.T) {
	t.Parallel()
	s := relaytest.Start(t)
	agent, owner := newUser(t, s.URL), newUser(t, s.URL)
	own := "--owner=" + owner.pk
	if out, errOut := agent.text("", "mem", "ls", own); out != "" || errOut != "(no memories besides core)\n" {
		t.Fatalf("empty mem ls: stdout %q stderr %q", out, errOut)
	}
	agent.ok(nil, "", "mem", "set", "core", "me", own, "--json")
	var b, a memWrite
	agent.ok(&b, "", "mem", "set", "b", "2", own, "--json")
	agent.ok(&a, "", "mem", "set", "a", "1", own, "--json")
	want := fmt.Sprintf("mem/a\t%d\t%s\nmem/b\t%d\t%s\n", a.CreatedAt, a.EventID, b.CreatedAt, b.EventID)
	if out, errOut := agent.text("", "mem", "ls", own); out != want || errOut != "" {
		t.Fatalf("mem ls:\n got %q (stderr %q)\nwant %q", out, errOut, want)
	}
}

func TestBinaryMemWritesReportOnStderr(t *testing.T) {
	t.Parallel()
	s := relaytest.Start(t)
	agent, owner := newUser(t, s.URL), newUser(t, s.URL)
	own := "--owner=" + owner.pk
	var got memValue
	report := func(verb string) string {
		agent.ok(&got, "", "mem", "get", "notes", own, "--json")
		return fmt.Sprintf("%s mem/notes (event %s, created_at %d)\n", verb, got.EventID, got.CreatedAt)
	}

	out, errOut := agent.text("", "mem", "set", "notes", "one\ntwo\n", own)
	if want := report("wrote"); out != "" || errOut != want {
		t.Fatalf("mem set: stdout %q stderr %q, want stderr %q", out, errOut, want)
	}
	diff := "--- a\n+++ b\n@@ -2,1 +2,1 @@\n-two\n+TWO\n"
	out, errOut = agent.text(diff, "mem", "patch", "notes", "--base-hash", engram.Hash("one\ntwo\n"), "--dry-run", own)
	if want := "dry run: mem/notes would have sha256 " + engram.Hash("one\nTWO\n") + "; nothing published\n"; out != "one\nTWO\n" || errOut != want {
		t.Fatalf("mem patch --dry-run: stdout %q stderr %q", out, errOut)
	}
	out, errOut = agent.text(diff, "mem", "patch", "notes", "--base-hash", engram.Hash("one\ntwo\n"), own)
	if want := report("wrote"); out != engram.Hash("one\nTWO\n")+"\n" || errOut != want {
		t.Fatalf("mem patch: stdout %q stderr %q, want the new hash and %q", out, errOut, want)
	}
	before := got
	out, errOut = agent.text("", "mem", "rm", "notes", own)
	if !strings.HasPrefix(errOut, "removed mem/notes (event ") || out != "" || strings.Contains(errOut, before.EventID) {
		t.Fatalf("mem rm: stdout %q stderr %q", out, errOut)
	}
}

// sh runs a shell command line with this user's environment and the binary first on PATH, as an
// agent's shell tool would.
func (u *user) sh(stdin, line string) result {
	u.t.Helper()
	cmd := exec.Command("sh", "-c", line)
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(buzzBin(u.t))+string(os.PathListSeparator)+os.Getenv("PATH"),
		"BUZZ_RELAY_URL="+u.relay, "BUZZ_PRIVATE_KEY="+protocol.Nsec(u.sk), "BUZZ_TIMEOUT_SECS=10")
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		u.t.Fatalf("sh -c %q: %v", line, err)
	}
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

func TestBinaryMemGetToAFileAndSetFromItRoundTrips(t *testing.T) {
	t.Parallel()
	s := relaytest.Start(t)
	agent, owner := newUser(t, s.URL), newUser(t, s.URL)
	profile := "I am Hexa.\n\nRules:\n- keep the build green\n" // ends in a newline that must survive
	agent.ok(nil, profile, "mem", "set", "core", "-", "--owner", owner.pk, "--json")
	f := filepath.Join(t.TempDir(), "core.md")
	line := "export BUZZ_AGENT_OWNER=" + owner.pk + "\n" +
		"buzz mem get core > " + f + " && buzz mem set core - < " + f + " && buzz mem get core"
	r := agent.sh("", line)
	if r.code != 0 || r.stdout != profile {
		t.Fatalf("round trip: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
}

func TestBinaryMemPatchWithBaseHashFromMemHashWorksInAShell(t *testing.T) {
	t.Parallel()
	s := relaytest.Start(t)
	agent, owner := newUser(t, s.URL), newUser(t, s.URL)
	agent.ok(nil, "", "mem", "set", "core", "one\ntwo\n", "--owner", owner.pk, "--json")
	// The README's line, verbatim after the owner.
	r := agent.sh("--- a\n+++ b\n@@ -1,1 +1,1 @@\n-one\n+ONE\n",
		"export BUZZ_AGENT_OWNER="+owner.pk+"\nbuzz mem patch core --base-hash $(buzz mem hash core)")
	if r.code != 0 || r.stdout != engram.Hash("ONE\ntwo\n")+"\n" {
		t.Fatalf("patch with $(buzz mem hash core): exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	// A second run of the same diff is against a stale value now: exit 5, as upstream.
	agent.ok(nil, "", "mem", "set", "core", "one\ntwo\n", "--owner", owner.pk, "--json")
	stale := engram.Hash("ONE\ntwo\n")
	if e := agent.failsIn(5, "--- a\n+++ b\n@@ -1,1 +1,1 @@\n-one\n+ONE\n", "mem", "patch", "core", "--base-hash", stale, "--owner", owner.pk); e.Error != "conflict" {
		t.Fatalf("stale base hash: %+v", e)
	}
}
