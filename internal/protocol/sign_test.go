package protocol

import (
	"bytes"
	"encoding/hex"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/btcsuite/btcd/btcec/v2"
	"github.com/btcsuite/btcd/btcec/v2/schnorr"
	"github.com/nbd-wtf/go-nostr"
)

// The Signer must produce exactly btcec's BIP-340 signature for the same key, message and aux
// randomness: keys whose public point has an odd y and nonces whose R has an odd y each occur in
// about half of these cases, so both negations are covered many times.
func TestSignerMatchesBtcec(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 500 {
		var skb, msg, aux [32]byte
		fill(rng, skb[:])
		fill(rng, msg[:])
		fill(rng, aux[:])
		sk := hex.EncodeToString(skb[:])
		s, err := NewSigner(sk)
		if err != nil {
			continue // out of range: astronomically rare
		}
		got, err := s.SignHash(msg, bytes.NewReader(aux[:]))
		if err != nil {
			t.Fatal(err)
		}
		priv, pub := btcec.PrivKeyFromBytes(skb[:])
		want, err := schnorr.Sign(priv, msg[:], schnorr.CustomNonce(aux))
		if err != nil {
			t.Fatal(err)
		}
		if got != hex.EncodeToString(want.Serialize()) {
			t.Fatalf("case %d: sig %s, btcec %x", i, got, want.Serialize())
		}
		if wantPub := hex.EncodeToString(schnorr.SerializePubKey(pub)); s.PublicKey() != wantPub {
			t.Fatalf("case %d: pubkey %s, want %s", i, s.PublicKey(), wantPub)
		}
	}
}

func fill(rng *rand.Rand, b []byte) {
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
}

func TestSignerForReusesTheParsedKeyAndRejectsBadKeys(t *testing.T) {
	sk := strings.Repeat("0", 63) + "7"
	a, err := SignerFor(sk)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := SignerFor(sk); a != b {
		t.Error("SignerFor parsed the same key twice")
	}
	if upper, err := SignerFor(strings.ToUpper(strings.Repeat("ab", 32))); err != nil || upper.PublicKey() == "" {
		t.Errorf("SignerFor refused an upper-case hex key: %v", err)
	}
	for _, bad := range []string{"", strings.Repeat("0", 64), strings.Repeat("f", 64), strings.Repeat("g", 64), sk[:63]} {
		if _, err := SignerFor(bad); err == nil {
			t.Errorf("SignerFor(%q) accepted a bad key", bad)
		}
	}
}

func TestSignProducesEventsThatVerify(t *testing.T) {
	sk := strings.Repeat("0", 63) + "9"
	for i := range 20 {
		ev := nostr.Event{Kind: 7, CreatedAt: nostr.Timestamp(i), Content: "👀", Tags: nostr.Tags{{"e", strings.Repeat("a", 64)}}}
		if err := Sign(&ev, sk); err != nil {
			t.Fatal(err)
		}
		if err := CheckEvent(&ev); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
	}
}

// BenchmarkSignEvent compares signing one event with a Signer against go-nostr's Event.Sign
// (which the harness used before): run both sub-benchmarks in one go and compare ns/op.
func BenchmarkSignEvent(b *testing.B) {
	sk := strings.Repeat("0", 63) + "9"
	ev := nostr.Event{Kind: 7, CreatedAt: 1, Content: "👀", Tags: nostr.Tags{{"e", strings.Repeat("a", 64)}, {"h", "c"}}}
	b.Run("signer", func(b *testing.B) {
		for b.Loop() {
			e := ev
			if err := Sign(&e, sk); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("go-nostr", func(b *testing.B) {
		for b.Loop() {
			e := ev
			if err := e.Sign(sk); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkCheckEvent compares CheckEvent (one hash, cached public key) with go-nostr's CheckID
// plus CheckSignature, which it replaced: run both and compare ns/op.
func BenchmarkCheckEvent(b *testing.B) {
	ev := nostr.Event{Kind: 9, CreatedAt: 1, Content: "@bot hello there", Tags: nostr.Tags{{"h", "c"}, {"p", strings.Repeat("a", 64)}}}
	if err := Sign(&ev, strings.Repeat("0", 63)+"9"); err != nil {
		b.Fatal(err)
	}
	b.Run("protocol", func(b *testing.B) {
		for b.Loop() {
			if err := CheckEvent(&ev); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("go-nostr", func(b *testing.B) {
		for b.Loop() {
			if ok, _ := ev.CheckSignature(); !ok || !ev.CheckID() {
				b.Fatal("bad")
			}
		}
	})
}

// CheckEvent must accept and refuse exactly what go-nostr's CheckID and CheckSignature do,
// including with a public key already in its cache and table (the one exception, s ≥ n, cannot
// come from flipping one digit of a real signature: see VerifyHash).
func FuzzCheckEventAgreesWithGoNostr(f *testing.F) {
	f.Add("hello", uint8(0), uint8(0), false)
	f.Add("hello", uint8(3), uint8(1), false)
	f.Add("", uint8(127), uint8(5), true)
	f.Fuzz(func(t *testing.T, content string, at, bit uint8, otherKey bool) {
		ev := nostr.Event{Kind: 9, CreatedAt: 1, Content: content, Tags: nostr.Tags{{"h", "c"}}}
		if err := Sign(&ev, strings.Repeat("0", 63)+"9"); err != nil {
			t.Fatal(err)
		}
		// One flipped hex digit in the signature (at 0–127), the event claimed by another key, or its
		// content changed.
		sig := []byte(ev.Sig)
		i := int(at) % len(sig)
		sig[i] = "0123456789abcdef"[(strings.IndexByte("0123456789abcdef", sig[i])+1+int(bit%15))%16]
		if bit%2 == 1 {
			ev.Sig = string(sig)
		}
		if otherKey {
			ev.PubKey, _ = PublicKey(strings.Repeat("0", 63) + "8")
		}
		if bit%4 == 2 { // content changed after signing: the id no longer matches
			ev.Content += "!"
		}
		ok, _ := ev.CheckSignature()
		want := ok && ev.CheckID()
		if got := CheckEvent(&ev) == nil; got != want {
			t.Fatalf("CheckEvent says %v, go-nostr %v (content %q, sig %s, pubkey %s)", got, want, content, ev.Sig, ev.PubKey)
		}
	})
}
