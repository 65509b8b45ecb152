package client

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/nbd-wtf/go-nostr"
)

// bridgeServer is a fake relay bridge on a real socket that verifies NIP-98 like the relay does
// and records every request.
type bridgeServer struct {
	*httptest.Server
	mu      sync.Mutex
	reqs    []recordedReq
	respond func(n int, r recordedReq) (int, string) // n = 1-based request number
}

type recordedReq struct {
	Path   string
	Body   []byte
	AuthID string
	Err    error // NIP-98 verification result
}

func newBridgeServer(t *testing.T, respond func(n int, r recordedReq) (int, string)) *bridgeServer {
	t.Helper()
	s := &bridgeServer{respond: respond}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rec := recordedReq{Path: r.URL.Path, Body: body}
		ev, err := protocol.VerifyHTTPAuth(r.Header.Get("Authorization"), "http://"+r.Host+r.URL.Path, r.Method, body, time.Now())
		rec.Err = err
		if ev != nil {
			rec.AuthID = ev.ID
		}
		s.mu.Lock()
		s.reqs = append(s.reqs, rec)
		n := len(s.reqs)
		s.mu.Unlock()
		if err != nil {
			w.WriteHeader(http.StatusUnauthorized)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
			return
		}
		status, out := s.respond(n, rec)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, out)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *bridgeServer) requests() []recordedReq {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]recordedReq(nil), s.reqs...)
}

func noWait(int) time.Duration { return 0 }

func TestBridgeQuerySignsNIP98ForExactURLMethodAndBody(t *testing.T) {
	srv := newBridgeServer(t, func(int, recordedReq) (int, string) { return 200, "[]" })
	b := NewBridge(srv.URL, nostr.GeneratePrivateKey())
	if _, err := b.Query(context.Background(), F(nostr.Filter{Kinds: []int{9}})...); err != nil {
		t.Fatalf("Query: %v", err)
	}
	reqs := srv.requests()
	if len(reqs) != 1 || reqs[0].Err != nil || reqs[0].Path != "/query" {
		t.Fatalf("requests = %+v, want one verified /query", reqs)
	}
	if got := string(reqs[0].Body); got != `[{"kinds":[9]}]` {
		t.Fatalf("body = %s", got)
	}
}

func TestBridgeAcceptsWebSocketRelayURL(t *testing.T) {
	srv := newBridgeServer(t, func(int, recordedReq) (int, string) { return 200, `{"count":7}` })
	b := NewBridge("ws"+strings.TrimPrefix(srv.URL, "http")+"/", nostr.GeneratePrivateKey())
	n, err := b.Count(context.Background(), F(nostr.Filter{Kinds: []int{9}})...)
	if err != nil || n != 7 {
		t.Fatalf("Count = %d, %v; want 7", n, err)
	}
	if r := srv.requests(); r[0].Path != "/count" || r[0].Err != nil {
		t.Fatalf("request = %+v", r[0])
	}
}

func TestBridgeRetriesUnavailableWithFreshlySignedAuth(t *testing.T) {
	srv := newBridgeServer(t, func(n int, _ recordedReq) (int, string) {
		if n < 3 {
			return 503, `{"error":"admission unavailable"}`
		}
		return 200, "[]"
	})
	b := NewBridge(srv.URL, nostr.GeneratePrivateKey())
	b.Backoff = noWait
	if _, err := b.Query(context.Background()); err != nil {
		t.Fatalf("Query after two 503s: %v", err)
	}
	reqs := srv.requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	seen := map[string]bool{}
	for _, r := range reqs {
		if r.Err != nil || seen[r.AuthID] {
			t.Fatalf("auth not fresh per attempt: %+v", reqs)
		}
		seen[r.AuthID] = true
	}
}

func TestBridgeGivesUpAfterThreeAttempts(t *testing.T) {
	srv := newBridgeServer(t, func(int, recordedReq) (int, string) { return 502, "bad gateway" })
	b := NewBridge(srv.URL, nostr.GeneratePrivateKey())
	b.Backoff = noWait
	_, err := b.Query(context.Background())
	var he *HTTPError
	if !errors.As(err, &he) || he.Status != 502 || he.Message != "bad gateway" {
		t.Fatalf("err = %v, want HTTPError 502 with raw body", err)
	}
	if !IsRetryable(err) || IsAuthError(err) {
		t.Fatalf("502 should be retryable, not auth")
	}
	if n := len(srv.requests()); n != 3 {
		t.Fatalf("%d requests, want 3", n)
	}
}

func TestBridgeDoesNotRetryRejectedRequest(t *testing.T) {
	srv := newBridgeServer(t, func(int, recordedReq) (int, string) {
		return 400, `{"error":"invalid: too many filters"}`
	})
	b := NewBridge(srv.URL, nostr.GeneratePrivateKey())
	b.Backoff = noWait
	_, err := b.Query(context.Background())
	var he *HTTPError
	if !errors.As(err, &he) || he.Status != 400 || he.Message != "invalid: too many filters" {
		t.Fatalf("err = %v", err)
	}
	if IsRetryable(err) {
		t.Fatal("400 must not be retryable")
	}
	if n := len(srv.requests()); n != 1 {
		t.Fatalf("%d requests, want 1", n)
	}
}

func TestBridgeReportsRelayAuthRefusalAsAuthError(t *testing.T) {
	for _, status := range []int{401, 403} {
		srv := newBridgeServer(t, func(int, recordedReq) (int, string) { return status, `{"error":"restricted: nope"}` })
		b := NewBridge(srv.URL, nostr.GeneratePrivateKey())
		_, err := b.Query(context.Background())
		if !IsAuthError(err) || IsRetryable(err) {
			t.Fatalf("status %d: err = %v, want non-retryable auth error", status, err)
		}
	}
}

func TestBridgeConnectionRefusedIsRetryableTransportError(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	b := NewBridge(url, nostr.GeneratePrivateKey())
	var waits []int
	b.Backoff = func(n int) time.Duration { waits = append(waits, n); return 0 }
	_, err := b.Query(context.Background())
	var te *TransportError
	if !errors.As(err, &te) || !IsRetryable(err) {
		t.Fatalf("err = %v, want retryable TransportError", err)
	}
	if len(waits) != 2 || waits[0] != 1 || waits[1] != 2 {
		t.Fatalf("backoff attempts = %v, want [1 2]", waits)
	}
}

func TestBridgeReadsRetryInHintFromRateLimit(t *testing.T) {
	resp := &http.Response{StatusCode: 429, Header: http.Header{}}
	he := newHTTPError(resp, []byte(`{"error":"rate-limited: quota exceeded; retry in 7s"}`))
	if he.RetryAfter != 7*time.Second || he.Message != "rate-limited: quota exceeded; retry in 7s" {
		t.Fatalf("got %+v", he)
	}
}

func TestBridgePublishSignsUnsignedEvent(t *testing.T) {
	var got nostr.Event
	srv := newBridgeServer(t, func(_ int, r recordedReq) (int, string) {
		_ = json.Unmarshal(r.Body, &got)
		return 200, `{"event_id":"` + got.ID + `","accepted":true,"message":""}`
	})
	sk := nostr.GeneratePrivateKey()
	b := NewBridge(srv.URL, sk)
	ev := &nostr.Event{Kind: 9, Content: "hi", Tags: nostr.Tags{{"h", "6f1c1d3e-8c55-4a53-9a9b-1a2b3c4d5e6f"}}}
	res, err := b.Publish(context.Background(), ev)
	if err != nil || !res.Accepted || res.EventID != ev.ID {
		t.Fatalf("Publish = %+v, %v", res, err)
	}
	if err := protocol.CheckEvent(&got); err != nil || got.PubKey != b.PublicKey() || got.CreatedAt == 0 {
		t.Fatalf("relay got a badly signed event: %+v (%v)", got, err)
	}
}

func TestBridgePublishLeavesSignedEventUntouched(t *testing.T) {
	srv := newBridgeServer(t, func(int, recordedReq) (int, string) {
		return 200, `{"event_id":"x","accepted":false,"message":"restricted: not a channel member"}`
	})
	other := nostr.GeneratePrivateKey()
	ev := &nostr.Event{Kind: 9, Content: "hi", CreatedAt: 1700000000}
	if err := ev.Sign(other); err != nil {
		t.Fatal(err)
	}
	before := *ev
	b := NewBridge(srv.URL, nostr.GeneratePrivateKey())
	res, err := b.Publish(context.Background(), ev)
	if err != nil || res.Accepted || res.Message != "restricted: not a channel member" {
		t.Fatalf("Publish = %+v, %v", res, err)
	}
	if ev.ID != before.ID || ev.PubKey != before.PubKey || ev.Sig != before.Sig {
		t.Fatal("a signed event was re-signed")
	}
}

func TestBridgeInvalidKeyFailsWithoutSending(t *testing.T) {
	srv := newBridgeServer(t, func(int, recordedReq) (int, string) { return 200, "[]" })
	b := NewBridge(srv.URL, "not-a-key")
	if _, err := b.Query(context.Background()); err == nil || IsRetryable(err) {
		t.Fatalf("err = %v, want a non-retryable key error", err)
	}
	if n := len(srv.requests()); n != 0 {
		t.Fatalf("%d requests sent with a bad key", n)
	}
}

func TestNIP98HeaderCarriesNonceAndPayloadTags(t *testing.T) {
	var header string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		header = r.Header.Get("Authorization")
		_, _ = io.WriteString(w, "[]")
	}))
	defer srv.Close()
	b := NewBridge(srv.URL, nostr.GeneratePrivateKey())
	if _, err := b.Query(context.Background()); err != nil {
		t.Fatal(err)
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(header, "Nostr "))
	if err != nil {
		t.Fatalf("header %q: %v", header, err)
	}
	var ev nostr.Event
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Kind != 27235 || protocol.TagValue(ev.Tags, "u") != srv.URL+"/query" ||
		protocol.TagValue(ev.Tags, "method") != "POST" || protocol.TagValue(ev.Tags, "nonce") == "" ||
		protocol.TagValue(ev.Tags, "payload") != protocol.PayloadHash([]byte("[]")) {
		t.Fatalf("auth event = %+v", ev)
	}
}

func TestFilterMarshalAddsExtensionFields(t *testing.T) {
	until := nostr.Timestamp(1700000000)
	f := Filter{Filter: nostr.Filter{Kinds: []int{9}, Until: &until, Limit: 500}, BeforeID: strings.Repeat("a", 64), DepthLimit: 3}
	raw, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	if m["before_id"] != strings.Repeat("a", 64) || m["depth_limit"] != float64(3) || m["until"] != float64(1700000000) || m["limit"] != float64(500) {
		t.Fatalf("marshalled %s", raw)
	}
	var back Filter
	if err := json.Unmarshal(raw, &back); err != nil || back.BeforeID != f.BeforeID || back.DepthLimit != 3 || back.Limit != 500 {
		t.Fatalf("round trip = %+v, %v", back, err)
	}
}

func TestFilterMarshalWithoutExtensionsIsPlainNIP01(t *testing.T) {
	for _, f := range []Filter{{}, {Filter: nostr.Filter{Tags: nostr.TagMap{"h": {"x"}}}}} {
		raw, _ := json.Marshal(f)
		want, _ := json.Marshal(f.Filter)
		if string(raw) != string(want) {
			t.Fatalf("got %s, want %s", raw, want)
		}
	}
	raw, _ := json.Marshal(Filter{BeforeID: "b"})
	if string(raw) != `{"before_id":"b"}` {
		t.Fatalf("empty filter with before_id = %s", raw)
	}
}

func TestFullJitterStaysUnderUpstreamCeilings(t *testing.T) {
	for i := 0; i < 200; i++ {
		if d := FullJitter(1); d < 0 || d > 500*time.Millisecond {
			t.Fatalf("attempt 1 wait %v", d)
		}
		if d := FullJitter(2); d < 0 || d > 1500*time.Millisecond {
			t.Fatalf("attempt 2 wait %v", d)
		}
	}
}

// A burst of requests opens at most MaxConnsPerRelay connections to the relay; the rest wait
// for one and all are answered.
func TestBridgeBurstUsesAtMostMaxConnsPerRelayConnections(t *testing.T) {
	const burst = 3 * MaxConnsPerRelay
	arrived := make(chan struct{}, burst)
	release := make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release
		_, _ = io.WriteString(w, "[]")
	}))
	var mu sync.Mutex
	conns := 0
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			mu.Lock()
			conns++
			mu.Unlock()
		}
	}
	srv.Start()
	defer srv.Close()
	b := NewBridge(srv.URL, nostr.GeneratePrivateKey())
	errs := make(chan error, burst)
	for range burst {
		go func() {
			_, err := b.Query(context.Background())
			errs <- err
		}()
	}
	for range MaxConnsPerRelay {
		<-arrived // every connection the bridge may open is busy
	}
	close(release)
	for range burst {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if conns > MaxConnsPerRelay {
		t.Fatalf("%d requests opened %d connections, want at most %d", burst, conns, MaxConnsPerRelay)
	}
}
