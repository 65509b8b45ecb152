package protocol

import (
	"errors"
	"fmt"
	"strings"

	"github.com/nbd-wtf/go-nostr"
	"github.com/nbd-wtf/go-nostr/nip19"
)

// ParseSecretKey accepts a 64-hex or nsec secret key and returns it as hex.
func ParseSecretKey(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", errors.New("private key is empty")
	}
	if strings.HasPrefix(s, "nsec1") {
		prefix, v, err := nip19.Decode(s)
		if err != nil || prefix != "nsec" {
			return "", fmt.Errorf("invalid nsec private key")
		}
		s, _ = v.(string)
	}
	s = strings.ToLower(s)
	if !IsHex64(s) {
		return "", errors.New("private key must be 64 hex characters or nsec1…")
	}
	if _, err := nostr.GetPublicKey(s); err != nil {
		return "", fmt.Errorf("invalid private key: %w", err)
	}
	return s, nil
}

// ParsePubkey accepts a 64-hex or npub public key and returns it as lowercase hex.
func ParsePubkey(s string) (string, error) {
	s = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(s), "nostr:"))
	if strings.HasPrefix(s, "npub1") {
		prefix, v, err := nip19.Decode(s)
		if err != nil || prefix != "npub" {
			return "", fmt.Errorf("invalid npub %q", s)
		}
		s, _ = v.(string)
	}
	s = strings.ToLower(s)
	if !IsHex64(s) {
		return "", fmt.Errorf("invalid pubkey %q: want 64 hex characters or npub1…", s)
	}
	return s, nil
}

// PublicKey returns the hex public key of a hex secret key.
func PublicKey(sk string) (string, error) { return nostr.GetPublicKey(sk) }

// Npub encodes a hex public key as npub (empty on error).
func Npub(pk string) string {
	s, _ := nip19.EncodePublicKey(pk)
	return s
}

// Nsec encodes a hex secret key as nsec (empty on error).
func Nsec(sk string) string {
	s, _ := nip19.EncodePrivateKey(sk)
	return s
}
