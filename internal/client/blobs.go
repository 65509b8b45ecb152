package client

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"time"

	"github.com/buzz-harness/buzz/internal/protocol"
)

// BlobDescriptor is the relay's answer to an upload (Blossom BUD-02).
type BlobDescriptor struct {
	URL      string `json:"url"`
	SHA256   string `json:"sha256"`
	Size     int64  `json:"size"`
	Type     string `json:"type"`
	Uploaded int64  `json:"uploaded"`
}

// blobTokenTTL is how long the Blossom tokens signed here live: one request's worth.
const blobTokenTTL = 5 * time.Minute

// Upload stores data on the relay as one blob (PUT /upload), with typ as its MIME type ("" lets
// the relay sniff it), authorised by a kind-24242 token naming its hash. Like the bridge's
// other calls it fails over along the relays and retries what may pass; repeating an upload is
// harmless, as the same bytes are the same blob.
func (b *Bridge) Upload(ctx context.Context, data []byte, typ string) (BlobDescriptor, error) {
	if b.pk == "" {
		return BlobDescriptor{}, errors.New("sign request: invalid private key")
	}
	sum := sha256.Sum256(data)
	sha := hex.EncodeToString(sum[:])
	raw, err := b.retry(ctx, func() ([]byte, error) {
		return b.anyRelay(ctx, func(base string) ([]byte, error) {
			auth, err := protocol.SignBlobAuth(b.sk, protocol.BlobUpload, []string{sha}, "", b.now(), blobTokenTTL)
			if err != nil {
				return nil, fmt.Errorf("sign request: %w", err)
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodPut, base+"/upload", bytes.NewReader(data))
			if err != nil {
				return nil, fmt.Errorf("build request: %w", err)
			}
			req.Header.Set("Authorization", auth)
			req.Header.Set("X-SHA-256", sha)
			if typ != "" {
				req.Header.Set("Content-Type", typ)
			}
			raw, _, err := b.send(ctx, req, maxBodyBytes)
			return raw, err
		})
	})
	if err != nil {
		return BlobDescriptor{}, err
	}
	var d BlobDescriptor
	if err := json.Unmarshal(raw, &d); err != nil {
		return BlobDescriptor{}, fmt.Errorf("decode /upload answer: %w", err)
	}
	if d.SHA256 != sha {
		return BlobDescriptor{}, fmt.Errorf("relay stored %q, not the uploaded bytes (%s)", d.SHA256, sha)
	}
	return d, nil
}

// blobPathRE is a blob path as the relay serves it: /media/<sha256> or /<sha256>, with an
// optional extension.
var blobPathRE = regexp.MustCompile(`^/(?:media/)?([0-9a-f]{64})(?:\.[a-z0-9]{1,8})?$`)

// BlobHash returns the SHA-256 a blob URL names, if rawURL is a blob URL on one of the bridge's
// relays (same scheme, host and port): only those are fetched with this identity.
func (b *Bridge) BlobHash(rawURL string) (string, bool) {
	u, err := url.Parse(rawURL)
	if err != nil || u.RawQuery != "" || u.User != nil {
		return "", false
	}
	m := blobPathRE.FindStringSubmatch(u.Path)
	if m == nil {
		return "", false
	}
	for _, base := range b.bases {
		if protocol.SameURL(u.Scheme+"://"+u.Host, base) {
			return m[1], true
		}
	}
	return "", false
}

// ErrBlobTooLarge means a blob is bigger than the caller's limit.
var ErrBlobTooLarge = errors.New("blob exceeds the size limit")

// FetchBlob reads the blob at rawURL from the relay it is on, which must be one of the
// bridge's (BlobHash): at most maxBytes (ErrBlobTooLarge beyond), authorised by a get token
// naming only this blob, and only bytes that hash to the URL's SHA-256 are returned. It returns
// the blob and the Content-Type the relay gave.
func (b *Bridge) FetchBlob(ctx context.Context, rawURL string, maxBytes int64) ([]byte, string, error) {
	sha, ok := b.BlobHash(rawURL)
	if !ok {
		return nil, "", fmt.Errorf("%s is not a blob URL on this relay", rawURL)
	}
	var typ string
	data, err := b.retry(ctx, func() ([]byte, error) {
		auth, err := protocol.SignBlobAuth(b.sk, protocol.BlobGet, []string{sha}, "", b.now(), blobTokenTTL)
		if err != nil {
			return nil, fmt.Errorf("sign request: %w", err)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
		if err != nil {
			return nil, fmt.Errorf("build request: %w", err)
		}
		req.Header.Set("Authorization", auth)
		var raw []byte
		raw, typ, err = b.send(ctx, req, maxBytes+1)
		return raw, err
	})
	if err != nil {
		return nil, "", err
	}
	if int64(len(data)) > maxBytes {
		return nil, "", ErrBlobTooLarge
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != sha {
		return nil, "", fmt.Errorf("blob %s: the relay's bytes do not match the hash", sha)
	}
	return data, typ, nil
}
