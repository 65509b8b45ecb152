package engram

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
)

func TestSlugGrammar(t *testing.T) {
	good := []string{"core", "mem/a", "mem/0", "mem/a-b_c", "mem/notes/2026-05-12", "mem/" + strings.Repeat("a", 64),
		"mem/" + strings.Repeat("a/", 125) + "a"}
	bad := []string{"", "Core", "mem", "mem/", "mem//a", "mem/a/", "mem/-a", "mem/_a", "mem/A", "mem/a b", "mem/é",
		"memo/a", "/mem/a", "mem/" + strings.Repeat("a", 65), "mem/" + strings.Repeat("a/", 126) + "a", "core/x"}
	for _, s := range good {
		if err := ValidateSlug(s); err != nil {
			t.Errorf("ValidateSlug(%q) = %v, want ok", s, err)
		}
	}
	for _, s := range bad {
		if err := ValidateSlug(s); err == nil {
			t.Errorf("ValidateSlug(%q) accepted a slug outside the grammar", s)
		}
	}
}

func TestNormalizeSlugAddsMemPrefixExceptForCore(t *testing.T) {
	for in, want := range map[string]string{"core": "core", "notes/x": "mem/notes/x", "mem/notes": "mem/notes"} {
		if got, err := NormalizeSlug(in); err != nil || got != want {
			t.Errorf("NormalizeSlug(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := NormalizeSlug("Bad Slug"); err == nil {
		t.Error("NormalizeSlug accepted an invalid slug")
	}
}

func TestBodyEscapingIsMinimalAndRoundTrips(t *testing.T) {
	v := "q\" b\\ \b\f\n\r\t \x01\x1f <&> é \u2028 🐝"
	got, err := MemoryBody("mem/x", v).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"slug":"mem/x","value":"q\" b\\ \b\f\n\r\t \u0001\u001f <&> é ` + "\u2028" + ` 🐝"}`
	if string(got) != want {
		t.Fatalf("body\n got %s\nwant %s", got, want)
	}
	b, err := ParseBody(got)
	if err != nil || b.Text != v {
		t.Fatalf("round trip = %+v, %v", b, err)
	}
}

func TestMarshalRefusesCoreTombstoneOversizeAndBadUTF8(t *testing.T) {
	cases := map[string]Body{
		"core tombstone": {Slug: CoreSlug, Tombstone: true},
		"oversize":       MemoryBody("mem/x", strings.Repeat("a", MaxBody)),
		"bad utf-8":      MemoryBody("mem/x", "\xff"),
		"bad slug":       MemoryBody("notes", "v"),
	}
	for name, b := range cases {
		if _, err := b.Marshal(); err == nil {
			t.Errorf("%s: Marshal accepted it", name)
		}
	}
	// The largest value that fits: the body is exactly MaxBody bytes.
	overhead := len(`{"slug":"mem/x","value":""}`)
	if _, err := MemoryBody("mem/x", strings.Repeat("a", MaxBody-overhead)).Marshal(); err != nil {
		t.Errorf("a body of exactly %d bytes was refused: %v", MaxBody, err)
	}
}

func TestParseBodyRejects(t *testing.T) {
	cases := map[string]string{
		"duplicate top-level key":       `{"slug":"mem/x","value":"a","value":"b"}`,
		"duplicate key after unescape":  `{"slug":"mem/x","value":"a","valu\u0065":"b"}`,
		"duplicate nested key":          `{"slug":"mem/x","value":"a","extra":{"k":1,"k":2}}`,
		"duplicate key inside an array": `{"slug":"mem/x","value":"a","extra":[{"k":1,"k":2}]}`,
		"trailing data":                 `{"slug":"mem/x","value":"a"} x`,
		"second object":                 `{"slug":"mem/x","value":"a"}{}`,
		"not an object":                 `["mem/x"]`,
		"null":                          `null`,
		"missing value":                 `{"slug":"mem/x"}`,
		"numeric value":                 `{"slug":"mem/x","value":1}`,
		"core without profile":          `{"slug":"core","value":"a"}`,
		"core profile null":             `{"slug":"core","profile":null}`,
		"slug not a string":             `{"slug":1,"value":"a"}`,
		"slug outside grammar":          `{"slug":"notes","value":"a"}`,
		"invalid utf-8":                 "{\"slug\":\"mem/x\",\"value\":\"\xff\"}",
		"lone high surrogate":           `{"slug":"mem/x","value":"\ud800"}`,
		"lone low surrogate":            `{"slug":"mem/x","value":"\udc00x"}`,
		"high surrogate then non-low":   `{"slug":"mem/x","value":"\ud800\u0041"}`,
		"syntax error":                  `{"slug":"mem/x","value":"a",}`,
	}
	for name, in := range cases {
		if b, err := ParseBody([]byte(in)); err == nil {
			t.Errorf("%s: ParseBody accepted %s as %+v", name, in, b)
		}
	}
}

func TestParseBodyIgnoresUnknownMembersAndAcceptsSurrogatePairs(t *testing.T) {
	b, err := ParseBody([]byte(` {"extra":{"a":[1,{"b":null}]},"value":"\ud83d\udc1d \\ud800","slug":"mem/x"} `))
	if err != nil {
		t.Fatal(err)
	}
	if b != MemoryBody("mem/x", `🐝 \ud800`) {
		t.Fatalf("body = %+v", b)
	}
}

// signed builds an arbitrary kind-30174 event by the vector agent, for envelope tests.
func signed(t *testing.T, mutate func(*nostr.Event)) nostr.Event {
	t.Helper()
	p := mustAgent(t)
	ev, err := p.Build(MemoryBody("mem/example", "v"), 1700000000, nil)
	if err != nil {
		t.Fatal(err)
	}
	if mutate != nil {
		mutate(&ev)
		if err := protocol.SignEvent(&ev, agentSK, nil); err != nil {
			t.Fatal(err)
		}
	}
	return ev
}

func TestOpenRejectsBadEnvelopes(t *testing.T) {
	p := mustOwner(t)
	otherSK := "0000000000000000000000000000000000000000000000000000000000000003"
	k, _ := protocol.ConversationKey(agentSK, ownerPK)
	cases := map[string]nostr.Event{
		"wrong kind":        signed(t, func(e *nostr.Event) { e.Kind = 30078 }),
		"two d tags":        signed(t, func(e *nostr.Event) { e.Tags = append(e.Tags, nostr.Tag{"d", dOf("core")}) }),
		"no d tag":          signed(t, func(e *nostr.Event) { e.Tags = e.Tags[1:] }),
		"uppercase d":       signed(t, func(e *nostr.Event) { e.Tags[0][1] = strings.ToUpper(e.Tags[0][1]) }),
		"short d":           signed(t, func(e *nostr.Event) { e.Tags[0][1] = e.Tags[0][1][:63] }),
		"two p tags":        signed(t, func(e *nostr.Event) { e.Tags = append(e.Tags, nostr.Tag{"p", ownerPK}) }),
		"p not the owner":   signed(t, func(e *nostr.Event) { e.Tags[1][1] = agentPK }),
		"d of another slug": signed(t, func(e *nostr.Event) { e.Tags[0][1] = dOf("mem/notes/2026-05-12") }),
		"d tag without value": signed(t, func(e *nostr.Event) {
			e.Tags[0] = nostr.Tag{"d"}
		}),
		"content not NIP-44": signed(t, func(e *nostr.Event) { e.Content = "hello" }),
		"encrypted under another key": signed(t, func(e *nostr.Event) {
			k2, _ := protocol.ConversationKey(otherSK, ownerPK)
			e.Content, _ = protocol.Encrypt44(`{"slug":"mem/example","value":"v"}`, k2, nil)
		}),
		"duplicate key inside": signed(t, func(e *nostr.Event) {
			e.Content, _ = protocol.Encrypt44(`{"slug":"mem/example","value":"v","value":"w"}`, k, nil)
		}),
		"tampered content": signed(t, nil),
		"bad signature":    signed(t, nil),
	}
	tc := cases["tampered content"]
	tc.Content = vectors[0].content // id no longer matches
	cases["tampered content"] = tc
	bs := cases["bad signature"]
	bs.Sig = vectors[0].sig
	cases["bad signature"] = bs
	for name, ev := range cases {
		if b, err := p.Open(&ev); err == nil {
			t.Errorf("%s: Open accepted it as %+v", name, b)
		}
	}
	// Another author's event, validly signed by that author.
	q, _ := AgentSide(otherSK, ownerPK)
	ev, _ := q.Build(MemoryBody("mem/example", "v"), 1, nil)
	if _, err := p.Open(&ev); err == nil {
		t.Error("Open accepted a record by another agent")
	}
}

func TestOpenMatchesOwnerTagCaseInsensitively(t *testing.T) {
	ev := signed(t, func(e *nostr.Event) { e.Tags[1][1] = strings.ToUpper(ownerPK) })
	if _, err := mustOwner(t).Open(&ev); err != nil {
		t.Fatalf("uppercase owner p tag rejected: %v", err)
	}
}

// A signature must be checked before anything is decrypted: an event whose signature fails is
// refused with a signature error even though its content would decrypt fine.
func TestOpenChecksSignatureBeforeDecrypting(t *testing.T) {
	ev := vectorEvent(vectors[0])
	ev.Sig = vectors[1].sig
	_, err := mustOwner(t).Open(&ev)
	if err == nil || !strings.Contains(err.Error(), "signature") {
		t.Fatalf("err = %v, want a signature error", err)
	}
}

func TestOwnerSideCannotWrite(t *testing.T) {
	if _, err := mustOwner(t).Build(CoreBody("x"), 1, nil); err == nil {
		t.Fatal("owner side built a record")
	}
}

func TestPairRejectsSelfAndBadKeys(t *testing.T) {
	if _, err := AgentSide(agentSK, agentPK); err == nil {
		t.Error("agent == owner accepted")
	}
	if _, err := AgentSide(agentSK, "0000000000000000000000000000000000000000000000000000000000000005"); err == nil {
		t.Error("owner key off the curve accepted")
	}
	if _, err := OwnerSide("zz", agentPK); err == nil {
		t.Error("malformed secret accepted")
	}
}

func TestHeadPicksGreatestCreatedAtThenLowestID(t *testing.T) {
	p := mustAgent(t)
	mk := func(v string, at nostr.Timestamp) nostr.Event {
		ev, err := p.Build(MemoryBody("mem/a", v), at, nil)
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	a, b, c := mk("old", 10), mk("x", 20), mk("y", 20)
	lo, hi := b, c
	if hi.ID < lo.ID {
		lo, hi = hi, lo
	}
	garbage := a
	garbage.Sig = b.Sig
	head, ok, invalid := p.Head([]nostr.Event{a, hi, garbage, lo}, "mem/a")
	if !ok || head.Event.ID != lo.ID || invalid != 1 {
		t.Fatalf("head = %s ok=%v invalid=%d, want %s (tie at created_at 20 goes to the lower id)", head.Event.ID, ok, invalid, lo.ID)
	}
	if _, ok, _ := p.Head([]nostr.Event{a}, "mem/b"); ok {
		t.Fatal("a record of another slug became the head")
	}
}

func TestNextCreatedAtIsMonotonic(t *testing.T) {
	now := time.Unix(1000, 0)
	for _, c := range []struct{ prior, want nostr.Timestamp }{{0, 1000}, {500, 1000}, {999, 1000}, {1000, 1001}, {5000, 5001}} {
		if got := NextCreatedAt(now, c.prior); got != c.want {
			t.Errorf("NextCreatedAt(1000, %d) = %d, want %d", c.prior, got, c.want)
		}
	}
}

func TestCoreDecisionTable(t *testing.T) {
	p := mustAgent(t)
	core, _ := p.Build(CoreBody("I am a bee."), 100, nil)
	mem, _ := p.Build(MemoryBody("mem/x", "v"), 100, nil)
	broken := core
	broken.Content = "garbage"
	if _, found, err := p.Core(nil); found || err != nil {
		t.Errorf("empty answer: found=%v err=%v, want confirmed absence", found, err)
	}
	if prof, found, err := p.Core([]nostr.Event{broken, core}); !found || err != nil || prof != "I am a bee." {
		t.Errorf("valid head: %q found=%v err=%v", prof, found, err)
	}
	if _, found, err := p.Core([]nostr.Event{broken}); found || !errors.Is(err, ErrCoreUnreadable) {
		t.Errorf("nothing decryptable: found=%v err=%v, want ErrCoreUnreadable", found, err)
	}
	if _, found, err := p.Core([]nostr.Event{mem}); found || err != nil {
		t.Errorf("only another slug's record: found=%v err=%v, want absence", found, err)
	}
	newer, _ := p.Build(CoreBody(""), 101, nil)
	if prof, found, err := p.Core([]nostr.Event{core, newer}); !found || err != nil || prof != "" {
		t.Errorf("empty newer profile: %q found=%v err=%v, want the empty profile", prof, found, err)
	}
}

func TestListTakesHeadsDropsCoreAndTombstonesSortsBySlug(t *testing.T) {
	p := mustAgent(t)
	var evs []nostr.Event
	add := func(b Body, at nostr.Timestamp) nostr.Event {
		ev, err := p.Build(b, at, nil)
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
		return ev
	}
	add(CoreBody("c"), 1)
	add(MemoryBody("mem/z", "1"), 1)
	z2 := add(MemoryBody("mem/z", "2"), 2)
	add(MemoryBody("mem/gone", "1"), 1)
	add(TombstoneBody("mem/gone"), 2)
	add(TombstoneBody("mem/back"), 1)
	back := add(MemoryBody("mem/back", "again"), 2)
	bad := z2
	bad.Sig = back.Sig
	evs = append(evs, bad)
	got := p.List(evs)
	want := []Listing{{"mem/back", back.ID, 2}, {"mem/z", z2.ID, 2}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("List = %+v, want %+v", got, want)
	}
	if s := got[0].String(); s != "mem/back\t2\t"+back.ID {
		t.Errorf("text line = %q", s)
	}
}

func TestFiltersAddressOnlyThisPair(t *testing.T) {
	p := mustAgent(t)
	f := p.HeadFilter("core")
	if f.Kinds[0] != 30174 || f.Authors[0] != agentPK || f.Tags["d"][0] != dOf("core") || f.Tags["p"][0] != ownerPK || f.Limit != 16 {
		t.Fatalf("head filter = %+v", f)
	}
	l := p.ListFilter()
	if l.Tags["d"] != nil || l.Tags["p"][0] != ownerPK || l.Limit != 5000 {
		t.Fatalf("list filter = %+v", l)
	}
}
