// Package relaytest starts a real Buzz relay on 127.0.0.1 for integration tests and offers a
// few helpers that talk to it over the NIP-98 HTTP bridge.
package relaytest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/relay"
	"github.com/buzz-harness/buzz/internal/testwait"
)

// Server is a running relay.
type Server struct {
	URL     string // ws://127.0.0.1:port
	HTTPURL string // http://127.0.0.1:port
	Relay   *relay.Relay
	DataDir string

	addr   string
	config func(*relay.Config)
	// http is this server's own client: Stop closes its idle connections, so a request after a
	// Restart does not go out on a keep-alive socket the old server closed (EOF).
	http   *http.Client
	cancel context.CancelFunc
	done   chan error
}

// Start runs a relay with a temporary data dir on 127.0.0.1:0; it stops on test cleanup.
func Start(t testing.TB) *Server { t.Helper(); return StartWith(t, nil) }

// StartWith is Start with config adjusting the relay's Config (limits, public URL, origins).
func StartWith(t testing.TB, config func(*relay.Config)) *Server {
	t.Helper()
	dir := t.TempDir()
	// The relay refuses a data dir others can read; t.TempDir makes them 0755.
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	s := &Server{DataDir: dir, addr: "127.0.0.1:0", config: config, http: newHTTPClient()}
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// Launch runs a relay on 127.0.0.1:0 with dataDir, not tied to any test (e.g. one shared
// relay started from TestMain). The caller stops it, or lets the process exit.
func Launch(dataDir string) (*Server, error) {
	s := &Server{DataDir: dataDir, addr: "127.0.0.1:0", http: newHTTPClient()}
	return s, s.start()
}

func (s *Server) start() error {
	cfg := relay.Config{DataDir: s.DataDir}
	if s.config != nil {
		s.config(&cfg)
	}
	r, err := relay.Open(cfg)
	if err != nil {
		return fmt.Errorf("relaytest: open relay: %w", err)
	}
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		r.Close()
		return fmt.Errorf("relaytest: listen %s: %w", s.addr, err)
	}
	s.addr = ln.Addr().String()
	s.URL = "ws://" + s.addr
	s.HTTPURL = "http://" + s.addr
	s.Relay = r
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.done = make(chan error, 1)
	go func() { s.done <- relay.Serve(ctx, ln, r) }()
	return nil
}

// Stop stops listening and closes the relay; the data dir is kept. Safe to call twice.
func (s *Server) Stop() {
	if s.cancel == nil {
		return
	}
	s.cancel()
	<-s.done
	s.cancel = nil
	s.http.CloseIdleConnections()
}

func newHTTPClient() *http.Client {
	return &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
}

// Restart starts the relay again on the same port and data dir.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Stop()
	// The old port may linger briefly in the kernel: retry for a short while.
	var err error
	testwait.Eventually(t, 5*time.Second, func() bool {
		if err = s.start(); err != nil {
			t.Logf("relaytest: restart: %v", err)
		}
		return err == nil
	}, "the relay to start again on "+s.addr)
}

// Post sends a NIP-98-signed POST to the bridge and returns the status and body.
func (s *Server) Post(t testing.TB, sk, path string, body []byte) (int, []byte) {
	t.Helper()
	u := s.HTTPURL + path
	auth, err := protocol.SignHTTPAuth(sk, u, http.MethodPost, body, time.Now())
	if err != nil {
		t.Fatalf("relaytest: sign NIP-98: %v", err)
	}
	req, _ := http.NewRequest(http.MethodPost, u, bytes.NewReader(body))
	req.Header.Set("Authorization", auth)
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.http.Do(req)
	if err != nil {
		t.Fatalf("relaytest: POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// PublishResult is POST /events' answer.
type PublishResult struct {
	EventID  string `json:"event_id"`
	Accepted bool   `json:"accepted"`
	Message  string `json:"message"`
	Error    string `json:"error"`
}

// TryPublish signs ev with sk (setting created_at to now when zero) and POSTs it to /events.
func (s *Server) TryPublish(t testing.TB, sk string, ev *nostr.Event) (int, PublishResult) {
	t.Helper()
	if ev.CreatedAt == 0 {
		ev.CreatedAt = nostr.Now()
	}
	if ev.Tags == nil {
		ev.Tags = nostr.Tags{}
	}
	if err := ev.Sign(sk); err != nil {
		t.Fatalf("relaytest: sign: %v", err)
	}
	body, _ := json.Marshal(ev)
	status, raw := s.Post(t, sk, "/events", body)
	var res PublishResult
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatalf("relaytest: /events answered %d %q", status, raw)
	}
	return status, res
}

// Publish signs and publishes ev, failing the test unless it is accepted. Like a client, it
// waits out the relay's per-author rate limit (429), which a test posting in a loop on a quiet
// machine can reach.
func (s *Server) Publish(t testing.TB, sk string, ev nostr.Event) {
	t.Helper()
	status, res := s.TryPublish(t, sk, &ev)
	for deadline := time.Now().Add(10 * time.Second); status == http.StatusTooManyRequests && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		status, res = s.TryPublish(t, sk, &ev)
	}
	if status != http.StatusOK || !res.Accepted {
		t.Fatalf("relaytest: publish kind %d: status %d, error %q", ev.Kind, status, res.Error)
	}
}

// Query runs filters through POST /query as sk.
func (s *Server) Query(t testing.TB, sk string, filters ...nostr.Filter) []nostr.Event {
	t.Helper()
	body, _ := json.Marshal(filters)
	status, raw := s.Post(t, sk, "/query", body)
	if status != http.StatusOK {
		t.Fatalf("relaytest: /query answered %d %s", status, raw)
	}
	var out []nostr.Event
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("relaytest: /query body: %v", err)
	}
	return out
}

// CreateChannel creates a channel owned by ownerSK with a signed 9007 and returns its UUID.
func (s *Server) CreateChannel(t testing.TB, ownerSK, name string, private bool) string {
	t.Helper()
	id := uuid.NewString()
	vis := protocol.VisibilityOpen
	if private {
		vis = protocol.VisibilityPrivate
	}
	s.Publish(t, ownerSK, nostr.Event{Kind: protocol.KindCreateGroup, Tags: nostr.Tags{
		{"h", id}, {"name", name}, {"visibility", vis}, {"channel_type", protocol.TypeStream},
	}})
	return id
}

// AddMember adds pubkey to the channel with role (signed 9000 by ownerSK).
func (s *Server) AddMember(t testing.TB, ownerSK, channelID, pubkey, role string) {
	t.Helper()
	s.Publish(t, ownerSK, nostr.Event{Kind: protocol.KindPutUser, Tags: nostr.Tags{
		{"h", channelID}, {"p", pubkey}, {"role", role},
	}})
}

// Connect opens a go-nostr client connection and completes NIP-42 AUTH as sk.
//
// The connection is deliberately not closed on cleanup: in go-nostr v0.51.8, Relay.Close (and
// a server-side disconnect) races with the client's own watcher goroutine on r.Connection,
// which `go test -race` reports. Use Connect against a relay that outlives the test (see
// Launch) and let the process exit close it.
func (s *Server) Connect(t testing.TB, sk string) *nostr.Relay {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := nostr.RelayConnect(ctx, s.URL, nostr.WithNoticeHandler(func(string) {}))
	if err != nil {
		t.Fatalf("relaytest: connect: %v", err)
	}
	if err := Auth(ctx, r, sk); err != nil {
		t.Fatalf("relaytest: auth: %v", err)
	}
	return r
}

// Auth answers the relay's NIP-42 challenge as sk. go-nostr stores the challenge from its
// reader goroutine without synchronisation, so Auth first provokes a CLOSED (a REQ before
// auth): once that arrives, the earlier AUTH frame has been processed and the challenge is safe
// to read.
func Auth(ctx context.Context, r *nostr.Relay, sk string) error {
	sub, err := r.Subscribe(ctx, nostr.Filters{{Kinds: []int{0}, Limit: 1}})
	if err != nil {
		return err
	}
	select {
	case <-sub.ClosedReason:
	case <-sub.EndOfStoredEvents:
		sub.Unsub()
		return errors.New("relay answered a REQ before AUTH; is it a Buzz relay?")
	case <-ctx.Done():
		return ctx.Err()
	}
	return r.Auth(ctx, func(ev *nostr.Event) error { return ev.Sign(sk) })
}
