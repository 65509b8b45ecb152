package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/nbd-wtf/go-nostr"
)

// A one-shot query over the socket: REQ under an id of its own, the stored events up to EOSE,
// then CLOSE. Its events go to the caller alone: not to Events, not into the seen set, and they
// advance no subscription's floor. As with the bridge's /query, they are the relay's answer
// (the relay checked them on the way in).

// liveQuery collects one query's events. Its fields are the connection reader's, under Live.mu,
// until it ends; the caller reads events only after receiving from done.
type liveQuery struct {
	events []nostr.Event
	done   chan error // buffered, sent once: EOSE (nil), CLOSED or a lost connection
	// ended: done was sent. Frames still to come (the relay sends live events on the REQ until
	// it reads our CLOSE) are dropped.
	ended bool
}

const querySubPfx = "q-"

// Query runs filters once over the current connection and returns the stored events in the
// relay's order (per filter, newest first). With no connection up it fails at once
// (errNotConnected); it fails too when the connection ends or the relay closes the query first.
func (l *Live) Query(ctx context.Context, filters ...nostr.Filter) ([]nostr.Event, error) {
	q := &liveQuery{done: make(chan error, 1)}
	l.mu.Lock()
	l.queryN++
	id := querySubPfx + strconv.FormatUint(l.queryN, 10)
	if l.out == nil || !l.queueLocked(l.out, reqMessage(id, filters)) {
		l.mu.Unlock()
		return nil, errNotConnected
	}
	l.queries[id] = q
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		if _, open := l.queries[id]; open && l.out != nil {
			l.queueLocked(l.out, []any{"CLOSE", id}) // the relay keeps a REQ open until told
		}
		delete(l.queries, id)
		l.mu.Unlock()
	}()
	select {
	case err := <-q.done:
		if err != nil {
			return nil, err
		}
		return uniqueEvents(q.events), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// queryFrame takes a relay frame for a one-shot query; it reports whether subID is one.
func (l *Live) queryFrame(msg relayMessage) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	q := l.queries[msg.subID]
	if q == nil {
		return false
	}
	switch msg.label {
	case "EVENT":
		if !q.ended {
			q.events = append(q.events, *msg.event)
		}
	case "EOSE":
		q.finish(nil)
	case "CLOSED":
		delete(l.queries, msg.subID) // closed by the relay: no CLOSE back
		q.finish(fmt.Errorf("relay closed the query: %s", msg.message))
	}
	return true
}

// finish ends q once; Live.mu must be held.
func (q *liveQuery) finish(err error) {
	if !q.ended {
		q.ended = true
		q.done <- err
	}
}

// failQueriesLocked ends every open query when the connection is lost; l.mu must be held.
func (l *Live) failQueriesLocked() {
	for id, q := range l.queries {
		q.finish(errors.New("relay connection lost before the query's EOSE"))
		delete(l.queries, id)
	}
}

// uniqueEvents keeps the first of each id (filters of one query may overlap), as /query does.
func uniqueEvents(evs []nostr.Event) []nostr.Event {
	seen := make(map[string]bool, len(evs))
	return slices.DeleteFunc(evs, func(ev nostr.Event) bool {
		dup := seen[ev.ID]
		seen[ev.ID] = true
		return dup
	})
}
