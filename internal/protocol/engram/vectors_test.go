package engram

import (
	"bytes"
	"encoding/hex"
	"testing"

	"github.com/nbd-wtf/go-nostr"
)

// The NIP-AE reference vectors: agent secret …01, owner secret …02, NIP-44 nonces …01-…04,
// Schnorr aux all zeros.
const (
	agentSK = "0000000000000000000000000000000000000000000000000000000000000001"
	ownerSK = "0000000000000000000000000000000000000000000000000000000000000002"
	agentPK = "79be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798"
	ownerPK = "c6047f9441ed7d6d3045406e95c07cd85c778e4b8cef3ca7abac09b95c709ee5"
	vecKc   = "c41c775356fd92eadc63ff5a0dc1da211b268cbea22316767095b2871ea1412d"
)

type vector struct {
	name      string
	body      Body
	wantBody  string
	createdAt nostr.Timestamp
	nonce     byte
	content   string
	id        string
	sig       string
}

var vectors = []vector{
	{
		name: "write mem/example", body: MemoryBody("mem/example", "hello, agent memory"),
		wantBody:  `{"slug":"mem/example","value":"hello, agent memory"}`,
		createdAt: 1700000000, nonce: 1,
		content: "AgAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAABedgcxyfmpph68LBjCWZsTI5lb0Cbg8dIPVYVe/WVj/l4Yd8HGgzC8awyBi9bn9ClRdtd2IPsmont0jN/cajVSQhahTOwuNNwoJtZIg35aSsUzeCq4tQfd8E+fLoKomdPxjs=",
		id:      "f4a594177b7aeea4fe99a09efbf74ae85f0126244f322135682c405888a38689",
		sig:     "0a4582f0bc5995b9a010afda5984f568055988ebbe4552b4e0ec6d11aeb2b303af940f3d84726a7edd1763badb284eb3aa8457664ceba85a90d6252ed4b494cb",
	},
	{
		name: "write mem/notes/2026-05-12", body: MemoryBody("mem/notes/2026-05-12", "meeting note: [[mem/example]]"),
		wantBody:  `{"slug":"mem/notes/2026-05-12","value":"meeting note: [[mem/example]]"}`,
		createdAt: 1700000001, nonce: 2,
		content: "AgAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAACG/JBPvdZxDwAxOG7bY3AW2q1slZqBjQC3NxfPVtfcR+TGjp2GKtjyXyqNwG08GK+00I1u1vUZ4cCjcun9A7ra92rleKKJ5w57pqgFspbv1vClUJY5487A/5phVDHkw6DhRCSMDpEMw5Tapj3Wm1ponAVr5PciPOrTxltEfTVdSKaPA==",
		id:      "1a43298ea1fa9b73462a85b9f16f5f6bd2a7ab18b0b02424e5ec3f3b8a48e030",
		sig:     "dc9da456db1c89f070edc5f994786f270fc00e8ff19f33d5b0f6cea49421cd727fcd79bb288f3e3dbd5af9ca1ba67f9bd11b02a47c1e6c37cfd32665c17e4a24",
	},
	{
		name: "tombstone mem/example", body: TombstoneBody("mem/example"),
		wantBody:  `{"slug":"mem/example","value":null}`,
		createdAt: 1700000002, nonce: 3,
		content: "AgAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAADuau8i0Wu4+ULnp2qTfd+O23jJAapMRrKGGwabNVOlT9hSF8FViBHIS6f86/7xK4qGOin4IH8Wr/3cvHDcQGQd3IXQJr8LHgJkaYpQPdBO1bgqiFu8K3L/CLb1PgG1X7RQ8E=",
		id:      "c8604bef05295856a67a88ec895e07b5b47a2febc23c82934734096a7b123b63",
		sig:     "c8d53859cf08b3a9a20a5b01c61d12fa2f082f462adb635420f05dc6f9bb662a174e729023854bf53e5e35fae8f6f4c9d604e8979a070e298cd77cfb7e6b6468",
	},
	{
		name: "core", body: CoreBody("test agent. see [[mem/example]] and [[mem/notes/2026-05-12]]."),
		wantBody:  `{"slug":"core","profile":"test agent. see [[mem/example]] and [[mem/notes/2026-05-12]]."}`,
		createdAt: 1700000003, nonce: 4,
		content: "AgAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAEEeZHAFjhc8DAcKaVSSB7IoKG3nr+dX3LXlU7UIdOKayhIVPXvl4WuFmBSVxLO6yEV5vnLvzbo7rU0uPRYyAJLPNnifVTCw2EQZH70zOwTc/mVvaATHKzqcFo5VHrbpKNTzeNnz1Vds2yg2DXmdxaoWQA4YfnlLwZDOpyu9JP1uB1Yw==",
		id:      "980419c4d231266471242456c832d0c2eb1e6974468dc795f3ae327484129058",
		sig:     "ce113fff1205eadb38928b224a90247be1a00b0c3f8ab583d4a5f7274ddba51ebb5eb9d627d44664a78d2e870e61835cf61446cc812ecea139e8b7d41b8e238f",
	},
}

// fixedEntropy yields the NIP-44 nonce (31 zero bytes then n) and then 32 zero bytes of aux,
// in the order Build reads them.
func fixedEntropy(n byte) *bytes.Reader {
	b := make([]byte, 64)
	b[31] = n
	return bytes.NewReader(b)
}

func mustAgent(t testing.TB) *Pair {
	t.Helper()
	p, err := AgentSide(agentSK, ownerPK)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func mustOwner(t testing.TB) *Pair {
	t.Helper()
	p, err := OwnerSide(ownerSK, agentPK)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func vectorEvent(v vector) nostr.Event {
	return nostr.Event{ID: v.id, PubKey: agentPK, CreatedAt: v.createdAt, Kind: 30174,
		Tags:    nostr.Tags{{"d", dOf(v.body.Slug)}, {"p", ownerPK}},
		Content: v.content, Sig: v.sig}
}

func dOf(slug string) string {
	return map[string]string{
		"core":                 "bdc233238ffe52e272b44cc233c8f33a2bc510b08be04495b225964283be4a90",
		"mem/example":          "72d4f9629106451505d7d341ea85bb3ebad4f654fcfd2aad100d5a35f8a85cba",
		"mem/notes/2026-05-12": "31651571a312780cfdc1f0b706b682ac9f3f51a053e8dca76fe57710bae5a4d4",
	}[slug]
}

func TestConversationKeyMatchesVectorFromBothSides(t *testing.T) {
	a, o := mustAgent(t), mustOwner(t)
	ka, ko := a.ConversationKey(), o.ConversationKey()
	if got := hex.EncodeToString(ka[:]); got != vecKc {
		t.Fatalf("agent-side K_c = %s, want %s", got, vecKc)
	}
	if ka != ko {
		t.Fatal("owner-side K_c differs from agent-side K_c")
	}
	if a.Agent != agentPK || a.Owner != ownerPK || o.Agent != agentPK || o.Owner != ownerPK {
		t.Fatalf("pubkeys: agent side %s/%s, owner side %s/%s", a.Agent, a.Owner, o.Agent, o.Owner)
	}
}

func TestDTagsMatchVectors(t *testing.T) {
	p := mustOwner(t)
	for _, slug := range []string{"core", "mem/example", "mem/notes/2026-05-12"} {
		if got := p.DTag(slug); got != dOf(slug) {
			t.Errorf("d(%q) = %s, want %s", slug, got, dOf(slug))
		}
	}
}

func TestBodiesSerialiseByteExactly(t *testing.T) {
	for _, v := range vectors {
		got, err := v.body.Marshal()
		if err != nil {
			t.Fatalf("%s: %v", v.name, err)
		}
		if string(got) != v.wantBody {
			t.Errorf("%s: body %s, want %s", v.name, got, v.wantBody)
		}
	}
}

func TestBuildReproducesVectorEventsByteExactly(t *testing.T) {
	p := mustAgent(t)
	for _, v := range vectors {
		ev, err := p.Build(v.body, v.createdAt, fixedEntropy(v.nonce))
		if err != nil {
			t.Fatalf("%s: %v", v.name, err)
		}
		want := vectorEvent(v)
		if ev.Content != want.Content {
			t.Errorf("%s: content\n got %s\nwant %s", v.name, ev.Content, want.Content)
		}
		if ev.ID != v.id || ev.Sig != v.sig {
			t.Errorf("%s: id/sig\n got %s %s\nwant %s %s", v.name, ev.ID, ev.Sig, v.id, v.sig)
		}
		if len(ev.Tags) != 2 || ev.Tags[0][0] != "d" || ev.Tags[0][1] != want.Tags[0][1] || ev.Tags[1][0] != "p" || ev.Tags[1][1] != ownerPK {
			t.Errorf("%s: tags %v, want %v", v.name, ev.Tags, want.Tags)
		}
	}
}

func TestOwnerOpensEveryVectorEvent(t *testing.T) {
	for _, side := range []*Pair{mustOwner(t), mustAgent(t)} {
		for _, v := range vectors {
			ev := vectorEvent(v)
			b, err := side.Open(&ev)
			if err != nil {
				t.Fatalf("%s: %v", v.name, err)
			}
			if b != v.body {
				t.Errorf("%s: body %+v, want %+v", v.name, b, v.body)
			}
		}
	}
}

func TestVectorTombstoneSupersedesFirstWrite(t *testing.T) {
	p := mustOwner(t)
	evs := []nostr.Event{vectorEvent(vectors[0]), vectorEvent(vectors[2]), vectorEvent(vectors[1]), vectorEvent(vectors[3])}
	head, ok, invalid := p.Head(evs, "mem/example")
	if !ok || invalid != 0 || head.Event.ID != vectors[2].id || !head.Body.Tombstone {
		t.Fatalf("head of mem/example = %+v ok=%v invalid=%d, want the tombstone", head, ok, invalid)
	}
	ls := p.List(evs)
	if len(ls) != 1 || ls[0] != (Listing{Slug: "mem/notes/2026-05-12", EventID: vectors[1].id, CreatedAt: 1700000001}) {
		t.Fatalf("listing = %+v, want only mem/notes/2026-05-12", ls)
	}
	profile, found, err := p.Core(evs)
	if err != nil || !found || profile != vectors[3].body.Text {
		t.Fatalf("core = %q %v %v", profile, found, err)
	}
}
