package protocol

import (
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/btcsuite/btcd/btcec/v2"
	"github.com/btcsuite/btcd/btcec/v2/schnorr"
)

// The table of a key's multiples must give exactly what btcec's variable-base multiplication
// gives, for any scalar (digits of 0 and 15, the largest and smallest scalars included).
func TestMultiplesTableMatchesScalarMult(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 8 {
		var skb [32]byte
		fill(rng, skb[:])
		_, pub := btcec.PrivKeyFromBytes(skb[:])
		var p btcec.JacobianPoint
		pub.AsJacobian(&p)
		table := newMultiples(&p)
		scalars := [][32]byte{{31: 1}, {31: 0x0f}, {31: 0xf0}, {}}
		var nMinus1 btcec.ModNScalar
		nMinus1.SetInt(1).Negate()
		scalars = append(scalars, nMinus1.Bytes())
		for range 50 {
			var b [32]byte
			fill(rng, b[:])
			scalars = append(scalars, b)
		}
		for _, b := range scalars {
			var k btcec.ModNScalar
			k.SetBytes(&b)
			var got, want btcec.JacobianPoint
			table.mul(&k, &got)
			btcec.ScalarMultNonConst(&k, &p, &want)
			if k.IsZero() {
				if !got.Z.IsZero() && !(got.X.IsZero() && got.Y.IsZero()) {
					t.Fatal("0·P is not the point at infinity")
				}
				continue
			}
			got.ToAffine()
			want.ToAffine()
			if !got.X.Equals(&want.X) || !got.Y.Equals(&want.Y) {
				t.Fatalf("k=%x: table gives %v, btcec %v", b, got, want)
			}
		}
	}
}

// VerifyHash agrees with btcec on valid signatures and on every kind of broken one, on a key's
// first check (no table yet) and on later ones (with its table).
func TestVerifyHashAgreesWithBtcec(t *testing.T) {
	forgetKeys(t)
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range 40 {
		var skb [32]byte
		fill(rng, skb[:])
		priv, pub := btcec.PrivKeyFromBytes(skb[:])
		pk := hex.EncodeToString(schnorr.SerializePubKey(pub))
		for round := range 3 {
			var msg [32]byte
			fill(rng, msg[:])
			sig, err := schnorr.Sign(priv, msg[:])
			if err != nil {
				t.Fatal(err)
			}
			good := sig.Serialize()
			cases := map[string][]byte{"valid": good}
			for _, bit := range []int{0, 7, 100, 255, 256, 300, 511} {
				bad := append([]byte(nil), good...)
				bad[bit/8] ^= 1 << (bit % 8)
				cases[fmt.Sprintf("bit %d flipped", bit)] = bad
			}
			for name, s := range cases {
				want := false
				if parsed, err := schnorr.ParseSignature(s); err == nil {
					want = parsed.Verify(msg[:], pub)
				}
				if got := VerifyHash(msg, pk, hex.EncodeToString(s)); got != want {
					t.Fatalf("key %d round %d, %s: VerifyHash %v, btcec %v", i, round, name, got, want)
				}
			}
			other := msg
			other[0] ^= 1
			if VerifyHash(other, pk, hex.EncodeToString(good)) {
				t.Fatalf("key %d round %d: verified for another message", i, round)
			}
		}
	}
	if len(tables.m) != maxTables {
		t.Fatalf("%d tables built for 40 keys checked three times, want the bound, %d", len(tables.m), maxTables)
	}
}

// forgetKeys empties the parsed-key cache and the table count, so a test sees keys as new.
func forgetKeys(t *testing.T) {
	t.Helper()
	authorKeys.mu.Lock()
	authorKeys.m = nil
	authorKeys.mu.Unlock()
	tables.mu.Lock()
	tables.m = nil
	tables.mu.Unlock()
}

// BIP-340's verification vectors (4–14 of test-vectors.csv; 12 and 13 are r = p and s = n), each
// checked three times so that the second and third go through the key's table. s = n is refused
// (btcec reduces s).
func TestVerifyHashBIP340Vectors(t *testing.T) {
	forgetKeys(t)
	const (
		pkA = "dff1d77f2a671c5f36183726db2341be58feae1da2deced843240f7b502ba659"
		m   = "243f6a8885a308d313198a2e03707344a4093822299f31d0082efa98ec4e6c89"
		p   = "fffffffffffffffffffffffffffffffffffffffffffffffffffffffefffffc2f"
		n   = "fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141"
	)
	vectors := []struct {
		name, pk, msg, sig string
		want               bool
	}{
		{"valid, r with leading zeros", "d69c3509bb99e412e68b0fe8544e72837dfa30746d8be2aa65975f29d22dc7b9",
			"4df3c3f68fcc83b27e9d42c90431a72499f17875c81a599b566c9889b9696703",
			"00000000000000000000003b78ce563f89a0ed9414f5aa28ad0d96d6795f9c6376afb1548af603b3eb45c9f8207dee1060cb71c04e80f593060b07d28308d7f4", true},
		{"public key not on the curve", "eefdea4cdb677750a420fee807eacf21eb9898ae79b9768766e4faa04a2d4a34", m,
			"6cff5c3ba86c69ea4b7376f31a9bcb4f74c1976089b2d9963da2e5543e17776969e89b4c5564d00349106b8497785dd7d1d713a8ae82b32fa79d5f7fc407d39b", false},
		{"R has odd y", pkA, m, "fff97bd5755eeea420453a14355235d382f6472f8568a18b2f057a14602975563cc27944640ac607cd107ae10923d9ef7a73c643e166be5ebeafa34b1ac553e2", false},
		{"negated message", pkA, m, "1fa62e331edbc21c394792d2ab1100a7b432b013df3f6ff4f99fcb33e0e1515f28890b3edb6e7189b630448b515ce4f8622a954cfe545735aaea5134fccdb2bd", false},
		{"negated s", pkA, m, "6cff5c3ba86c69ea4b7376f31a9bcb4f74c1976089b2d9963da2e5543e177769961764b3aa9b2ffcb6ef947b6887a226e8d7c93e00c5ed0c1834ff0d0c2e6da6", false},
		{"R is infinity (r = 0)", pkA, m, strings.Repeat("0", 64) + "123dda8328af9c23a94c1feecfd123ba4fb73476f0d594dcb65c6425bd186051", false},
		{"R is infinity (r = 1)", pkA, m, strings.Repeat("0", 63) + "17615fbaf5ae28864013c099742deadb4dba87f11ac6754f93780d5a1837cf197", false},
		{"r not an x on the curve", pkA, m, "4a298dacae57395a15d0795ddbfd1dcb564da82b0f269bc70a74f8220429ba1d69e89b4c5564d00349106b8497785dd7d1d713a8ae82b32fa79d5f7fc407d39b", false},
		{"r equals the field size", pkA, m, p + "69e89b4c5564d00349106b8497785dd7d1d713a8ae82b32fa79d5f7fc407d39b", false},
		{"s equals the group order", pkA, m, "6cff5c3ba86c69ea4b7376f31a9bcb4f74c1976089b2d9963da2e5543e177769" + n, false},
		{"public key exceeds the field size", "fffffffffffffffffffffffffffffffffffffffffffffffffffffffefffffc30", m,
			"6cff5c3ba86c69ea4b7376f31a9bcb4f74c1976089b2d9963da2e5543e17776969e89b4c5564d00349106b8497785dd7d1d713a8ae82b32fa79d5f7fc407d39b", false},
	}
	for _, v := range vectors {
		var msg [32]byte
		hex.Decode(msg[:], []byte(v.msg))
		for try := range 3 {
			if got := VerifyHash(msg, v.pk, v.sig); got != v.want {
				t.Errorf("%s (check %d): %v, want %v", v.name, try+1, got, v.want)
			}
		}
	}
	authorKeys.mu.Lock()
	k := authorKeys.m[vectors[0].pk]
	authorKeys.mu.Unlock()
	if k == nil || k.table.Load() == nil {
		t.Fatal("the valid vector's key has no table after three checks: the table path went untested")
	}
}

// A key parsed again after authorKeys started over finds the table built for it before, rather
// than building a second one or going without.
func TestTableOutlivesTheParsedKeyCache(t *testing.T) {
	forgetKeys(t)
	signer, err := NewSigner(strings.Repeat("0", 63) + "5")
	if err != nil {
		t.Fatal(err)
	}
	check := func() {
		t.Helper()
		var msg [32]byte
		sig, _ := signer.SignHash(msg, nil)
		if !VerifyHash(msg, signer.PublicKey(), sig) {
			t.Fatal("a valid signature was refused")
		}
	}
	check()
	check() // builds the table
	tables.mu.Lock()
	built := tables.m[string(mustHex(t, signer.PublicKey()))]
	tables.mu.Unlock()
	if built == nil {
		t.Fatal("no table after the key's second check")
	}
	authorKeys.mu.Lock()
	authorKeys.m = nil // as when it fills up and starts over
	authorKeys.mu.Unlock()
	check()
	check()
	authorKeys.mu.Lock()
	k := authorKeys.m[signer.PublicKey()]
	authorKeys.mu.Unlock()
	if k.table.Load() != built || len(tables.m) != 1 {
		t.Fatalf("after the cache started over: same table %v, %d tables", k.table.Load() == built, len(tables.m))
	}
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
