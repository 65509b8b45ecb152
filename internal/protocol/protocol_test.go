package protocol

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
)

var (
	idA = strings.Repeat("a", 64)
	idB = strings.Repeat("b", 64)
	idC = strings.Repeat("c", 64)
)

func TestParseThreadFollowsNIP10Markers(t *testing.T) {
	cases := []struct {
		name string
		tags nostr.Tags
		want ThreadRef
	}{
		{"top level", nostr.Tags{{"h", "x"}}, ThreadRef{}},
		{"direct reply", nostr.Tags{{"e", idA, "", "reply"}}, ThreadRef{Root: idA, Parent: idA}},
		{"root only", nostr.Tags{{"e", idA, "", "root"}}, ThreadRef{Root: idA, Parent: idA}},
		{"nested", nostr.Tags{{"e", idA, "", "root"}, {"e", idB, "", "reply"}}, ThreadRef{Root: idA, Parent: idB}},
		{"nested reversed order", nostr.Tags{{"e", idB, "", "reply"}, {"e", idA, "", "root"}}, ThreadRef{Root: idA, Parent: idB}},
		{"unmarked ignored", nostr.Tags{{"e", idA}, {"e", idB, "wss://r"}}, ThreadRef{}},
		{"first marker wins", nostr.Tags{{"e", idA, "", "root"}, {"e", idC, "", "root"}}, ThreadRef{Root: idA, Parent: idA}},
		{"bad id ignored", nostr.Tags{{"e", "nothex", "", "reply"}}, ThreadRef{}},
		{"mention marker ignored", nostr.Tags{{"e", idA, "", "mention"}}, ThreadRef{}},
	}
	for _, c := range cases {
		if got := ParseThread(c.tags); got != c.want {
			t.Errorf("%s: got %+v, want %+v", c.name, got, c.want)
		}
	}
}

func TestReplyTagsRoundTripThroughParseThread(t *testing.T) {
	direct := ReplyTags(idA, idA)
	if len(direct) != 1 || direct[0][3] != "reply" {
		t.Fatalf("direct reply tags = %v", direct)
	}
	if got := ParseThread(ReplyTags(idA, idB)); got != (ThreadRef{Root: idA, Parent: idB}) {
		t.Fatalf("nested round trip = %+v", got)
	}
	if got := ParseThread(ReplyTags("", idB)); got != (ThreadRef{Root: idB, Parent: idB}) {
		t.Fatalf("unknown root round trip = %+v", got)
	}
}

func FuzzParseThread(f *testing.F) {
	f.Add(`[["e","` + idA + `","","root"],["e","` + idB + `","","reply"]]`)
	f.Add(`[["e","` + idA + `"]]`)
	f.Add(`[["e"],["e","x","y","reply"],[]]`)
	f.Fuzz(func(t *testing.T, raw string) {
		var tags nostr.Tags
		if json.Unmarshal([]byte(raw), &tags) != nil {
			return
		}
		ref := ParseThread(tags)
		if (ref.Root == "") != (ref.Parent == "") {
			t.Fatalf("root %q and parent %q must be set together", ref.Root, ref.Parent)
		}
		for _, id := range []string{ref.Root, ref.Parent} {
			if id != "" && !IsHex64(id) {
				t.Fatalf("non-hex id %q", id)
			}
		}
		if ref.IsReply() {
			// Re-deriving from the tags we would emit gives the same place in the thread.
			if again := ParseThread(ReplyTags(ref.Root, ref.Parent)); again != ref {
				t.Fatalf("ReplyTags round trip: %+v -> %+v", ref, again)
			}
		}
	})
}

func TestChannelIDTakesFirstUUIDHTag(t *testing.T) {
	const ch = "3f2504e0-4f89-11d3-9a0c-0305e82c3301"
	if id, ok := ChannelID(nostr.Tags{{"h", "nope"}, {"h", ch}}); !ok || id != ch {
		t.Fatalf("got %q %v", id, ok)
	}
	if _, ok := ChannelID(nostr.Tags{{"d", ch}}); ok {
		t.Fatal("d tag taken as channel")
	}
	if IsUUID("3f2504e04f8911d39a0c0305e82c3301") {
		t.Fatal("unhyphenated uuid accepted")
	}
}

func TestIsHex64RejectsUppercaseAndWrongLength(t *testing.T) {
	if !IsHex64(idA) || IsHex64(strings.ToUpper(idA)) || IsHex64(idA[:63]) || IsHex64(idA+"a") {
		t.Fatal("IsHex64 misclassified")
	}
}

func TestMentionsDedupesAndLowercases(t *testing.T) {
	up := strings.ToUpper(idA)
	got := Mentions(nostr.Tags{{"p", up}, {"p", idA}, {"mention", idB}, {"p", "short"}, {"e", idC}})
	if len(got) != 2 || got[0] != idA || got[1] != idB {
		t.Fatalf("got %v", got)
	}
	if !Mentioned(nostr.Tags{{"p", idA}}, idA) || Mentioned(nostr.Tags{{"p", idA}}, idB) {
		t.Fatal("Mentioned wrong")
	}
}

func TestParseChannelMetaReadsSingleElementTags(t *testing.T) {
	ev := &nostr.Event{Kind: KindGroupMetadata, Tags: nostr.Tags{
		{"d", "c1"}, {"name", "general"}, {"about", "talk"}, {"private"}, {"closed"}, {"t", "forum"},
		{"topic", "t"}, {"purpose", "p"}, {"archived", "true"},
	}}
	m := ParseChannelMeta(ev)
	want := ChannelMeta{ID: "c1", Name: "general", About: "talk", Private: true, Type: "forum", Topic: "t", Purpose: "p", Archived: true}
	if m != want {
		t.Fatalf("got %+v", m)
	}
	if m.Visibility() != VisibilityPrivate || m.ReportedType() != VisibilityPrivate {
		t.Fatalf("visibility %s reported type %s", m.Visibility(), m.ReportedType())
	}
	open := ParseChannelMeta(&nostr.Event{Tags: nostr.Tags{{"d", "c2"}, {"public"}}})
	if open.Private || open.Type != TypeStream || open.ReportedType() != TypeStream {
		t.Fatalf("open = %+v", open)
	}
}

func TestReportedTypeOfHiddenChannelsIsDM(t *testing.T) {
	if got := (ChannelMeta{ID: "c", Name: "alice-bot", Hidden: true}).ReportedType(); got != TypeDM {
		t.Fatalf("hidden channel: reported type %q, want %q", got, TypeDM)
	}
	if got := (ChannelMeta{ID: "c", Type: TypeDM}).ReportedType(); got != TypeDM {
		t.Fatalf("dm channel: reported type %q, want %q", got, TypeDM)
	}
}

func TestParseMembersReadsRoleAtIndexThree(t *testing.T) {
	ev := &nostr.Event{Tags: nostr.Tags{{"d", "c"}, {"p", idA, "", "owner"}, {"p", idB}, {"p", "bad", "", "admin"}}}
	got := ParseMembers(ev)
	if len(got) != 2 || got[0] != (Member{idA, "owner"}) || got[1] != (Member{idB, "member"}) {
		t.Fatalf("got %+v", got)
	}
}

func TestParseKeysAcceptHexAndBech32(t *testing.T) {
	sk := nostr.GeneratePrivateKey()
	pk, _ := PublicKey(sk)
	for _, in := range []string{sk, " " + strings.ToUpper(sk) + "\n", Nsec(sk)} {
		if got, err := ParseSecretKey(in); err != nil || got != sk {
			t.Errorf("ParseSecretKey(%q) = %q, %v", in, got, err)
		}
	}
	for _, in := range []string{pk, Npub(pk), "nostr:" + Npub(pk)} {
		if got, err := ParsePubkey(in); err != nil || got != pk {
			t.Errorf("ParsePubkey(%q) = %q, %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "abc", "nsec1xyz", Npub(pk)} {
		if _, err := ParseSecretKey(bad); err == nil {
			t.Errorf("ParseSecretKey(%q) accepted", bad)
		}
	}
	if _, err := ParsePubkey("npub1bad"); err == nil {
		t.Error("bad npub accepted")
	}
}

func TestNormalizeURLTreatsLoopbackSpellingsAsEqual(t *testing.T) {
	for _, pair := range [][2]string{
		{"ws://localhost:3000", "ws://127.0.0.1:3000/"},
		{"ws://[::1]:3000", "WS://127.0.0.1:3000"},
		{"http://LOCALHOST:3000/query?x=1", "http://127.0.0.1:3000/query"},
	} {
		if !SameURL(pair[0], pair[1]) {
			t.Errorf("%s and %s should be the same (%s vs %s)", pair[0], pair[1], NormalizeURL(pair[0]), NormalizeURL(pair[1]))
		}
	}
	for _, pair := range [][2]string{
		{"ws://127.0.0.1:3000", "wss://127.0.0.1:3000"},
		{"ws://127.0.0.1:3000", "ws://127.0.0.1:3001"},
		{"http://h/events", "http://h/query"},
	} {
		if SameURL(pair[0], pair[1]) {
			t.Errorf("%s and %s should differ", pair[0], pair[1])
		}
	}
}

func TestHTTPBaseAndWSURLConvertSchemes(t *testing.T) {
	cases := map[string][2]string{
		"ws://h:1/":  {"http://h:1", "ws://h:1"},
		"wss://h":    {"https://h", "wss://h"},
		"http://h:1": {"http://h:1", "ws://h:1"},
		"https://h/": {"https://h", "wss://h"},
		"h:3000":     {"http://h:3000", "ws://h:3000"},
	}
	for in, want := range cases {
		if got := HTTPBase(in); got != want[0] {
			t.Errorf("HTTPBase(%q) = %q, want %q", in, got, want[0])
		}
		if got := WSURL(in); got != want[1] {
			t.Errorf("WSURL(%q) = %q, want %q", in, got, want[1])
		}
	}
}

func TestVerifyAuthEventChecksChallengeRelayAndTime(t *testing.T) {
	sk := nostr.GeneratePrivateKey()
	now := time.Unix(1_700_000_000, 0)
	ev, err := NewAuthEvent(sk, "ws://localhost:3000", "chal", now)
	if err != nil {
		t.Fatal(err)
	}
	if err := VerifyAuthEvent(&ev, "chal", "ws://127.0.0.1:3000", now.Add(59*time.Second)); err != nil {
		t.Fatalf("valid auth refused: %v", err)
	}
	if VerifyAuthEvent(&ev, "other", "ws://127.0.0.1:3000", now) == nil {
		t.Error("wrong challenge accepted")
	}
	if VerifyAuthEvent(&ev, "chal", "ws://127.0.0.1:3001", now) == nil {
		t.Error("wrong relay accepted")
	}
	if VerifyAuthEvent(&ev, "chal", "ws://127.0.0.1:3000", now.Add(61*time.Second)) == nil {
		t.Error("stale auth accepted")
	}
	tampered := ev
	tampered.Tags = nostr.Tags{{"relay", "ws://localhost:3000"}, {"challenge", "chal"}, {"challenge", "x"}}
	if VerifyAuthEvent(&tampered, "chal", "ws://127.0.0.1:3000", now) == nil {
		t.Error("tampered auth accepted")
	}
}

func TestVerifyHTTPAuthChecksURLMethodPayloadAndTime(t *testing.T) {
	sk := nostr.GeneratePrivateKey()
	pk, _ := PublicKey(sk)
	now := time.Unix(1_700_000_000, 0)
	body := []byte(`[{"kinds":[1]}]`)
	h, err := SignHTTPAuth(sk, "http://localhost:3000/query", "post", body, now)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := VerifyHTTPAuth(h, "http://127.0.0.1:3000/query", "POST", body, now)
	if err != nil || ev.PubKey != pk {
		t.Fatalf("valid header refused: %v", err)
	}
	for name, check := range map[string]func() error{
		"url": func() error {
			_, err := VerifyHTTPAuth(h, "http://127.0.0.1:3000/events", "POST", body, now)
			return err
		},
		"method": func() error { _, err := VerifyHTTPAuth(h, "http://127.0.0.1:3000/query", "GET", body, now); return err },
		"payload": func() error {
			_, err := VerifyHTTPAuth(h, "http://127.0.0.1:3000/query", "POST", []byte("x"), now)
			return err
		},
		"time": func() error {
			_, err := VerifyHTTPAuth(h, "http://127.0.0.1:3000/query", "POST", body, now.Add(2*time.Minute))
			return err
		},
		"scheme": func() error {
			_, err := VerifyHTTPAuth("Bearer x", "http://127.0.0.1:3000/query", "POST", body, now)
			return err
		},
		"base64": func() error {
			_, err := VerifyHTTPAuth("Nostr !!!", "http://127.0.0.1:3000/query", "POST", body, now)
			return err
		},
	} {
		if err := check(); err == nil {
			t.Errorf("%s mismatch accepted", name)
		}
	}
	h2, _ := SignHTTPAuth(sk, "http://localhost:3000/query", "POST", body, now)
	if h2 == h {
		t.Error("two signatures of the same request share an auth event (no nonce)")
	}
}

func FuzzVerifyHTTPAuth(f *testing.F) {
	sk := nostr.GeneratePrivateKey()
	now := time.Unix(1_700_000_000, 0)
	good, _ := SignHTTPAuth(sk, "http://127.0.0.1:3000/events", "POST", []byte("{}"), now)
	f.Add(good, []byte("{}"))
	f.Add("Nostr "+base64.StdEncoding.EncodeToString([]byte(`{"kind":27235}`)), []byte(nil))
	f.Add("Nostr e30=", []byte("x"))
	f.Add("", []byte(""))
	f.Fuzz(func(t *testing.T, header string, body []byte) {
		ev, err := VerifyHTTPAuth(header, "http://127.0.0.1:3000/events", "POST", body, now)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		// Whatever verified must really be a signed, fresh NIP-98 event for this request.
		if ev.Kind != KindHTTPAuth || CheckEvent(ev) != nil {
			t.Fatalf("accepted an invalid event: %+v", ev)
		}
		if !SameURL(TagValue(ev.Tags, "u"), "http://127.0.0.1:3000/events") {
			t.Fatalf("accepted u=%q", TagValue(ev.Tags, "u"))
		}
	})
}

func TestKindClassification(t *testing.T) {
	if !IsEphemeral(20002) || IsEphemeral(30000) || !IsReplaceable(0) || !IsReplaceable(10100) || IsReplaceable(9) ||
		!IsAddressable(39000) || IsAddressable(40000) || !IsChannelAdmin(9007) || IsChannelAdmin(9) {
		t.Fatal("kind classification wrong")
	}
}
