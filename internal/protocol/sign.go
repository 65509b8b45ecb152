package protocol

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"sync"

	"github.com/btcsuite/btcd/btcec/v2"
	"github.com/nbd-wtf/go-nostr"
)

// Signer signs with one secret key, parsed once. buzz-acp signs several events per mention (👀
// and its removal, typing, the turn metric, the NIP-98 header of each HTTP publish). go-nostr's
// Event.Sign derives the public key from the hex secret on every call, and btcec's schnorr.Sign
// derives it again and then verifies its own signature; a Signer only computes the nonce point.
// BenchmarkSignEvent: about 35 µs against 57 µs per event. On buzz-acp's one core that time is
// taken from the next mention's path (docs/benchmarks.md).
//
// Signatures are BIP-340's default signing with aux randomness, byte for byte what
// schnorr.Sign(priv, msg, schnorr.CustomNonce(aux)) returns (TestSignerMatchesBtcec).
type Signer struct {
	d   btcec.ModNScalar // the secret, negated where needed so that d·G has an even y
	px  [32]byte         // x-only public key
	pub string           // px in hex
}

// NewSigner parses a 64-character hex secret key (go-nostr's Event.Sign, which it replaces,
// took either case).
func NewSigner(sk string) (*Signer, error) {
	sk = strings.ToLower(sk)
	if !IsHex64(sk) {
		return nil, errors.New("secret key must be 64 hex characters")
	}
	b, _ := hex.DecodeString(sk)
	s := &Signer{}
	if overflow := s.d.SetByteSlice(b); overflow || s.d.IsZero() {
		return nil, errors.New("secret key is out of range for secp256k1")
	}
	var p btcec.JacobianPoint
	btcec.ScalarBaseMultNonConst(&s.d, &p)
	p.ToAffine()
	if p.Y.IsOdd() {
		s.d.Negate()
	}
	s.px = *p.X.Bytes()
	s.pub = hex.EncodeToString(s.px[:])
	return s, nil
}

// PublicKey is the signer's x-only public key in hex.
func (s *Signer) PublicKey() string { return s.pub }

// SignHash returns the hex BIP-340 signature of a 32-byte message, with aux randomness read from
// entropy (crypto/rand when nil).
func (s *Signer) SignHash(msg [32]byte, entropy io.Reader) (string, error) {
	var aux [32]byte
	if err := readEntropy(entropy, aux[:]); err != nil {
		return "", err
	}
	sig, err := s.sign(msg, aux)
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(sig[:]), nil
}

// SignEvent sets ev's pubkey, id and signature.
func (s *Signer) SignEvent(ev *nostr.Event, entropy io.Reader) error {
	ev.PubKey = s.pub
	if ev.Tags == nil {
		ev.Tags = nostr.Tags{}
	}
	h := sha256.Sum256(ev.Serialize())
	sig, err := s.SignHash(h, entropy)
	if err != nil {
		return err
	}
	ev.ID = hex.EncodeToString(h[:])
	ev.Sig = sig
	return nil
}

// sign is BIP-340's Sign(sk, m, a) with d and P already prepared.
func (s *Signer) sign(msg, aux [32]byte) ([64]byte, error) {
	d := s.d.Bytes()
	t := taggedHash(tagAux, aux[:])
	for i := range t {
		t[i] ^= d[i]
	}
	nonce := taggedHash(tagNonce, t[:], s.px[:], msg[:])
	var k btcec.ModNScalar
	k.SetBytes(&nonce) // reduced mod n, as the spec's int(rand) mod n
	if k.IsZero() {
		return [64]byte{}, errors.New("bip340: nonce is zero") // negligible probability
	}
	var r btcec.JacobianPoint
	btcec.ScalarBaseMultNonConst(&k, &r)
	r.ToAffine()
	if r.Y.IsOdd() {
		k.Negate()
	}
	rx := r.X.Bytes()
	eh := taggedHash(tagChallenge, rx[:], s.px[:], msg[:])
	var e btcec.ModNScalar
	e.SetBytes(&eh)
	e.Mul(&s.d).Add(&k)
	var sig [64]byte
	copy(sig[:32], rx[:])
	e.PutBytesUnchecked(sig[32:])
	return sig, nil
}

// BIP-340's tagged hashes: SHA-256(SHA-256(tag) ‖ SHA-256(tag) ‖ data).
var (
	tagAux       = tagPrefix("BIP0340/aux")
	tagNonce     = tagPrefix("BIP0340/nonce")
	tagChallenge = tagPrefix("BIP0340/challenge")
)

func tagPrefix(tag string) []byte {
	h := sha256.Sum256([]byte(tag))
	return append(h[:], h[:]...)
}

func taggedHash(prefix []byte, parts ...[]byte) [32]byte {
	h := sha256.New()
	h.Write(prefix)
	for _, p := range parts {
		h.Write(p)
	}
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// signers keeps the Signer of each secret key this process signs with (in practice one or two:
// the agent's, the relay's), so callers that hold only the hex key do not parse it per event.
var signers = keyCache[*Signer]{max: 64}

// SignerFor returns the (cached) Signer of sk.
func SignerFor(sk string) (*Signer, error) {
	return signers.get(sk, func() (*Signer, error) { return NewSigner(sk) })
}

// keyCache memoizes what is costly to derive from a key: a Signer or a conversation key (an
// elliptic-curve multiplication), a parsed public key (a square root). It holds at most max
// entries and, past that, starts over rather than track use: the keys a process uses over and
// over are few (tests, and a relay's authors, are many).
type keyCache[V any] struct {
	mu  sync.Mutex
	m   map[string]V
	max int
}

func (c *keyCache[V]) get(id string, derive func() (V, error)) (V, error) {
	c.mu.Lock()
	v, ok := c.m[id]
	c.mu.Unlock()
	if ok {
		return v, nil
	}
	v, err := derive()
	if err != nil {
		return v, err
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= c.max {
		c.m = map[string]V{}
	}
	c.m[id] = v
	c.mu.Unlock()
	return v, nil
}

// Sign signs ev with sk (hex): pubkey, id and signature, with fresh aux randomness.
func Sign(ev *nostr.Event, sk string) error { return SignEvent(ev, sk, nil) }

// SignEvent signs ev with sk (hex), reading the BIP-340 aux randomness from entropy (crypto/rand
// when nil; tests pass a fixed reader to reproduce published vectors).
func SignEvent(ev *nostr.Event, sk string, entropy io.Reader) error {
	s, err := SignerFor(sk)
	if err != nil {
		return err
	}
	return s.SignEvent(ev, entropy)
}
