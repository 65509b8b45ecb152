package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/buzz-harness/buzz/internal/relay/store"
)

// The writes the relay pipelines (UpdateAsync: one connection's ordinary events, not waiting for
// each other's commit) go to one writer goroutine per node, which commits whatever requests are
// waiting as one transaction, as the SQLite store's writer does: on PostgreSQL too each commit
// (its WAL flush and a round trip) is the dominant cost of a small write. A batch of one
// connection's events commits in their queue order; their stored seqs are announced in one
// notice per batch (announce). Update keeps running each write on its own pooled connection.

const (
	// maxBatch bounds the requests in one transaction.
	maxBatch = 128
	// batchTimeout bounds one batch's transaction, whoever's requests it holds.
	batchTimeout = 30 * time.Second
)

type writeReq struct {
	ctx  context.Context
	fn   func(store.Tx) error
	done chan error
}

// errRequestFailed ends an all-or-nothing attempt at a batch in which a request failed.
var errRequestFailed = errors.New("postgres: a request of the batch failed")

// UpdateAsync queues fn for the node's writer and returns at once; the channel gives Update's
// result. Writes queued one after another by one goroutine commit in that order.
func (s *Store) UpdateAsync(ctx context.Context, fn func(store.Tx) error) <-chan error {
	req := &writeReq{ctx: ctx, fn: fn, done: make(chan error, 1)}
	s.sendMu.RLock()
	defer s.sendMu.RUnlock()
	if s.closed.Load() {
		req.done <- store.ErrClosed
		return req.done
	}
	select {
	case s.writes <- req: // the writer runs until Close, so a full buffer drains
	case <-ctx.Done():
		req.done <- ctx.Err()
	}
	return req.done
}

func (s *Store) writer() {
	defer close(s.writerEnd)
	for {
		var first *writeReq
		select {
		case first = <-s.writes:
		case <-s.quit:
			for { // Close has stopped new writes; answer the ones still queued
				select {
				case r := <-s.writes:
					r.done <- store.ErrClosed
				default:
					return
				}
			}
		}
		batch := []*writeReq{first}
	drain:
		for len(batch) < maxBatch {
			select {
			case r := <-s.writes:
				batch = append(batch, r)
			default:
				break drain
			}
		}
		s.commit(batch)
	}
}

// commit runs a batch in one transaction, first straight through; if a request fails, that
// attempt is rolled back and the batch runs again with each request in its own savepoint, so a
// failure undoes only its own changes. A batch that loses a deadlock or serialization race runs
// again whole (requests are database work only, safe to run twice).
func (s *Store) commit(batch []*writeReq) {
	live := batch[:0]
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.done <- err // its client is gone: nothing to answer it with but that
			continue
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
	defer cancel()
	var errs []error
	var err error
	isolated := false
	for range maxAttempts {
		errs, err = s.runBatch(ctx, live, isolated)
		if errors.Is(err, errRequestFailed) {
			if len(live) == 1 {
				err = nil // the one request's own error is its answer
				break
			}
			isolated = true
			errs, err = s.runBatch(ctx, live, true)
		}
		if !retryable(err) {
			break
		}
	}
	err = s.wrap(err)
	for i, r := range live {
		if err != nil {
			r.done <- err
		} else {
			r.done <- errs[i]
		}
	}
}

// runBatch runs reqs in one transaction, each in a savepoint when isolated; errs are the
// requests' own errors, err the transaction's (errRequestFailed: a request failed, not isolated).
func (s *Store) runBatch(ctx context.Context, reqs []*writeReq, isolated bool) (errs []error, err error) {
	errs = make([]error, len(reqs))
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		t := &pgTx{ctx: ctx, tx: tx, s: s}
		for i, r := range reqs {
			if !isolated {
				if errs[i] = r.fn(t); errs[i] != nil {
					if retryable(errs[i]) {
						return errs[i]
					}
					return errRequestFailed
				}
				continue
			}
			sp, err := tx.Begin(ctx) // a savepoint
			if err != nil {
				return err
			}
			st := &pgTx{ctx: ctx, tx: sp, s: s}
			if errs[i] = r.fn(st); errs[i] != nil {
				if retryable(errs[i]) {
					return errs[i]
				}
				if err := sp.Rollback(ctx); err != nil {
					return err
				}
				continue
			}
			if err := sp.Commit(ctx); err != nil { // RELEASE SAVEPOINT
				return err
			}
			t.stored = append(t.stored, st.stored...)
		}
		return t.announce()
	})
	return errs, err
}
