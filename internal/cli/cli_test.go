package cli

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/nbd-wtf/go-nostr"
)

const testChannel = "6f1c1d3e-8c55-4a53-9a9b-1a2b3c4d5e6f"

// world is a fake relay with one channel whose members have profiles.
type world struct {
	fb      *fakeBridge
	relaySK string
	me      string // secret key
	env     map[string]string
}

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{fb: newFakeBridge(t), relaySK: nostr.GeneratePrivateKey(), me: nostr.GeneratePrivateKey()}
	w.env = map[string]string{"BUZZ_RELAY_URL": w.fb.URL, "BUZZ_PRIVATE_KEY": w.me}
	// The channel exists: reads scoped to it find its metadata.
	// Dated long ago, so a test's own 39000 for the channel is the newest.
	w.fb.seed(t, w.relaySK, nostr.Event{Kind: protocol.KindGroupMetadata, CreatedAt: 1000, Tags: nostr.Tags{{"d", testChannel}, {"name", "general"}, {"public"}, {"t", "stream"}}})
	return w
}

// members publishes the channel's 39002 with these pubkeys (plus me) and kind 0 profiles.
func (w *world) members(t *testing.T, profiles map[string]string) map[string]string {
	t.Helper()
	mePK, _ := nostr.GetPublicKey(w.me)
	tags := nostr.Tags{{"d", testChannel}, {"p", mePK, "", "owner"}}
	pks := map[string]string{}
	for name, content := range profiles {
		sk := nostr.GeneratePrivateKey()
		pk, _ := nostr.GetPublicKey(sk)
		pks[name] = pk
		tags = append(tags, nostr.Tag{"p", pk, "", "member"})
		w.fb.seed(t, sk, nostr.Event{Kind: 0, Content: content})
	}
	w.fb.seed(t, w.relaySK, nostr.Event{Kind: protocol.KindGroupMembers, Tags: tags})
	return pks
}

func (w *world) run(stdin string, args ...string) runResult { return runCLI(w.env, stdin, args...) }

func TestKeysGeneratePrintsMatchingKeypair(t *testing.T) {
	var k map[string]string
	runCLI(nil, "", "keys", "generate").decode(t, &k)
	pk, err := protocol.PublicKey(k["seckey"])
	if err != nil || pk != k["pubkey"] || protocol.Npub(pk) != k["npub"] || protocol.Nsec(k["seckey"]) != k["nsec"] {
		t.Fatalf("inconsistent keypair %v", k)
	}
}

func TestMissingPrivateKeyExitsWithAuthCode(t *testing.T) {
	r := runCLI(map[string]string{"BUZZ_RELAY_URL": "http://127.0.0.1:1"}, "", "channels", "list")
	if r.code != ExitAuth || r.errJSON(t).Category != "key_error" {
		t.Fatalf("exit %d stderr %s", r.code, r.stderr)
	}
}

func TestInvalidPrivateKeyExitsWithAuthCode(t *testing.T) {
	r := runCLI(map[string]string{"BUZZ_PRIVATE_KEY": "nsec1garbage"}, "", "channels", "list")
	if r.code != ExitAuth || r.errJSON(t).Category != "key_error" {
		t.Fatalf("exit %d stderr %s", r.code, r.stderr)
	}
}

func TestNonUUIDChannelIsUsageError(t *testing.T) {
	w := newWorld(t)
	r := w.run("", "messages", "get", "--channel", "general")
	if r.code != ExitUsage || r.errJSON(t).Category != "user_error" || r.stdout != "" {
		t.Fatalf("exit %d stdout %q stderr %s", r.code, r.stdout, r.stderr)
	}
}

func TestUnknownFlagIsUsageErrorJSON(t *testing.T) {
	r := runCLI(nil, "", "messages", "get", "--bogus")
	if e := r.errJSON(t); r.code != ExitUsage || e.Category != "user_error" || !strings.Contains(e.Message, "bogus") {
		t.Fatalf("exit %d stderr %s", r.code, r.stderr)
	}
}

func TestHelpExitsZero(t *testing.T) {
	if r := runCLI(nil, "", "messages", "send", "--help"); r.code != 0 || !strings.Contains(r.stdout, "--reply-to") {
		t.Fatalf("exit %d stdout %q", r.code, r.stdout)
	}
}

func TestUnreachableRelayExitsNetworkRetryable(t *testing.T) {
	srv := httptest.NewServer(nil)
	url := srv.URL
	srv.Close()
	r := runCLI(map[string]string{"BUZZ_RELAY_URL": url, "BUZZ_PRIVATE_KEY": nostr.GeneratePrivateKey()}, "", "channels", "list")
	if e := r.errJSON(t); r.code != ExitNetwork || e.Category != "network_error" || !e.Retryable {
		t.Fatalf("exit %d stderr %s", r.code, r.stderr)
	}
}

func TestRelayAuthRefusalExitsAuth(t *testing.T) {
	w := newWorld(t)
	w.fb.setStatus(403)
	r := w.run("", "channels", "list")
	if e := r.errJSON(t); r.code != ExitAuth || e.Category != "auth_error" || e.Retryable {
		t.Fatalf("exit %d stderr %s", r.code, r.stderr)
	}
}

func TestRelayServerErrorExitsNetworkNotRetryable(t *testing.T) {
	w := newWorld(t)
	w.fb.setStatus(500)
	r := w.run("", "channels", "list")
	if e := r.errJSON(t); r.code != ExitNetwork || e.Category != "relay_error" || e.Retryable {
		t.Fatalf("exit %d stderr %s", r.code, r.stderr)
	}
}

func TestFlagsOverrideEnvironment(t *testing.T) {
	w := newWorld(t)
	w.env["BUZZ_RELAY_URL"] = "http://127.0.0.1:1" // would fail if used
	flagSK := nostr.GeneratePrivateKey()
	r := w.run("", "--relay", "ws"+strings.TrimPrefix(w.fb.URL, "http"), "--private-key", protocol.Nsec(flagSK),
		"canvas", "set", "--channel", testChannel, "--content", "plan")
	if r.code != 0 {
		t.Fatalf("exit %d stderr %s", r.code, r.stderr)
	}
	flagPK, _ := nostr.GetPublicKey(flagSK)
	if ev := w.fb.lastPublished(t); ev.PubKey != flagPK {
		t.Fatalf("signed by %s, want the --private-key identity", ev.PubKey)
	}
}

func TestChannelsCreateSendsKind9007AndPrintsChannelID(t *testing.T) {
	w := newWorld(t)
	var out struct {
		EventID   string `json:"event_id"`
		Accepted  bool   `json:"accepted"`
		ChannelID string `json:"channel_id"`
	}
	w.run("", "channels", "create", "--name", "eng", "--visibility", "private", "--description", "the team").decode(t, &out)
	ev := w.fb.lastPublished(t)
	if !out.Accepted || out.EventID != ev.ID || !protocol.IsUUID(out.ChannelID) || ev.Kind != 9007 {
		t.Fatalf("out %+v ev %+v", out, ev)
	}
	want := nostr.Tags{{"h", out.ChannelID}, {"name", "eng"}, {"visibility", "private"}, {"channel_type", "stream"}, {"about", "the team"}}
	if !tagsEqual(ev.Tags, want) {
		t.Fatalf("tags %v, want %v", ev.Tags, want)
	}
}

func TestChannelsAddMemberSendsRoleTag(t *testing.T) {
	w := newWorld(t)
	pk, _ := nostr.GetPublicKey(nostr.GeneratePrivateKey())
	r := w.run("", "channels", "add-member", "--channel", testChannel, "--pubkey", protocol.Npub(pk), "--role", "bot")
	if r.code != 0 {
		t.Fatalf("exit %d %s", r.code, r.stderr)
	}
	ev := w.fb.lastPublished(t)
	if want := (nostr.Tags{{"h", testChannel}, {"p", pk}, {"role", "bot"}}); ev.Kind != 9000 || !tagsEqual(ev.Tags, want) {
		t.Fatalf("event %d %v", ev.Kind, ev.Tags)
	}
	if r := w.run("", "channels", "add-member", "--channel", testChannel, "--pubkey", pk, "--role", "king"); r.code != ExitUsage {
		t.Fatalf("bad role: exit %d", r.code)
	}
}

func TestChannelsListMemberShowsOnlyMyChannels(t *testing.T) {
	w := newWorld(t)
	w.members(t, nil)
	other := "11111111-2222-4333-8444-555555555555"
	w.fb.seed(t, w.relaySK, nostr.Event{Kind: 39000, Tags: nostr.Tags{{"d", testChannel}, {"name", "mine"}, {"private"}, {"t", "stream"}}})
	w.fb.seed(t, w.relaySK, nostr.Event{Kind: 39000, Tags: nostr.Tags{{"d", other}, {"name", "theirs"}, {"public"}}})
	var got []map[string]any
	w.run("", "channels", "list", "--member").decode(t, &got)
	if len(got) != 1 || got[0]["channel_id"] != testChannel || got[0]["name"] != "mine" || got[0]["visibility"] != "private" {
		t.Fatalf("got %v", got)
	}
	w.run("", "channels", "list").decode(t, &got)
	if len(got) != 2 {
		t.Fatalf("all channels = %v", got)
	}
}

func TestChannelsGetOfUnknownChannelIsNotFound(t *testing.T) {
	w := newWorld(t)
	r := w.run("", "channels", "get", "--channel", "11111111-2222-4333-8444-555555555555")
	if r.code != ExitUsage || r.errJSON(t).Category != "not_found" || r.stdout != "" {
		t.Fatalf("exit %d stdout %q stderr %s", r.code, r.stdout, r.stderr)
	}
}

func TestChannelsMembersListsRoles(t *testing.T) {
	w := newWorld(t)
	pks := w.members(t, map[string]string{"a": `{"name":"a"}`})
	var got []map[string]string
	w.run("", "channels", "members", "--channel", testChannel).decode(t, &got)
	if len(got) != 2 || got[1]["pubkey"] != pks["a"] || got[1]["role"] != "member" || got[0]["role"] != "owner" {
		t.Fatalf("got %v", got)
	}
}

func TestSendDirectReplyCarriesOnlyReplyMarker(t *testing.T) {
	w := newWorld(t)
	top := w.fb.seed(t, nostr.GeneratePrivateKey(), nostr.Event{Kind: 9, Content: "top", Tags: nostr.Tags{{"h", testChannel}}})
	r := w.run("", "messages", "send", "--channel", testChannel, "--content", "re", "--reply-to", top.ID)
	if r.code != 0 {
		t.Fatalf("exit %d %s", r.code, r.stderr)
	}
	want := nostr.Tags{{"h", testChannel}, {"e", top.ID, "", "reply"}}
	if ev := w.fb.lastPublished(t); !tagsEqual(ev.Tags, want) {
		t.Fatalf("tags %v, want %v", ev.Tags, want)
	}
}

func TestSendNestedReplyCarriesRootAndReply(t *testing.T) {
	w := newWorld(t)
	sk := nostr.GeneratePrivateKey()
	top := w.fb.seed(t, sk, nostr.Event{Kind: 9, Content: "top", Tags: nostr.Tags{{"h", testChannel}}})
	mid := w.fb.seed(t, sk, nostr.Event{Kind: 9, Content: "mid", Tags: nostr.Tags{{"h", testChannel}, {"e", top.ID, "", "reply"}}})
	var out sendResult
	w.run("", "messages", "send", "--channel", testChannel, "--content", "deep", "--reply-to", mid.ID).decode(t, &out)
	want := nostr.Tags{{"h", testChannel}, {"e", top.ID, "", "root"}, {"e", mid.ID, "", "reply"}}
	ev := w.fb.lastPublished(t)
	if !tagsEqual(ev.Tags, want) || out.EventID != ev.ID || !out.Accepted || out.MentionPubkeys == nil {
		t.Fatalf("tags %v out %+v", ev.Tags, out)
	}
}

// Upstream's rule: a parent with only a root marker (or unmarked e tags) counts as top-level.
func TestSendReplyToRootOnlyParentIsADirectReply(t *testing.T) {
	w := newWorld(t)
	sk := nostr.GeneratePrivateKey()
	top := w.fb.seed(t, sk, nostr.Event{Kind: 9, Content: "top", Tags: nostr.Tags{{"h", testChannel}}})
	rootOnly := w.fb.seed(t, sk, nostr.Event{Kind: 9, Content: "legacy", Tags: nostr.Tags{{"h", testChannel}, {"e", top.ID, "", "root"}}})
	w.run("", "messages", "send", "--channel", testChannel, "--content", "re", "--reply-to", rootOnly.ID)
	want := nostr.Tags{{"h", testChannel}, {"e", rootOnly.ID, "", "reply"}}
	if ev := w.fb.lastPublished(t); !tagsEqual(ev.Tags, want) {
		t.Fatalf("tags %v, want %v", ev.Tags, want)
	}
}

func TestSendReplyToUnknownEventIsNotFound(t *testing.T) {
	w := newWorld(t)
	r := w.run("", "messages", "send", "--channel", testChannel, "--content", "re", "--reply-to", strings.Repeat("ab", 32))
	if r.code != ExitUsage || r.errJSON(t).Category != "not_found" || w.fb.publishedCount() != 0 {
		t.Fatalf("exit %d %s", r.code, r.stderr)
	}
}

func TestSendResolvesMultiWordAtNameCaseInsensitively(t *testing.T) {
	w := newWorld(t)
	pks := w.members(t, map[string]string{
		"ada": `{"display_name":"Ada Lovelace","name":"ada"}`,
		"bob": `{"name":"bob"}`,
	})
	var out sendResult
	w.run("", "messages", "send", "--channel", testChannel, "--content", "hey @ada lovelace and @BOB, look").decode(t, &out)
	if len(out.MentionPubkeys) != 2 || out.MentionPubkeys[0] != pks["ada"] || out.MentionPubkeys[1] != pks["bob"] {
		t.Fatalf("mentions %v, want ada then bob", out.MentionPubkeys)
	}
	if ev := w.fb.lastPublished(t); !protocol.Mentioned(ev.Tags, pks["ada"]) || ev.Content != "hey @ada lovelace and @BOB, look" {
		t.Fatalf("event %+v", ev)
	}
}

func TestSendIgnoresAtNamesInCode(t *testing.T) {
	w := newWorld(t)
	w.members(t, map[string]string{"ada": `{"name":"ada"}`})
	var out sendResult
	w.run("", "messages", "send", "--channel", testChannel, "--content", "run `@ada` or\n```\n@ghost\n```\n").decode(t, &out)
	if len(out.MentionPubkeys) != 0 {
		t.Fatalf("mentions %v, want none", out.MentionPubkeys)
	}
}

func TestSendRefusesUnresolvedAtName(t *testing.T) {
	w := newWorld(t)
	w.members(t, map[string]string{"ada": `{"name":"ada"}`})
	r := w.run("", "messages", "send", "--channel", testChannel, "--content", "hi @nobody")
	if e := r.errJSON(t); r.code != ExitUsage || !strings.Contains(e.Message, "@nobody") || w.fb.publishedCount() != 0 {
		t.Fatalf("exit %d %s", r.code, r.stderr)
	}
}

func TestSendRefusesMentionOfNonMember(t *testing.T) {
	w := newWorld(t)
	w.members(t, map[string]string{"ada": `{"name":"ada"}`})
	outsider, _ := nostr.GetPublicKey(nostr.GeneratePrivateKey())
	r := w.run("", "messages", "send", "--channel", testChannel, "--content", "hi", "--mention", protocol.Npub(outsider))
	e := r.errJSON(t)
	var detail struct {
		Missing []string `json:"missing_member_pubkeys"`
		Hint    string   `json:"add_member_command"`
	}
	if err := json.Unmarshal([]byte(e.Message), &detail); err != nil {
		t.Fatalf("message is not JSON: %q", e.Message)
	}
	if r.code != ExitUsage || len(detail.Missing) != 1 || detail.Missing[0] != outsider || !strings.Contains(detail.Hint, outsider) || w.fb.publishedCount() != 0 {
		t.Fatalf("exit %d detail %+v", r.code, detail)
	}
}

func TestSendExplicitMentionMakesUnknownAtNamePresentational(t *testing.T) {
	w := newWorld(t)
	pks := w.members(t, map[string]string{"ada": `{"name":"ada"}`})
	var out sendResult
	w.run("", "messages", "send", "--channel", testChannel, "--content", "thanks @Countess", "--mention", pks["ada"]).decode(t, &out)
	if len(out.MentionPubkeys) != 1 || out.MentionPubkeys[0] != pks["ada"] {
		t.Fatalf("mentions %v", out.MentionPubkeys)
	}
}

func TestSendRefusesBlankAndOversizedContent(t *testing.T) {
	w := newWorld(t)
	for _, content := range []string{"  \n\t ", strings.Repeat("x", 64<<10+1)} {
		r := w.run(content, "messages", "send", "--channel", testChannel, "--content", "-")
		if r.code != ExitUsage || r.errJSON(t).Category != "user_error" {
			t.Fatalf("len %d: exit %d %s", len(content), r.code, r.stderr)
		}
	}
	if w.fb.publishedCount() != 0 {
		t.Fatal("refused content was published")
	}
}

func TestSendReadsContentVerbatimFromStdin(t *testing.T) {
	w := newWorld(t)
	body := "line one\n\n  line three\n"
	if r := w.run(body, "messages", "send", "--channel", testChannel, "--content", "-"); r.code != 0 {
		t.Fatalf("exit %d %s", r.code, r.stderr)
	}
	if ev := w.fb.lastPublished(t); ev.Content != body || ev.Kind != 9 {
		t.Fatalf("content %q", ev.Content)
	}
}

func TestMessagesGetReturnsOldestFirstWithFilter(t *testing.T) {
	w := newWorld(t)
	sk := nostr.GeneratePrivateKey()
	for i, c := range []string{"one", "two", "three"} {
		w.fb.seed(t, sk, nostr.Event{Kind: 9, Content: c, CreatedAt: nostr.Timestamp(1000 + i), Tags: nostr.Tags{{"h", testChannel}}})
	}
	w.fb.seed(t, sk, nostr.Event{Kind: 9, Content: "elsewhere", CreatedAt: 1005, Tags: nostr.Tags{{"h", "11111111-2222-4333-8444-555555555555"}}})
	var got []message
	w.run("", "messages", "get", "--channel", testChannel, "--limit", "2").decode(t, &got)
	if len(got) != 2 || got[0].Content != "two" || got[1].Content != "three" || got[0].Tags == nil {
		t.Fatalf("got %+v", got)
	}
	w.run("", "messages", "get", "--channel", testChannel, "--before", "1001", "--since", "1001").decode(t, &got)
	if len(got) != 1 || got[0].Content != "two" {
		t.Fatalf("window got %+v", got)
	}
}

func TestMessagesThreadReturnsRootAndRepliesFromAnyMember(t *testing.T) {
	w := newWorld(t)
	sk := nostr.GeneratePrivateKey()
	root := w.fb.seed(t, sk, nostr.Event{Kind: 9, Content: "root", CreatedAt: 1000, Tags: nostr.Tags{{"h", testChannel}}})
	r1 := w.fb.seed(t, sk, nostr.Event{Kind: 9, Content: "r1", CreatedAt: 1001, Tags: nostr.Tags{{"h", testChannel}, {"e", root.ID, "", "reply"}}})
	w.fb.seed(t, sk, nostr.Event{Kind: 9, Content: "r2", CreatedAt: 1002, Tags: nostr.Tags{{"h", testChannel}, {"e", root.ID, "", "root"}, {"e", r1.ID, "", "reply"}}})
	w.fb.seed(t, sk, nostr.Event{Kind: 9, Content: "unrelated", CreatedAt: 1003, Tags: nostr.Tags{{"h", testChannel}}})
	var got []message
	w.run("", "messages", "thread", "--channel", testChannel, "--event", r1.ID).decode(t, &got)
	if len(got) != 3 || got[0].Content != "root" || got[1].Content != "r1" || got[2].Content != "r2" {
		t.Fatalf("got %+v", got)
	}
}

func TestUsersSetProfileKeepsOtherFieldsAndGetReadsIt(t *testing.T) {
	w := newWorld(t)
	if r := w.run("", "users", "set-profile", "--name", "Ada", "--about", "math"); r.code != 0 {
		t.Fatalf("exit %d %s", r.code, r.stderr)
	}
	if r := w.run("", "users", "set-profile", "--name", "Ada L"); r.code != 0 {
		t.Fatalf("exit %d %s", r.code, r.stderr)
	}
	var p profile
	w.run("", "users", "get").decode(t, &p)
	mePK, _ := nostr.GetPublicKey(w.me)
	if p.Pubkey != mePK || p.Name != "Ada L" || p.DisplayName != "Ada L" || p.About != "math" {
		t.Fatalf("profile %+v", p)
	}
}

func TestUsersGetPrintsNullWithoutProfile(t *testing.T) {
	w := newWorld(t)
	other, _ := nostr.GetPublicKey(nostr.GeneratePrivateKey())
	if r := w.run("", "users", "get", "--pubkey", other); r.code != 0 || strings.TrimSpace(r.stdout) != "null" {
		t.Fatalf("exit %d stdout %q", r.code, r.stdout)
	}
}

func TestReactionsAddTagsTargetAuthorAndChannel(t *testing.T) {
	w := newWorld(t)
	authorSK := nostr.GeneratePrivateKey()
	target := w.fb.seed(t, authorSK, nostr.Event{Kind: 9, Content: "nice", Tags: nostr.Tags{{"h", testChannel}}})
	if r := w.run("", "reactions", "add", "--event", target.ID, "--emoji", "🎉"); r.code != 0 {
		t.Fatalf("exit %d %s", r.code, r.stderr)
	}
	ev := w.fb.lastPublished(t)
	want := nostr.Tags{{"e", target.ID}, {"p", target.PubKey}, {"h", testChannel}, {"k", "9"}}
	if ev.Kind != 7 || ev.Content != "🎉" || !tagsEqual(ev.Tags, want) {
		t.Fatalf("reaction %d %q %v", ev.Kind, ev.Content, ev.Tags)
	}
}

func TestCanvasSetThenGet(t *testing.T) {
	w := newWorld(t)
	if r := w.run("", "canvas", "get", "--channel", testChannel); strings.TrimSpace(r.stdout) != "null" {
		t.Fatalf("empty canvas = %q", r.stdout)
	}
	if r := w.run("# Plan\n", "canvas", "set", "--channel", testChannel, "--content", "-"); r.code != 0 {
		t.Fatalf("exit %d %s", r.code, r.stderr)
	}
	var c canvasInfo
	w.run("", "canvas", "get", "--channel", testChannel).decode(t, &c)
	ev := w.fb.lastPublished(t)
	if c.Content != "# Plan\n" || c.EventID != ev.ID || ev.Kind != 40100 || !tagsEqual(ev.Tags, nostr.Tags{{"h", testChannel}}) {
		t.Fatalf("canvas %+v", c)
	}
}

func TestRejectedWriteMapsToExitCode(t *testing.T) {
	for msg, code := range map[string]int{
		"restricted: not a channel member":          ExitNetwork,
		"rate-limited: quota exceeded; retry in 3s": ExitNetwork,
		"invalid: bad tag":                          ExitNetwork,
		"invalid: unknown channel":                  ExitUsage, // not_found
		"invalid: edit target event not found":      ExitUsage,
	} {
		if e := rejected(msg); e.Code != code || e.Message != msg {
			t.Errorf("%q → %+v, want exit %d", msg, e, code)
		}
	}
	if rejected("invalid: unknown channel").Category != "not_found" {
		t.Error("an unknown channel is not not_found")
	}
	if !rejected("rate-limited: x").Retryable || rejected("invalid: x").Retryable {
		t.Error("retryable flag wrong")
	}
}

func tagsEqual(a, b nostr.Tags) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if len(a[i]) != len(b[i]) {
			return false
		}
		for j := range a[i] {
			if a[i][j] != b[i][j] {
				return false
			}
		}
	}
	return true
}
