package protocol

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nbd-wtf/go-nostr"
)

// Blossom authorization verbs (BUD-11 t tag) this project uses.
const (
	BlobGet    = "get"
	BlobUpload = "upload"
)

// BlobAuth is what a verified Blossom authorization (kind 24242) grants: its signer, and the
// blobs (x tags) and servers (server tags) it is scoped to; no x tag means any blob, no server
// tag any server. Which scope an endpoint requires is the server's policy, not checked here.
type BlobAuth struct {
	Pubkey  string
	Hashes  []string // lowercase hex
	Servers []string // lowercase domain names (a port, if one was given, kept)
	Expires time.Time
}

// NamesBlob reports whether an x tag names sha.
func (a BlobAuth) NamesBlob(sha string) bool { return slices.Contains(a.Hashes, sha) }

// NamesServer reports whether a server tag names one of hosts (lowercase host or host:port).
func (a BlobAuth) NamesServer(hosts ...string) bool {
	for _, h := range hosts {
		if slices.Contains(a.Servers, h) {
			return true
		}
	}
	return false
}

// SignBlobAuth returns an Authorization header value for a Blossom request: a kind-24242 event
// with t=verb, one x tag per hash, a server tag when server is set, expiring ttl after now,
// encoded as BUD-11 asks (base64url without padding).
func SignBlobAuth(sk, verb string, hashes []string, server string, now time.Time, ttl time.Duration) (string, error) {
	ev := nostr.Event{
		Kind:      KindBlobAuth,
		CreatedAt: nostr.Timestamp(now.Unix()),
		Content:   blobAuthContent(verb),
		Tags:      nostr.Tags{{"t", verb}, {"expiration", strconv.FormatInt(now.Add(ttl).Unix(), 10)}},
	}
	for _, h := range hashes {
		ev.Tags = append(ev.Tags, nostr.Tag{"x", h})
	}
	if server != "" {
		ev.Tags = append(ev.Tags, nostr.Tag{"server", strings.ToLower(server)})
	}
	if err := Sign(&ev, sk); err != nil {
		return "", err
	}
	raw, err := json.Marshal(ev)
	if err != nil {
		return "", err
	}
	return "Nostr " + base64.RawURLEncoding.EncodeToString(raw), nil
}

// blobAuthContent is the human-readable line BUD-11 requires.
func blobAuthContent(verb string) string {
	switch verb {
	case BlobUpload:
		return "Upload blob"
	case BlobGet:
		return "Get blob"
	}
	return "Blob " + verb
}

// VerifyBlobAuth checks a Blossom Authorization header for verb (BUD-11): kind 24242, a valid id
// and signature, created_at not after now (AuthWindow of clock skew allowed), exactly one
// expiration tag and it after now, and a t tag equal to verb.
func VerifyBlobAuth(header, verb string, now time.Time) (BlobAuth, error) {
	ev, err := decodeBlobAuth(header)
	if err != nil {
		return BlobAuth{}, err
	}
	if ev.Kind != KindBlobAuth {
		return BlobAuth{}, fmt.Errorf("blossom auth: wrong kind %d", ev.Kind)
	}
	if err := CheckEvent(ev); err != nil {
		return BlobAuth{}, fmt.Errorf("blossom auth: %w", err)
	}
	if ev.CreatedAt.Time().After(now.Add(AuthWindow)) {
		return BlobAuth{}, errors.New("blossom auth: created_at is in the future")
	}
	a := BlobAuth{Pubkey: ev.PubKey}
	expirations, verbOK := 0, false
	for _, t := range ev.Tags {
		if len(t) < 2 {
			continue
		}
		switch t[0] {
		case "expiration":
			expirations++
			sec, err := strconv.ParseInt(t[1], 10, 64)
			if err != nil {
				return BlobAuth{}, errors.New("blossom auth: malformed expiration")
			}
			a.Expires = time.Unix(sec, 0)
		case "t":
			verbOK = verbOK || t[1] == verb
		case "x":
			if h := hexHash(t[1]); h != "" {
				a.Hashes = append(a.Hashes, h)
			}
		case "server":
			a.Servers = append(a.Servers, strings.ToLower(strings.TrimSpace(t[1])))
		}
	}
	switch {
	case expirations != 1:
		return BlobAuth{}, errors.New("blossom auth: needs exactly one expiration tag")
	case !a.Expires.After(now):
		return BlobAuth{}, errors.New("blossom auth: expired")
	case !verbOK:
		return BlobAuth{}, fmt.Errorf("blossom auth: no t tag %q", verb)
	}
	return a, nil
}

// IsBlobAuth reports whether an Authorization header carries a kind-24242 event (rather than
// NIP-98's 27235); false for anything undecodable.
func IsBlobAuth(header string) bool {
	ev, err := decodeBlobAuth(header)
	return err == nil && ev.Kind == KindBlobAuth
}

// decodeBlobAuth reads "Nostr <base64 event>". BUD-11 asks for base64url without padding;
// clients written to its earlier drafts send standard base64, so every alphabet is accepted.
func decodeBlobAuth(header string) (*nostr.Event, error) {
	b64, ok := strings.CutPrefix(strings.TrimSpace(header), "Nostr ")
	if !ok {
		return nil, errors.New("missing Nostr auth")
	}
	b64 = strings.TrimSpace(b64)
	var raw []byte
	var err error
	for _, enc := range []*base64.Encoding{base64.RawURLEncoding, base64.URLEncoding, base64.StdEncoding, base64.RawStdEncoding} {
		if raw, err = enc.DecodeString(b64); err == nil {
			break
		}
	}
	if err != nil {
		return nil, errors.New("blossom auth: header is not base64")
	}
	var ev nostr.Event
	if err := json.Unmarshal(raw, &ev); err != nil {
		return nil, errors.New("blossom auth: not a JSON event")
	}
	return &ev, nil
}
