package protocol

import (
	"encoding/hex"
	"sync"
	"sync/atomic"

	"github.com/btcsuite/btcd/btcec/v2"
	"github.com/btcsuite/btcd/btcec/v2/schnorr"
)

// VerifyHash reports whether sigHex is a valid BIP-340 signature of msg by the x-only public key
// pk (both hex). It is the first step of every mention buzz-acp handles and of every event the
// relay stores.
//
// Checking a signature computes R = s·G − e·P. btcec's s·G reads precomputed multiples of G; its
// e·P starts from nothing every time and is three quarters of the check (about 100 of 135 µs
// here). Mentions come from few authors — the owner, a handful of people and agents — so for
// a key that keeps signing, its multiples are computed once too (a table, built on the key's
// second check, about 1 ms) and e·P becomes 64 additions: BenchmarkCheckEvent 64 µs against 138.
//
// It accepts exactly what BIP-340 accepts (TestVerifyHashAgreesWithBtcec, the spec's vectors,
// FuzzCheckEventAgreesWithGoNostr), with one difference from btcec: a signature whose s is not
// below the group order is refused, as the spec says, where btcec reduces it (no signer makes one).
func VerifyHash(msg [32]byte, pk, sigHex string) bool {
	k, err := authorKeys.get(pk, func() (*authorKey, error) { return parseAuthorKey(pk) })
	if err != nil || len(sigHex) != 128 {
		return false
	}
	var sig [64]byte
	if _, err := hex.Decode(sig[:], []byte(sigHex)); err != nil {
		return false
	}
	return k.verify(msg, &sig)
}

// authorKey is a parsed public key and, once it has been checked twice, its table of multiples.
type authorKey struct {
	p        btcec.JacobianPoint // affine, even y
	x        [32]byte
	seen     atomic.Int32
	table    atomic.Pointer[multiples]
	untabled atomic.Bool // maxTables were taken when it qualified
}

// authorKeys holds the parsed keys of recent authors (parsing one recovers its y, a square root).
var authorKeys = keyCache[*authorKey]{max: 4096}

func parseAuthorKey(pk string) (*authorKey, error) {
	b, err := hex.DecodeString(pk)
	if err != nil {
		return nil, err
	}
	pub, err := schnorr.ParsePubKey(b)
	if err != nil {
		return nil, err
	}
	k := &authorKey{}
	pub.AsJacobian(&k.p)
	copy(k.x[:], b)
	return k, nil
}

// verify is BIP-340's Verify(pk, m, sig) for a parsed key.
func (k *authorKey) verify(msg [32]byte, sig *[64]byte) bool {
	var r btcec.FieldVal
	if overflow := r.SetByteSlice(sig[:32]); overflow {
		return false
	}
	var s btcec.ModNScalar
	if overflow := s.SetByteSlice(sig[32:]); overflow {
		return false
	}
	eh := taggedHash(tagChallenge, sig[:32], k.x[:], msg[:])
	var e btcec.ModNScalar
	e.SetBytes(&eh) // reduced mod n, as the spec's int(hash) mod n
	e.Negate()

	var sG, eP, R btcec.JacobianPoint
	btcec.ScalarBaseMultNonConst(&s, &sG)
	if t := k.tableFor(); t != nil {
		t.mul(&e, &eP)
	} else {
		btcec.ScalarMultNonConst(&e, &k.p, &eP)
	}
	btcec.AddNonConst(&sG, &eP, &R)
	if (R.X.IsZero() && R.Y.IsZero()) || R.Z.IsZero() {
		return false // R is the point at infinity
	}
	R.ToAffine()
	return !R.Y.IsOdd() && r.Equals(&R.X)
}

// tableFor returns the key's table, building it on the key's second check while fewer than
// maxTables exist; nil: multiply without one.
func (k *authorKey) tableFor() *multiples {
	if t := k.table.Load(); t != nil {
		return t
	}
	if k.seen.Add(1) < 2 || k.untabled.Load() {
		return nil
	}
	tables.mu.Lock()
	defer tables.mu.Unlock()
	t := tables.m[string(k.x[:])] // built before authorKeys last started over
	if t == nil {
		if len(tables.m) >= maxTables {
			k.untabled.Store(true)
			return nil
		}
		t = newMultiples(&k.p)
		if tables.m == nil {
			tables.m = map[string]*multiples{}
		}
		tables.m[string(k.x[:])] = t
	}
	k.table.Store(t)
	return t
}

// maxTables bounds the memory tables take (120 KiB each): the first authors to sign twice get
// one, for the life of the process. None is given back, so a flood of one-off keys cannot make
// the process rebuild tables over and over.
const maxTables = 32

// tables holds every table built, by x-only key.
var tables struct {
	mu sync.Mutex
	m  map[string]*multiples
}

// multiples holds d·16^i·P for each of a 256-bit scalar's 64 four-bit digits i and every digit
// value d from 1 to 15 (at [i*15+d-1]), all affine (Z = 1), so that adding one is the cheaper
// mixed addition.
type multiples [64 * 15]btcec.JacobianPoint

func newMultiples(p *btcec.JacobianPoint) *multiples {
	t := new(multiples)
	base := *p // 16^i·P
	for i := 0; i < len(t); i += 15 {
		t[i] = base
		for d := 1; d < 15; d++ {
			btcec.AddNonConst(&t[i+d-1], &base, &t[i+d])
		}
		var next btcec.JacobianPoint
		btcec.AddNonConst(&t[i+14], &base, &next)
		base = next
	}
	t.toAffine()
	return t
}

// toAffine brings every point to Z = 1 with one field inversion (Montgomery's trick) instead of
// one per point. No point is infinity: each is d·16^i·P with 0 < d·16^i < n.
func (t *multiples) toAffine() {
	prefix := make([]btcec.FieldVal, len(t)) // prefix[i] = Z_0 · … · Z_i-1
	var acc btcec.FieldVal
	acc.SetInt(1)
	for i := range t {
		prefix[i].Set(&acc)
		acc.Mul(&t[i].Z)
	}
	acc.Inverse() // now 1 / (Z_0 · … · Z_last)
	for i := len(t) - 1; i >= 0; i-- {
		var zInv, zInv2, zInv3 btcec.FieldVal
		zInv.Mul2(&acc, &prefix[i]) // 1 / Z_i
		acc.Mul(&t[i].Z)            // 1 / (Z_0 · … · Z_i-1)
		zInv2.SquareVal(&zInv)
		zInv3.Mul2(&zInv2, &zInv)
		t[i].X.Mul(&zInv2).Normalize()
		t[i].Y.Mul(&zInv3).Normalize()
		t[i].Z.SetInt(1)
	}
}

// mul sets result to k·P: one addition per non-zero digit of k.
func (t *multiples) mul(k *btcec.ModNScalar, result *btcec.JacobianPoint) {
	b := k.Bytes()                   // big-endian
	var acc, sum btcec.JacobianPoint // acc starts as infinity
	for i := range 64 {
		d := int(b[31-i/2]>>(4*(i%2))) & 0xf
		if d != 0 {
			btcec.AddNonConst(&acc, &t[i*15+d-1], &sum)
			acc = sum
		}
	}
	result.Set(&acc)
}
