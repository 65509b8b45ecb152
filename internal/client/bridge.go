// Package client talks to a Buzz relay: Bridge is the NIP-98-signed HTTP bridge (/query, /count,
// /events) used by the CLI and for one-shot reads, and Live is the long-running WebSocket session
// (NIP-42 auth, desired-state subscriptions, reconnect with since, dedup) the harness subscribes with.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/nbd-wtf/go-nostr"
)

// Default retry policy: 3 attempts, full-jitter waits capped at 0.5 s then 1.5 s (upstream CLI).
const (
	DefaultAttempts = 3
	maxRetryAfter   = 30 * time.Second
	maxBodyBytes    = 64 << 20
)

// Bridge is the relay's HTTP bridge client (NIP-98 signed, retries with backoff).
// The zero value is not usable; build one with NewBridge and adjust the exported fields
// before the first call.
type Bridge struct {
	// HTTPClient sends the requests; NewBridge sets one with a 30 s timeout.
	HTTPClient *http.Client
	// AuthTag, when set, is the signer's NIP-OA attestation (JSON array, BUZZ_AUTH_TAG form): it
	// is sent as the x-auth-tag header and put, exactly, on every event Publish signs.
	AuthTag string
	// Attempts is the total number of tries for a retryable failure (<=1 disables retries).
	Attempts int
	// Backoff returns the wait before retry number attempt (1-based). nil = full jitter over
	// 0.5 s, 1.5 s, 4.5 s…
	Backoff func(attempt int) time.Duration
	// Now is the clock used for NIP-98 created_at; nil = time.Now.
	Now func() time.Time

	bases []string     // bridge base URLs, in the order given
	cur   atomic.Int32 // index into bases of the relay that last answered
	sk    string
	pk    string
}

// MaxConnsPerRelay bounds a bridge's connections to one relay; requests beyond it wait for one.
// Without it a burst (buzz-acp looking up membership of a thousand channels it was just added
// to) opened a connection per request, and with Go's default of two idle connections kept
// per host, the few requests of each mention (👀, its removal, the turn metric) dialled anew.
const MaxConnsPerRelay = 16

// NewBridge returns a client for the bridge of relayURL (ws, wss, http or https) that signs as
// secretKeyHex. An invalid key is reported by the first request, not here. relayURL may list
// several relays comma-separated: a request that cannot reach one goes to the next at once,
// and later requests start at the relay that last answered.
func NewBridge(relayURL, secretKeyHex string) *Bridge {
	pk, _ := nostr.GetPublicKey(secretKeyHex)
	parts := SplitRelayURLs(relayURL)
	if len(parts) == 0 {
		parts = []string{relayURL}
	}
	bases := make([]string, len(parts))
	for i, p := range parts {
		bases[i] = protocol.HTTPBase(p)
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxConnsPerHost, t.MaxIdleConnsPerHost = MaxConnsPerRelay, MaxConnsPerRelay
	return &Bridge{
		HTTPClient: &http.Client{Timeout: 30 * time.Second, Transport: t},
		Attempts:   DefaultAttempts,
		bases:      bases,
		sk:         secretKeyHex,
		pk:         pk,
	}
}

// PublicKey returns the signer's hex public key ("" if the secret key is invalid).
func (b *Bridge) PublicKey() string { return b.pk }

// SecretKey returns the signer's hex secret key.
func (b *Bridge) SecretKey() string { return b.sk }

// BaseURL returns the bridge's HTTP base URL (no trailing slash): with several relays, the one
// that last answered.
func (b *Bridge) BaseURL() string { return b.bases[b.cur.Load()] }

// PublishResult is the relay's answer to POST /events.
type PublishResult struct {
	EventID  string `json:"event_id"`
	Accepted bool   `json:"accepted"`
	Message  string `json:"message"`
}

// Filter is a NIP-01 filter plus Buzz extension fields, marshalled as one JSON object.
type Filter struct {
	nostr.Filter
	// BeforeID is the keyset cursor "before_id" (used together with Until).
	BeforeID string
	// DepthLimit ("depth_limit") asks the relay's thread path for replies up to this depth;
	// it needs exactly one #e (the thread root). 0 = omitted.
	DepthLimit int
}

type filterExt struct {
	BeforeID   string `json:"before_id,omitempty"`
	DepthLimit int    `json:"depth_limit,omitempty"`
}

// MarshalJSON writes the NIP-01 fields and the extension fields into one object. It is needed
// because the embedded nostr.Filter's own MarshalJSON would otherwise drop the extensions.
func (f Filter) MarshalJSON() ([]byte, error) {
	raw, err := f.Filter.MarshalJSON()
	if err != nil {
		return nil, err
	}
	ext, err := json.Marshal(filterExt{BeforeID: f.BeforeID, DepthLimit: f.DepthLimit})
	if err != nil || string(ext) == "{}" {
		return raw, err
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) < 2 || raw[0] != '{' || raw[len(raw)-1] != '}' {
		return nil, errors.New("filter JSON is not an object")
	}
	out := append([]byte{}, raw[:len(raw)-1]...)
	if len(out) > 1 {
		out = append(out, ',')
	}
	out = append(out, ext[1:]...) // ext without its opening brace, keeps the closing one
	return out, nil
}

// UnmarshalJSON reads the NIP-01 fields and the extension fields.
func (f *Filter) UnmarshalJSON(data []byte) error {
	if err := f.Filter.UnmarshalJSON(data); err != nil {
		return err
	}
	var ext filterExt
	if err := json.Unmarshal(data, &ext); err != nil {
		return err
	}
	f.BeforeID, f.DepthLimit = ext.BeforeID, ext.DepthLimit
	return nil
}

// F wraps plain NIP-01 filters as bridge filters.
func F(fs ...nostr.Filter) []Filter {
	out := make([]Filter, len(fs))
	for i, f := range fs {
		out[i] = Filter{Filter: f}
	}
	return out
}

// HTTPError is a non-2xx answer from the bridge. Message is the relay's {"error": …} text, or the
// raw body when it is not that shape.
type HTTPError struct {
	Status  int
	Message string
	// RetryAfter is the relay's "retry in Ns" hint on 429, zero when absent.
	RetryAfter time.Duration
}

func (e *HTTPError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("relay answered HTTP %d", e.Status)
	}
	return fmt.Sprintf("relay answered HTTP %d: %s", e.Status, e.Message)
}

// IsAuthError reports whether the relay refused the caller's identity (HTTP 401/403).
func IsAuthError(err error) bool {
	var he *HTTPError
	return errors.As(err, &he) && (he.Status == http.StatusUnauthorized || he.Status == http.StatusForbidden)
}

// IsRetryable reports whether trying the same request again may succeed: HTTP 429/502/503/504,
// connection failures and timeouts. Cancellation by the caller is not retryable.
func IsRetryable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var he *HTTPError
	if errors.As(err, &he) {
		switch he.Status {
		case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return true
		}
		return false
	}
	var te *TransportError
	return errors.As(err, &te)
}

// TransportError is a failure to reach the relay or to read its answer (connect refused, reset,
// timeout, truncated body).
type TransportError struct{ Err error }

func (e *TransportError) Error() string { return "relay unreachable: " + e.Err.Error() }
func (e *TransportError) Unwrap() error { return e.Err }

// Query runs POST /query and returns the events in the relay's order (per filter, newest first).
func (b *Bridge) Query(ctx context.Context, filters ...Filter) ([]nostr.Event, error) {
	if filters == nil {
		filters = []Filter{}
	}
	body, err := json.Marshal(filters)
	if err != nil {
		return nil, fmt.Errorf("encode filters: %w", err)
	}
	raw, err := b.post(ctx, "/query", body)
	if err != nil {
		return nil, err
	}
	var evs []nostr.Event
	if err := json.Unmarshal(raw, &evs); err != nil {
		return nil, fmt.Errorf("decode /query answer: %w", err)
	}
	return evs, nil
}

// Count runs POST /count.
func (b *Bridge) Count(ctx context.Context, filters ...Filter) (int64, error) {
	if filters == nil {
		filters = []Filter{}
	}
	body, err := json.Marshal(filters)
	if err != nil {
		return 0, fmt.Errorf("encode filters: %w", err)
	}
	raw, err := b.post(ctx, "/count", body)
	if err != nil {
		return 0, err
	}
	var out struct {
		Count int64 `json:"count"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return 0, fmt.Errorf("decode /count answer: %w", err)
	}
	return out.Count, nil
}

// Publish submits ev with POST /events. If ev.Sig is empty it is signed first (PubKey, ID, Sig
// set; CreatedAt set to now when zero). A relay refusal at HTTP 200 comes back as
// Accepted=false with a nil error; non-2xx answers are *HTTPError.
func (b *Bridge) Publish(ctx context.Context, ev *nostr.Event) (PublishResult, error) {
	if err := AddAuthTag(ev, b.AuthTag); err != nil {
		return PublishResult{}, err
	}
	if err := SignIfUnsigned(ev, b.sk, b.now()); err != nil {
		return PublishResult{}, err
	}
	body, err := json.Marshal(ev)
	if err != nil {
		return PublishResult{}, fmt.Errorf("encode event: %w", err)
	}
	raw, err := b.post(ctx, "/events", body)
	if err != nil {
		return PublishResult{}, err
	}
	var res PublishResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return PublishResult{}, fmt.Errorf("decode /events answer: %w", err)
	}
	if res.EventID == "" {
		res.EventID = ev.ID
	}
	return res, nil
}

// SignIfUnsigned signs ev with sk unless it already carries a signature.
func SignIfUnsigned(ev *nostr.Event, sk string, now time.Time) error {
	if ev.Sig != "" {
		return nil
	}
	if ev.CreatedAt == 0 {
		ev.CreatedAt = nostr.Timestamp(now.Unix())
	}
	if err := protocol.Sign(ev, sk); err != nil {
		return fmt.Errorf("sign event: invalid private key")
	}
	return nil
}

func (b *Bridge) now() time.Time {
	if b.Now != nil {
		return b.Now()
	}
	return time.Now()
}

// post sends body to path, re-signing NIP-98 on every attempt (the relay keeps a replay set of
// auth event ids, and each token carries a fresh nonce anyway).
func (b *Bridge) post(ctx context.Context, path string, body []byte) ([]byte, error) {
	return b.retry(ctx, func() ([]byte, error) {
		return b.anyRelay(ctx, func(base string) ([]byte, error) { return b.postOnce(ctx, base, path, body) })
	})
}

// retry runs once until it succeeds, fails for good, or has had Attempts tries, waiting between
// tries as the relay asks (429's hint) or by backoff.
func (b *Bridge) retry(ctx context.Context, once func() ([]byte, error)) ([]byte, error) {
	attempts := max(b.Attempts, 1)
	var lastErr error
	for attempt := 1; ; attempt++ {
		raw, err := once()
		if err == nil {
			return raw, nil
		}
		lastErr = err
		if attempt >= attempts || !IsRetryable(err) || ctx.Err() != nil {
			return nil, lastErr
		}
		wait := b.backoff(attempt)
		var he *HTTPError
		if errors.As(err, &he) && he.RetryAfter > 0 {
			wait = min(he.RetryAfter, maxRetryAfter)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, lastErr
		case <-t.C:
		}
	}
}

func (b *Bridge) backoff(attempt int) time.Duration {
	if b.Backoff != nil {
		return b.Backoff(attempt)
	}
	return FullJitter(attempt)
}

// FullJitter is the bridge's default retry wait: uniform in [0, 0.5 s·3^(attempt-1)].
func FullJitter(attempt int) time.Duration {
	ceil := 500 * time.Millisecond
	for i := 1; i < attempt && ceil < maxRetryAfter; i++ {
		ceil *= 3
	}
	return time.Duration(rand.Int64N(int64(ceil) + 1))
}

// anyRelay sends once to the current relay and, when it cannot be reached, to each other listed
// relay in turn; the first that answers becomes current.
func (b *Bridge) anyRelay(ctx context.Context, once func(base string) ([]byte, error)) ([]byte, error) {
	start := int(b.cur.Load())
	var err error
	for i := range b.bases {
		idx := (start + i) % len(b.bases)
		var raw []byte
		raw, err = once(b.bases[idx])
		var te *TransportError
		if !errors.As(err, &te) { // it answered (or we could not even sign)
			b.cur.Store(int32(idx))
			return raw, err
		}
		if ctx.Err() != nil {
			return nil, err
		}
	}
	return nil, err
}

func (b *Bridge) postOnce(ctx context.Context, base, path string, body []byte) ([]byte, error) {
	if b.pk == "" {
		return nil, errors.New("sign request: invalid private key")
	}
	url := base + path
	auth, err := protocol.SignHTTPAuth(b.sk, url, http.MethodPost, body, b.now())
	if err != nil {
		return nil, fmt.Errorf("sign request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Authorization", auth)
	raw, _, err := b.send(ctx, req, maxBodyBytes)
	return raw, err
}

// send does one request (with the x-auth-tag header when set) and returns the answer's body,
// at most limit bytes of it, and its Content-Type; a failure to connect or read is a
// *TransportError, a non-2xx answer an *HTTPError.
func (b *Bridge) send(ctx context.Context, req *http.Request, limit int64) ([]byte, string, error) {
	if b.AuthTag != "" {
		req.Header.Set("X-Auth-Tag", b.AuthTag)
	}
	hc := b.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, "", ctx.Err()
		}
		return nil, "", &TransportError{Err: unwrapURLError(err)}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	if err != nil {
		return nil, "", &TransportError{Err: fmt.Errorf("read answer: %w", err)}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, "", newHTTPError(resp, raw)
	}
	return raw, resp.Header.Get("Content-Type"), nil
}

var retryInRE = regexp.MustCompile(`retry in (\d+)\s*s`)

func newHTTPError(resp *http.Response, raw []byte) *HTTPError {
	he := &HTTPError{Status: resp.StatusCode}
	var body struct {
		Error   string `json:"error"`
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &body) == nil && (body.Error != "" || body.Message != "") {
		he.Message = body.Error
		if he.Message == "" {
			he.Message = body.Message
		}
	} else {
		he.Message = strings.TrimSpace(string(raw))
		if len(he.Message) > 300 {
			he.Message = he.Message[:300] + "…"
		}
	}
	if m := retryInRE.FindStringSubmatch(he.Message); m != nil {
		if n, err := strconv.Atoi(m[1]); err == nil {
			he.RetryAfter = time.Duration(n) * time.Second
		}
	} else if s := resp.Header.Get("Retry-After"); s != "" {
		if n, err := strconv.Atoi(s); err == nil {
			he.RetryAfter = time.Duration(n) * time.Second
		}
	}
	return he
}

// unwrapURLError keeps the useful part of *url.Error ("dial tcp …: connection refused").
func unwrapURLError(err error) error {
	var ne net.Error
	if errors.As(err, &ne) {
		return ne
	}
	return err
}
