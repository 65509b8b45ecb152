package protocol

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"

	"github.com/nbd-wtf/go-nostr/nip44"
)

// NIP44MaxPlaintext is the largest plaintext NIP-44 v2 can carry (bytes).
const NIP44MaxPlaintext = nip44.MaxPlaintextSize

// ConversationKey returns the NIP-44 v2 conversation key between a secret key and the other
// side's public key (both lowercase hex). It is symmetric: (skA, pkB) and (skB, pkA) agree.
// go-nostr's nip44 feeds HKDF-extract the raw ECDH x-coordinate, as the spec requires; the
// NIP-AE vector (K_c for keys …01/…02) pins that. Keys are cached: the pair rarely changes (the
// agent and its owner), and each one costs an elliptic-curve multiplication that a turn metric
// paid per turn.
func ConversationKey(sk, pk string) ([32]byte, error) {
	return convKeys.get(sk+pk, func() ([32]byte, error) { return conversationKey(sk, pk) })
}

var convKeys = keyCache[[32]byte]{max: 1024}

func conversationKey(sk, pk string) ([32]byte, error) {
	if !IsHex64(sk) {
		return [32]byte{}, errors.New("secret key must be 64 lowercase hex characters")
	}
	if !IsHex64(pk) {
		return [32]byte{}, fmt.Errorf("public key %q must be 64 lowercase hex characters", pk)
	}
	k, err := nip44.GenerateConversationKey(pk, sk)
	if err != nil {
		return [32]byte{}, fmt.Errorf("public key %s is not a valid secp256k1 key", pk)
	}
	return k, nil
}

// Encrypt44 encrypts plaintext with NIP-44 v2 under key. The 32-byte nonce is read from entropy
// (crypto/rand when nil); tests pass a fixed reader to reproduce published vectors. (go-nostr
// replaces an all-zero nonce with a random one.)
func Encrypt44(plaintext string, key [32]byte, entropy io.Reader) (string, error) {
	if len(plaintext) == 0 || len(plaintext) > NIP44MaxPlaintext {
		return "", fmt.Errorf("NIP-44 plaintext must be 1..%d bytes, got %d", NIP44MaxPlaintext, len(plaintext))
	}
	var nonce [32]byte
	if err := readEntropy(entropy, nonce[:]); err != nil {
		return "", err
	}
	return nip44.Encrypt(plaintext, key, nip44.WithCustomNonce(nonce[:]))
}

// Decrypt44 decrypts a NIP-44 v2 payload under key.
func Decrypt44(payload string, key [32]byte) (string, error) {
	pt, err := nip44.Decrypt(payload, key)
	if err != nil {
		return "", fmt.Errorf("NIP-44 decrypt: %w", err)
	}
	return pt, nil
}

func readEntropy(r io.Reader, buf []byte) error {
	if r == nil {
		r = rand.Reader
	}
	if _, err := io.ReadFull(r, buf); err != nil {
		return fmt.Errorf("read randomness: %w", err)
	}
	return nil
}
