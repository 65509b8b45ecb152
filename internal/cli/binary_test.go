package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/relay/relaytest"
	"github.com/buzz-harness/buzz/internal/testbin"
	"github.com/nbd-wtf/go-nostr"
)

// buzzBin is the real `buzz` binary, built once for the package's subprocess tests.
func buzzBin(t testing.TB) string { return testbin.Path(t, "cmd/buzz") }

// user is one identity running the binary against a relay.
type user struct {
	t     *testing.T
	relay string
	sk    string
	pk    string
}

func newUser(t *testing.T, relayURL string) *user {
	t.Helper()
	sk := nostr.GeneratePrivateKey()
	pk, _ := nostr.GetPublicKey(sk)
	return &user{t: t, relay: relayURL, sk: sk, pk: pk}
}

type result struct {
	code           int
	stdout, stderr string
}

// buzz runs the binary with this user's env; stdin is fed verbatim.
func (u *user) buzz(stdin string, args ...string) result {
	u.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, buzzBin(u.t), args...)
	cmd.Env = append(os.Environ(), "BUZZ_RELAY_URL="+u.relay, "BUZZ_PRIVATE_KEY="+protocol.Nsec(u.sk), "BUZZ_TIMEOUT_SECS=10")
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		u.t.Fatalf("run buzz %v: %v", args, err)
	}
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// ok runs the binary, requires exit 0 and decodes stdout into v (if non-nil).
func (u *user) ok(v any, stdin string, args ...string) {
	u.t.Helper()
	r := u.buzz(stdin, args...)
	if r.code != 0 {
		u.t.Fatalf("buzz %v: exit %d, stderr %s", args, r.code, r.stderr)
	}
	if strings.TrimSpace(r.stderr) != "" {
		u.t.Fatalf("buzz %v wrote to stderr on success: %s", args, r.stderr)
	}
	if v != nil {
		if err := json.Unmarshal([]byte(r.stdout), v); err != nil {
			u.t.Fatalf("buzz %v stdout is not JSON: %q", args, r.stdout)
		}
	}
}

type cliError struct {
	Error     string `json:"error"`
	Message   string `json:"message"`
	Retryable bool   `json:"retryable"`
}

// fails runs the binary, requires exit code want and returns the JSON error from stderr.
func (u *user) fails(want int, args ...string) cliError {
	u.t.Helper()
	return u.failsIn(want, "", args...)
}

// failsIn is fails with stdin fed to the binary.
func (u *user) failsIn(want int, stdin string, args ...string) cliError {
	u.t.Helper()
	r := u.buzz(stdin, args...)
	if r.code != want {
		u.t.Fatalf("buzz %v: exit %d, want %d (stdout %q stderr %q)", args, r.code, want, r.stdout, r.stderr)
	}
	var e cliError
	if err := json.Unmarshal([]byte(strings.TrimSpace(r.stderr)), &e); err != nil || e.Error == "" {
		u.t.Fatalf("buzz %v stderr is not one JSON error: %q", args, r.stderr)
	}
	if r.stdout != "" {
		u.t.Fatalf("buzz %v printed %q on stdout while failing", args, r.stdout)
	}
	return e
}

func (u *user) createChannel(name string, private bool) string {
	u.t.Helper()
	vis := "open"
	if private {
		vis = "private"
	}
	var out struct {
		ChannelID string `json:"channel_id"`
		Accepted  bool   `json:"accepted"`
	}
	u.ok(&out, "", "channels", "create", "--name", name, "--visibility", vis)
	if !out.Accepted || !protocol.IsUUID(out.ChannelID) {
		u.t.Fatalf("create channel: %+v", out)
	}
	return out.ChannelID
}

type sent struct {
	EventID        string   `json:"event_id"`
	Accepted       bool     `json:"accepted"`
	Message        string   `json:"message"`
	MentionPubkeys []string `json:"mention_pubkeys"`
}

type msg struct {
	ID        string     `json:"id"`
	Pubkey    string     `json:"pubkey"`
	Kind      int        `json:"kind"`
	Content   string     `json:"content"`
	CreatedAt int64      `json:"created_at"`
	Tags      nostr.Tags `json:"tags"`
}

func TestBinarySendsAndReadsBackMessagesOldestFirst(t *testing.T) {
	t.Parallel()
	s := relaytest.Start(t)
	alice := newUser(t, s.URL)
	ch := alice.createChannel("general", false)
	var first, second sent
	alice.ok(&first, "", "messages", "send", "--channel", ch, "--content", "first")
	alice.ok(&second, "line one\nline two\n", "messages", "send", "--channel", ch, "--content", "-")
	if !first.Accepted || first.MentionPubkeys == nil || len(first.MentionPubkeys) != 0 {
		t.Fatalf("send output %+v", first)
	}
	var got []msg
	alice.ok(&got, "", "messages", "get", "--channel", ch)
	if len(got) != 2 || got[0].CreatedAt > got[1].CreatedAt {
		t.Fatalf("messages get = %+v, want 2 oldest first", got)
	}
	byID := map[string]msg{got[0].ID: got[0], got[1].ID: got[1]}
	if byID[first.EventID].Content != "first" || byID[second.EventID].Content != "line one\nline two\n" || byID[second.EventID].Pubkey != alice.pk {
		t.Fatalf("messages get = %+v", got)
	}
}

func TestBinaryThreadsRepliesWithNIP10Markers(t *testing.T) {
	t.Parallel()
	s := relaytest.Start(t)
	alice := newUser(t, s.URL)
	ch := alice.createChannel("threads", false)
	var top, direct, nested sent
	alice.ok(&top, "", "messages", "send", "--channel", ch, "--content", "top")
	alice.ok(&direct, "", "messages", "send", "--channel", ch, "--content", "direct", "--reply-to", top.EventID)
	alice.ok(&nested, "", "messages", "send", "--channel", ch, "--content", "nested", "--reply-to", direct.EventID)

	var thread []msg
	alice.ok(&thread, "", "messages", "thread", "--channel", ch, "--event", nested.EventID)
	// All three may share a second, so only the root's place is fixed.
	byID := map[string]msg{}
	for _, m := range thread {
		byID[m.ID] = m
	}
	if len(thread) != 3 || thread[0].ID != top.EventID || len(byID) != 3 {
		t.Fatalf("thread = %+v", thread)
	}
	d := byID[direct.EventID]
	if ref := protocol.ParseThread(d.Tags); countTag(d.Tags, "e") != 1 || ref.Root != top.EventID || ref.Parent != top.EventID {
		t.Fatalf("direct reply tags %v", d.Tags)
	}
	n := byID[nested.EventID]
	if ref := protocol.ParseThread(n.Tags); countTag(n.Tags, "e") != 2 || ref.Root != top.EventID || ref.Parent != direct.EventID {
		t.Fatalf("nested reply tags %v", n.Tags)
	}
}

func countTag(tags nostr.Tags, name string) int {
	n := 0
	for _, t := range tags {
		if len(t) > 0 && t[0] == name {
			n++
		}
	}
	return n
}

func TestBinaryResolvesAtNameOfMemberAndRefusesNonMember(t *testing.T) {
	t.Parallel()
	s := relaytest.Start(t)
	alice, ada, outsider := newUser(t, s.URL), newUser(t, s.URL), newUser(t, s.URL)
	ada.ok(nil, "", "users", "set-profile", "--name", "Ada Lovelace")
	outsider.ok(nil, "", "users", "set-profile", "--name", "Eve")
	ch := alice.createChannel("eng", true)
	alice.ok(nil, "", "channels", "add-member", "--channel", ch, "--pubkey", ada.pk)

	var out sent
	alice.ok(&out, "", "messages", "send", "--channel", ch, "--content", "@ada lovelace please review `@eve`")
	if len(out.MentionPubkeys) != 1 || out.MentionPubkeys[0] != ada.pk {
		t.Fatalf("mentions %v, want [ada]", out.MentionPubkeys)
	}

	e := alice.fails(1, "messages", "send", "--channel", ch, "--content", "hi", "--mention", protocol.Npub(outsider.pk))
	var detail struct {
		Missing []string `json:"missing_member_pubkeys"`
	}
	if err := json.Unmarshal([]byte(e.Message), &detail); err != nil || len(detail.Missing) != 1 || detail.Missing[0] != outsider.pk {
		t.Fatalf("error %+v", e)
	}
	// @Eve is not a member, so the name does not resolve at all.
	alice.fails(1, "messages", "send", "--channel", ch, "--content", "hi @Eve")
}

func TestBinaryChannelMembershipCommands(t *testing.T) {
	t.Parallel()
	s := relaytest.Start(t)
	alice, bob := newUser(t, s.URL), newUser(t, s.URL)
	open := alice.createChannel("lobby", false)
	private := alice.createChannel("secret", true)

	var info map[string]any
	bob.ok(&info, "", "channels", "get", "--channel", open)
	if info["name"] != "lobby" || info["channel_id"] != open {
		t.Fatalf("channels get = %v", info)
	}
	bob.ok(nil, "", "channels", "join", "--channel", open)
	var mine []map[string]any
	bob.ok(&mine, "", "channels", "list", "--member")
	if len(mine) != 1 || mine[0]["channel_id"] != open {
		t.Fatalf("bob's channels = %v", mine)
	}
	var members []map[string]string
	alice.ok(&members, "", "channels", "members", "--channel", open)
	if !hasMember(members, bob.pk, "member") || !hasMember(members, alice.pk, "owner") {
		t.Fatalf("members = %v", members)
	}
	bob.ok(nil, "", "channels", "leave", "--channel", open)
	bob.ok(&mine, "", "channels", "list", "--member")
	if len(mine) != 0 {
		t.Fatalf("after leave = %v", mine)
	}

	alice.ok(nil, "", "channels", "add-member", "--channel", private, "--pubkey", bob.pk, "--role", "admin")
	alice.ok(&members, "", "channels", "members", "--channel", private)
	if !hasMember(members, bob.pk, "admin") {
		t.Fatalf("private members = %v", members)
	}
	alice.ok(nil, "", "channels", "remove-member", "--channel", private, "--pubkey", bob.pk)
	alice.ok(&members, "", "channels", "members", "--channel", private)
	if hasMember(members, bob.pk, "admin") {
		t.Fatalf("bob still a member: %v", members)
	}
}

func hasMember(ms []map[string]string, pk, role string) bool {
	for _, m := range ms {
		if m["pubkey"] == pk && m["role"] == role {
			return true
		}
	}
	return false
}

func TestBinaryNonMemberCannotWriteToPrivateChannel(t *testing.T) {
	t.Parallel()
	s := relaytest.Start(t)
	alice, mallory := newUser(t, s.URL), newUser(t, s.URL)
	ch := alice.createChannel("secret", true)
	// The bridge refuses the event with 400 + the relay reason: a relay error (exit 2), as upstream.
	e := mallory.fails(2, "messages", "send", "--channel", ch, "--content", "let me in")
	if e.Error != "relay_error" || e.Retryable || !strings.Contains(e.Message, "restricted: not a channel member") {
		t.Fatalf("error %+v", e)
	}
	var got []msg
	alice.ok(&got, "", "messages", "get", "--channel", ch)
	if len(got) != 0 {
		t.Fatalf("private channel got %v", got)
	}
}

func TestBinaryReactionsUsersAndCanvas(t *testing.T) {
	t.Parallel()
	s := relaytest.Start(t)
	alice, bob := newUser(t, s.URL), newUser(t, s.URL)
	ch := alice.createChannel("misc", false)
	var m sent
	alice.ok(&m, "", "messages", "send", "--channel", ch, "--content", "ship it")
	var r struct {
		EventID  string `json:"event_id"`
		Accepted bool   `json:"accepted"`
	}
	bob.ok(&r, "", "reactions", "add", "--event", m.EventID, "--emoji", "🚀")
	evs := s.Query(t, alice.sk, nostr.Filter{IDs: []string{r.EventID}})
	if len(evs) != 1 || evs[0].Kind != 7 || protocol.TagValue(evs[0].Tags, "p") != alice.pk || protocol.TagValue(evs[0].Tags, "h") != ch {
		t.Fatalf("reaction = %+v", evs)
	}

	bob.ok(nil, "", "users", "set-profile", "--name", "Bob", "--about", "builder")
	var p map[string]any
	alice.ok(&p, "", "users", "get", "--pubkey", protocol.Npub(bob.pk))
	if p["pubkey"] != bob.pk || p["display_name"] != "Bob" || p["about"] != "builder" {
		t.Fatalf("profile = %v", p)
	}

	if out := alice.buzz("", "canvas", "get", "--channel", ch); out.code != 0 || strings.TrimSpace(out.stdout) != "null" {
		t.Fatalf("empty canvas: %+v", out)
	}
	alice.ok(nil, "# Plan\n- ship\n", "canvas", "set", "--channel", ch, "--content", "-")
	var c map[string]any
	bob.ok(&c, "", "canvas", "get", "--channel", ch)
	if c["content"] != "# Plan\n- ship\n" || c["pubkey"] != alice.pk {
		t.Fatalf("canvas = %v", c)
	}
}

func TestBinaryExitCodesForUsageKeyAndNetworkFailures(t *testing.T) {
	t.Parallel()
	s := relaytest.Start(t)
	u := newUser(t, s.URL)
	if e := u.fails(1, "messages", "get", "--channel", "not-a-uuid"); e.Error != "user_error" {
		t.Fatalf("%+v", e)
	}
	if e := u.fails(1, "messages", "send", "--channel", "6f1c1d3e-8c55-4a53-9a9b-1a2b3c4d5e6f", "--content", "   "); e.Error != "user_error" {
		t.Fatalf("%+v", e)
	}
	bad := &user{t: t, relay: s.URL, sk: strings.Repeat("z", 64)}
	if e := bad.fails(3, "channels", "list"); e.Error != "key_error" {
		t.Fatalf("%+v", e)
	}
	s.Stop()
	if e := u.fails(2, "channels", "list"); e.Error != "network_error" || !e.Retryable {
		t.Fatalf("%+v", e)
	}
}
