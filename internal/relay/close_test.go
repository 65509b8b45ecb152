package relay_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/relay"
	"github.com/buzz-harness/buzz/internal/relay/relaytest"
	"github.com/buzz-harness/buzz/internal/relay/store"
)

// watchedStore records store calls made after Close, and can hold one Query until its caller
// gives up on it (its context ends).
type watchedStore struct {
	store.Store
	holdQuery atomic.Bool
	inQuery   chan struct{}
	querying  atomic.Int32

	mu     sync.Mutex
	closed bool
	late   []string
}

func (w *watchedStore) call(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		w.late = append(w.late, name)
	}
}

func (w *watchedStore) Query(ctx context.Context, a store.Access, f store.Filter, limit int) ([]nostr.Event, error) {
	w.querying.Add(1)
	defer w.querying.Add(-1)
	if w.holdQuery.CompareAndSwap(true, false) {
		close(w.inQuery)
		<-ctx.Done()
	}
	w.call("Query")
	return w.Store.Query(ctx, a, f, limit)
}

func (w *watchedStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	w.call("Update")
	return w.Store.Update(ctx, fn)
}

func (w *watchedStore) Count(ctx context.Context, a store.Access, filters []store.Filter) (int64, error) {
	w.call("Count")
	return w.Store.Count(ctx, a, filters)
}

func (w *watchedStore) Event(ctx context.Context, id string) (*nostr.Event, string, error) {
	w.call("Event")
	return w.Store.Event(ctx, id)
}

func (w *watchedStore) MarkAuthSeen(ctx context.Context, id string, now, expires time.Time) (bool, error) {
	w.call("MarkAuthSeen")
	return w.Store.MarkAuthSeen(ctx, id, now, expires)
}

func (w *watchedStore) Close() error {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	return w.Store.Close()
}

func TestCloseReturnsOnlyAfterConnectionHandlersEndAndTouchesNoClosedStore(t *testing.T) {
	w := &watchedStore{inQuery: make(chan struct{})}
	s := relaytest.StartWith(t, relay.WithStore(func(st store.Store) store.Store { w.Store = st; return w }, nil))
	u := newUser()
	c := dialRaw(t, s.URL)
	c.mustAuth(u.sk, s.URL)
	w.holdQuery.Store(true)
	c.send("REQ", "history", map[string]any{"kinds": []int{1}})
	select {
	case <-w.inQuery:
	case <-time.After(5 * time.Second):
		t.Fatal("the REQ's query never reached the store")
	}

	// The handler is inside a store call: Close ends its connection, so the call returns, and
	// must wait for the handler before closing the store.
	if err := s.Relay.Close(); err != nil {
		t.Fatal(err)
	}
	if n := relay.Conns(s.Relay); n != 0 {
		t.Fatalf("Close returned with %d connection handlers still running", n)
	}
	if n := w.querying.Load(); n != 0 {
		t.Fatalf("Close returned with %d store queries still running", n)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed || len(w.late) > 0 {
		t.Fatalf("store closed %v; calls after its Close: %v", w.closed, w.late)
	}
}
