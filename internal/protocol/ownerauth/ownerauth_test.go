package ownerauth

import (
	"encoding/hex"
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
)

// The NIP-OA test vector: owner secret …01, agent secret …02.
const (
	ownerSK    = "0000000000000000000000000000000000000000000000000000000000000001"
	ownerPK    = "79be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798"
	agentSK    = "0000000000000000000000000000000000000000000000000000000000000002"
	agentPK    = "c6047f9441ed7d6d3045406e95c07cd85c778e4b8cef3ca7abac09b95c709ee5"
	conditions = "kind=1&created_at<1713957000"
	vecSig     = "8b7df2575caf0a108374f8471722b233c53f9ff827a8b0f91861966c3b9dd5cb2e189eae9f49d72187674c2f5bd244145e10ff86c9f257ffe65a1ee5f108b369"
	tagHex     = "5b2261757468222c2237396265363637656639646362626163353561303632393563653837306230373032396266636462326463653238643935396632383135623136663831373938222c226b696e643d3126637265617465645f61743c31373133393537303030222c223862376466323537356361663061313038333734663834373137323262323333633533663966663832376138623066393138363139363663336239646435636232653138396561653966343964373231383736373463326635626432343431343565313066663836633966323537666665363561316565356631303862333639225d"
)

func vectorTagJSON(t *testing.T) string {
	b, err := hex.DecodeString(tagHex)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// vectorEvent is the spec's signed example event.
func vectorEvent() nostr.Event {
	return nostr.Event{
		ID: "d892a65e7677e0554ebb70ee16deeb6a0727dba46450fb4bc001291d7bff971b", PubKey: agentPK,
		CreatedAt: 1713956400, Kind: 1,
		Tags:    nostr.Tags{{"auth", ownerPK, conditions, vecSig}},
		Content: "owner-attested agent event",
		Sig:     "7fd38992b70b5e9e113644e51b4c8ee2227f3bdd402b1855f8786c0600394ab3ec2621742a7bad0b0000b93d4d1ae6e39525f286a3c1029f43f46c3359a6c76f",
	}
}

func TestSpecVectorParsesAndVerifies(t *testing.T) {
	tag, err := Parse(vectorTagJSON(t))
	if err != nil {
		t.Fatal(err)
	}
	if tag != (Tag{Owner: ownerPK, Conditions: conditions, Sig: vecSig}) {
		t.Fatalf("parsed %+v", tag)
	}
	if err := tag.Verify(agentPK); err != nil {
		t.Fatalf("spec vector does not verify: %v", err)
	}
	if got := tag.JSON(); got != vectorTagJSON(t) {
		t.Fatalf("JSON form\n got %s\nwant %s", got, vectorTagJSON(t))
	}
	if err := tag.Verify(ownerPK); err == nil {
		t.Fatal("verified for the wrong agent")
	}
}

func TestResolveOwnerFromTheEnvValue(t *testing.T) {
	if owner, err := ResolveOwner(vectorTagJSON(t), agentPK); err != nil || owner != ownerPK {
		t.Fatalf("ResolveOwner = %q, %v", owner, err)
	}
	if _, err := ResolveOwner(vectorTagJSON(t), ownerPK); err == nil {
		t.Fatal("resolved an owner from a tag issued to another agent")
	}
	if _, err := ResolveOwner("", agentPK); err == nil {
		t.Fatal("resolved an owner from an empty value")
	}
}

func TestSpecSignedEventCarriesAValidAttestation(t *testing.T) {
	ev := vectorEvent()
	tag, err := OfEvent(&ev)
	if err != nil || tag.Owner != ownerPK {
		t.Fatalf("OfEvent = %+v, %v", tag, err)
	}
}

func TestSpecInvalidVectorsAreRejected(t *testing.T) {
	mk := func(mut func(*nostr.Event), resign bool) nostr.Event {
		ev := vectorEvent()
		mut(&ev)
		if resign {
			if err := protocol.SignEvent(&ev, agentSK, nil); err != nil {
				t.Fatal(err)
			}
		}
		return ev
	}
	selfTag, _ := Issue(agentSK, ownerPK, "", nil) // signed by the agent key itself
	cases := map[string]nostr.Event{
		"two auth tags":       mk(func(e *nostr.Event) { e.Tags = append(e.Tags, e.Tags[0]) }, true),
		"three elements":      mk(func(e *nostr.Event) { e.Tags[0] = e.Tags[0][:3] }, true),
		"five elements":       mk(func(e *nostr.Event) { e.Tags[0] = append(e.Tags[0], "x") }, true),
		"trailing delimiter":  mk(func(e *nostr.Event) { e.Tags[0][2] = "kind=1&" }, true),
		"leading zero":        mk(func(e *nostr.Event) { e.Tags[0][2] = "kind=01" }, true),
		"self-attestation":    mk(func(e *nostr.Event) { e.Tags[0][1] = agentPK }, true),
		"bad event signature": mk(func(e *nostr.Event) { e.Sig = strings.Repeat("0", 128) }, false),
		"bad event id":        mk(func(e *nostr.Event) { e.Content = "changed" }, false),
		"wrong kind":          mk(func(e *nostr.Event) { e.Kind = 9 }, true),
		"after the bound":     mk(func(e *nostr.Event) { e.CreatedAt = 1713957000 }, true),
		"signed by the agent": mk(func(e *nostr.Event) { e.Tags[0] = selfTag.NostrTag() }, true),
	}
	for name, ev := range cases {
		if tag, err := OfEvent(&ev); err == nil {
			t.Errorf("%s: accepted %+v", name, tag)
		}
	}
}

func TestParseRejectsMalformedTags(t *testing.T) {
	good := vectorTagJSON(t)
	cases := map[string]string{
		"not json":          "auth",
		"object":            `{"auth":1}`,
		"number element":    `["auth","` + ownerPK + `",1,"` + vecSig + `"]`,
		"three elements":    `["auth","` + ownerPK + `","` + conditions + `"]`,
		"five elements":     strings.TrimSuffix(good, "]") + `,"x"]`,
		"wrong name":        strings.Replace(good, `"auth"`, `"Auth"`, 1),
		"uppercase owner":   strings.Replace(good, ownerPK, strings.ToUpper(ownerPK), 1),
		"uppercase sig":     strings.Replace(good, vecSig, strings.ToUpper(vecSig), 1),
		"short owner":       strings.Replace(good, ownerPK, ownerPK[:62], 1),
		"short sig":         strings.Replace(good, vecSig, vecSig[:126], 1),
		"whitespace clause": strings.Replace(good, conditions, "kind=1 ", 1),
		"null":              "null",
	}
	for name, in := range cases {
		if tag, err := Parse(in); err == nil {
			t.Errorf("%s: Parse accepted %q as %+v", name, in, tag)
		}
	}
	if _, err := Parse("  " + good + "\n"); err != nil {
		t.Errorf("surrounding whitespace from an env file refused: %v", err)
	}
}

func TestConditionsGrammar(t *testing.T) {
	good := []string{"", "kind=0", "kind=65535", "created_at<0", "created_at>4294967295",
		"kind=1&created_at<1713957000", "created_at>1&created_at<2&kind=9"}
	bad := []string{"&", "kind=1&", "&kind=1", "kind=1&&kind=2", "kind=01", "kind=", "kind=65536",
		"kind=-1", "kind=+1", "created_at<4294967296", "created_at<99999999999", "created_at=5", "Kind=1",
		"kind=1 ", " kind=1", "kind=1\t", "expires=5", "created_at<1e3", "kind=٣"}
	for _, c := range good {
		if err := ValidateConditions(c); err != nil {
			t.Errorf("ValidateConditions(%q) = %v, want ok", c, err)
		}
	}
	for _, c := range bad {
		if err := ValidateConditions(c); err == nil {
			t.Errorf("ValidateConditions(%q) accepted a malformed string", c)
		}
	}
}

func TestBoundsAreStrictAndKindClausesApplyToEvents(t *testing.T) {
	tag := Tag{Owner: ownerPK, Conditions: "kind=1&created_at>100&created_at<200", Sig: vecSig}
	for _, c := range []struct {
		kind int
		at   int64
		want bool
	}{{1, 150, true}, {1, 100, false}, {1, 200, false}, {1, 101, true}, {1, 199, true}, {9, 150, false}} {
		if got := tag.Allows(c.kind, c.at); got != c.want {
			t.Errorf("Allows(kind %d, at %d) = %v, want %v", c.kind, c.at, got, c.want)
		}
	}
}

func TestVerifyAtChecksTimeButNotKind(t *testing.T) {
	tag, err := Parse(vectorTagJSON(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := tag.VerifyAt(agentPK, 1713956999); err != nil {
		t.Errorf("inside the bound: %v", err)
	}
	if err := tag.VerifyAt(agentPK, 1713957000); err == nil {
		t.Error("at the strict upper bound: accepted")
	}
}

func TestIssueRoundTripsAndRefusesSelf(t *testing.T) {
	tag, err := Issue(ownerSK, strings.ToUpper(agentPK), "kind=9", nil)
	if err != nil {
		t.Fatal(err)
	}
	if tag.Owner != ownerPK || tag.Conditions != "kind=9" {
		t.Fatalf("issued %+v", tag)
	}
	back, err := Parse(tag.JSON())
	if err != nil || back != tag {
		t.Fatalf("JSON round trip = %+v, %v", back, err)
	}
	if err := back.Verify(agentPK); err != nil {
		t.Fatalf("issued tag does not verify: %v", err)
	}
	if _, err := Issue(ownerSK, ownerPK, "", nil); err == nil {
		t.Error("self-attestation issued")
	}
	if _, err := Issue(ownerSK, agentPK, "kind=01", nil); err == nil {
		t.Error("malformed conditions issued")
	}
}

func profile(t *testing.T, sk string, tags nostr.Tags) nostr.Event {
	t.Helper()
	ev := nostr.Event{Kind: 0, CreatedAt: 1700000000, Tags: tags, Content: `{"name":"bee"}`}
	if err := protocol.SignEvent(&ev, sk, nil); err != nil {
		t.Fatal(err)
	}
	return ev
}

func TestIsSibling(t *testing.T) {
	const siblingSK = "0000000000000000000000000000000000000000000000000000000000000003"
	sibPK, _ := protocol.PublicKey(siblingSK)
	good, _ := Issue(ownerSK, sibPK, "", nil)
	expired, _ := Issue(ownerSK, sibPK, "created_at<1700000000", nil)
	forOther, _ := Issue(ownerSK, agentPK, "", nil) // valid tag, but for another agent
	byOther, _ := Issue(agentSK, sibPK, "", nil)    // valid tag, by another owner
	p := profile(t, siblingSK, nostr.Tags{good.NostrTag()})
	if !IsSibling(&p, ownerPK, 1700000001) || !IsSibling(&p, strings.ToUpper(ownerPK), 1700000001) {
		t.Fatal("a validly attested sibling was not recognised")
	}
	cases := map[string]nostr.Event{
		"no auth tag":            profile(t, siblingSK, nil),
		"tag for another agent":  profile(t, siblingSK, nostr.Tags{forOther.NostrTag()}),
		"tag by another owner":   profile(t, siblingSK, nostr.Tags{byOther.NostrTag()}),
		"expired at created_at":  profile(t, siblingSK, nostr.Tags{expired.NostrTag()}),
		"two auth tags":          profile(t, siblingSK, nostr.Tags{good.NostrTag(), good.NostrTag()}),
		"extra element":          profile(t, siblingSK, nostr.Tags{append(good.NostrTag(), "x")}),
		"profile not kind 0":     func() nostr.Event { e := p; e.Kind = 1; _ = protocol.SignEvent(&e, siblingSK, nil); return e }(),
		"profile signature fake": func() nostr.Event { e := p; e.Content = "{}"; return e }(),
	}
	for name, ev := range cases {
		if IsSibling(&ev, ownerPK, 1700000001) {
			t.Errorf("%s: counted as a sibling", name)
		}
	}
	if IsSibling(nil, ownerPK, 1700000001) {
		t.Error("nil profile counted as a sibling")
	}
}

// An attestation that expired an hour ago does not pass because its holder backdated its
// profile to before the expiry (issue 28): the bounds hold at now too.
func TestIsSiblingChecksTheTimeBoundsAtNow(t *testing.T) {
	const siblingSK = "0000000000000000000000000000000000000000000000000000000000000003"
	sibPK, _ := protocol.PublicKey(siblingSK)
	tag, _ := Issue(ownerSK, sibPK, "created_at<1700000500", nil)
	p := profile(t, siblingSK, nostr.Tags{tag.NostrTag()}) // dated 1700000000, before the expiry
	if !IsSibling(&p, ownerPK, 1700000100) {
		t.Fatal("a sibling within its bounds was not recognised")
	}
	if IsSibling(&p, ownerPK, 1700000500+3600) {
		t.Fatal("an attestation expired an hour ago passed on a backdated profile")
	}
}
