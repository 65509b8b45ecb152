package relay

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/relay/store"
)

// holdQuery holds every Query until release is closed, and notes calls made after Close.
type holdQuery struct {
	store.Store
	release chan struct{}
	closed  atomic.Bool
	late    atomic.Int32
}

func (s *holdQuery) note() {
	if s.closed.Load() {
		s.late.Add(1)
	}
}

func (s *holdQuery) Query(ctx context.Context, a store.Access, f store.Filter, limit int) ([]nostr.Event, error) {
	<-s.release
	s.note()
	return s.Store.Query(ctx, a, f, limit)
}

func (s *holdQuery) MarkAuthSeen(ctx context.Context, id string, now, expires time.Time) (bool, error) {
	s.note()
	return s.Store.MarkAuthSeen(ctx, id, now, expires)
}

func (s *holdQuery) Close() error {
	s.closed.Store(true)
	return s.Store.Close()
}

func TestCloseWaitsForABridgeRequestBeforeClosingTheStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hold := &holdQuery{release: make(chan struct{})}
		r := openTestRelayWith(t, Config{ListenAddr: "127.0.0.1:3000",
			wrapStore: func(st store.Store) store.Store { hold.Store = st; return hold }})
		body := []byte(`[{"kinds":[1]}]`)
		sk := nostr.GeneratePrivateKey()
		auth, err := protocol.SignHTTPAuth(sk, "http://127.0.0.1:3000/query", http.MethodPost, body, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest(http.MethodPost, "/query", strings.NewReader(string(body)))
		req.Header.Set("Authorization", auth)
		w := httptest.NewRecorder()
		served := make(chan struct{})
		go func() { r.ServeHTTP(w, req); close(served) }()
		synctest.Wait() // the request waits in the store

		closed := make(chan error, 1)
		go func() { closed <- r.Close() }()
		synctest.Wait()
		select {
		case <-closed:
			t.Fatal("Close returned while a bridge request was still being served")
		default:
		}
		if hold.closed.Load() {
			t.Fatal("the store was closed under a running bridge request")
		}

		close(hold.release)
		<-served
		if err := <-closed; err != nil {
			t.Fatal(err)
		}
		if w.Code != http.StatusOK || !hold.closed.Load() || hold.late.Load() != 0 {
			t.Fatalf("answer %d %s; store closed %v; %d calls after its Close", w.Code, w.Body, hold.closed.Load(), hold.late.Load())
		}
		// Requests that come after Close are turned away, not run on a closed store.
		late := httptest.NewRecorder()
		r.ServeHTTP(late, httptest.NewRequest(http.MethodPost, "/query", strings.NewReader(string(body))))
		if late.Code != http.StatusServiceUnavailable || hold.late.Load() != 0 {
			t.Fatalf("after Close: %d %s, %d store calls", late.Code, late.Body, hold.late.Load())
		}
	})
}
