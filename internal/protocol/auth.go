package protocol

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/nbd-wtf/go-nostr"
)

// AuthWindow is how far an auth event's created_at may be from the verifier's clock.
const AuthWindow = 60 * time.Second

// NewAuthEvent builds and signs a NIP-42 AUTH event for challenge at relayURL; extra tags (the
// agent's NIP-OA auth tag) follow the relay and challenge tags.
func NewAuthEvent(sk, relayURL, challenge string, now time.Time, extra ...nostr.Tag) (nostr.Event, error) {
	ev := nostr.Event{
		Kind:      KindAuth,
		CreatedAt: nostr.Timestamp(now.Unix()),
		Tags:      append(nostr.Tags{{"relay", relayURL}, {"challenge", challenge}}, extra...),
	}
	err := Sign(&ev, sk)
	return ev, err
}

// VerifyAuthEvent checks a NIP-42 AUTH event: kind, id and signature, exactly one challenge tag
// equal to challenge, exactly one relay tag equal to relayURL (after NormalizeURL), and
// created_at within AuthWindow of now.
func VerifyAuthEvent(ev *nostr.Event, challenge, relayURL string, now time.Time) error {
	if ev.Kind != KindAuth {
		return fmt.Errorf("wrong kind %d", ev.Kind)
	}
	if err := CheckEvent(ev); err != nil {
		return err
	}
	var chs, relays []string
	for _, t := range ev.Tags {
		if len(t) >= 2 && t[0] == "challenge" {
			chs = append(chs, t[1])
		}
		if len(t) >= 2 && t[0] == "relay" {
			relays = append(relays, t[1])
		}
	}
	if len(chs) != 1 || chs[0] != challenge {
		return errors.New("challenge mismatch")
	}
	if len(relays) != 1 || !SameURL(relays[0], relayURL) {
		return errors.New("relay mismatch")
	}
	return checkFresh(ev, now)
}

// CheckEvent verifies an event's id and signature. It hashes the event once for both (go-nostr's
// CheckID and CheckSignature each serialize and hash it), and the author's parsed public key comes
// from a cache: every mention's path starts here.
func CheckEvent(ev *nostr.Event) error {
	if !IsHex64(ev.ID) || !IsHex64(ev.PubKey) || len(ev.Sig) != 128 {
		return errors.New("malformed id, pubkey or sig")
	}
	h := sha256.Sum256(ev.Serialize())
	if hex.EncodeToString(h[:]) != ev.ID {
		return errors.New("bad event id")
	}
	if !VerifyHash(h, ev.PubKey, ev.Sig) {
		return errors.New("bad signature")
	}
	return nil
}

func checkFresh(ev *nostr.Event, now time.Time) error {
	d := now.Sub(ev.CreatedAt.Time())
	if d > AuthWindow || d < -AuthWindow {
		return fmt.Errorf("created_at %d is outside ±%ds", ev.CreatedAt, int(AuthWindow.Seconds()))
	}
	return nil
}

// PayloadHash is the hex SHA-256 of a request body, as NIP-98's payload tag carries it.
func PayloadHash(body []byte) string {
	h := sha256.Sum256(body)
	return hex.EncodeToString(h[:])
}

// SignHTTPAuth returns an Authorization header value ("Nostr <base64>") for a NIP-98 request.
// Each call carries a fresh nonce so identical requests never share an auth event id.
func SignHTTPAuth(sk, rawURL, method string, body []byte, now time.Time) (string, error) {
	ev := nostr.Event{
		Kind:      KindHTTPAuth,
		CreatedAt: nostr.Timestamp(now.Unix()),
		Tags: nostr.Tags{
			{"u", rawURL},
			{"method", strings.ToUpper(method)},
			{"nonce", uuid.NewString()},
			{"payload", PayloadHash(body)},
		},
	}
	if err := Sign(&ev, sk); err != nil {
		return "", err
	}
	raw, err := json.Marshal(ev)
	if err != nil {
		return "", err
	}
	return "Nostr " + base64.StdEncoding.EncodeToString(raw), nil
}

// VerifyHTTPAuth checks a NIP-98 Authorization header against the expected URL, method and body
// and returns the auth event (its id is what a replay guard records).
func VerifyHTTPAuth(header, expectedURL, method string, body []byte, now time.Time) (*nostr.Event, error) {
	b64, ok := strings.CutPrefix(strings.TrimSpace(header), "Nostr ")
	if !ok {
		return nil, errors.New("missing Nostr auth")
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(b64))
	if err != nil {
		return nil, errors.New("NIP-98: auth header is not base64")
	}
	var ev nostr.Event
	if err := json.Unmarshal(raw, &ev); err != nil {
		return nil, errors.New("NIP-98: auth event is not JSON")
	}
	if ev.Kind != KindHTTPAuth {
		return nil, fmt.Errorf("NIP-98: wrong kind %d", ev.Kind)
	}
	if err := CheckEvent(&ev); err != nil {
		return nil, fmt.Errorf("NIP-98: %w", err)
	}
	if err := checkFresh(&ev, now); err != nil {
		return nil, fmt.Errorf("NIP-98: %w", err)
	}
	if u := TagValue(ev.Tags, "u"); !SameURL(u, expectedURL) {
		return nil, fmt.Errorf("NIP-98: url mismatch")
	}
	if m := TagValue(ev.Tags, "method"); !strings.EqualFold(m, method) {
		return nil, fmt.Errorf("NIP-98: method mismatch")
	}
	if HasTag(ev.Tags, "payload") && !strings.EqualFold(TagValue(ev.Tags, "payload"), PayloadHash(body)) {
		return nil, fmt.Errorf("NIP-98: payload hash mismatch")
	}
	return &ev, nil
}
