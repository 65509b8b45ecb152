package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/relay/store"
)

// The writes the relay pipelines (UpdateAsync: one connection's ordinary events, not waiting for
// each other's commit) go to one writer goroutine per node (store.WriteQueue, as the SQLite
// store's), which commits whatever requests are waiting as one transaction: on PostgreSQL too
// each commit (its WAL flush and a round trip) is the dominant cost of a small write. A batch of one
// connection's events commits in their queue order; their stored seqs are announced in one
// notice per batch (announce). Update keeps running each write on its own pooled connection.

// batchTimeout bounds one batch's transaction, whoever's requests it holds.
const batchTimeout = 30 * time.Second

// errRequestFailed ends an all-or-nothing attempt at a batch in which a request failed.
var errRequestFailed = errors.New("postgres: a request of the batch failed")

// UpdateAsync queues fn for the node's writer and returns at once; the channel gives Update's
// result. Writes queued one after another by one goroutine commit in that order.
func (s *Store) UpdateAsync(ctx context.Context, fn func(store.Tx) error) <-chan error {
	return s.writes.Send(ctx, fn)
}

// commit runs a batch in one transaction, first straight through; if a request fails, that
// attempt is rolled back and the batch runs again with each request in its own savepoint, so a
// failure undoes only its own changes. A batch that loses a deadlock or serialization race runs
// again whole (requests are database work only, safe to run twice).
func (s *Store) commit(batch []*store.WriteReq) {
	live := batch[:0]
	for _, r := range batch {
		if err := r.Ctx.Err(); err != nil {
			r.Done <- err // its client is gone: nothing to answer it with but that
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
			r.Done <- err
		} else {
			r.Done <- errs[i]
		}
	}
}

// runBatch runs reqs in one transaction, each in a savepoint when isolated; errs are the
// requests' own errors, err the transaction's (errRequestFailed: a request failed, not isolated).
func (s *Store) runBatch(ctx context.Context, reqs []*store.WriteReq, isolated bool) (errs []error, err error) {
	errs = make([]error, len(reqs))
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		t := &pgTx{ctx: ctx, tx: tx, s: s}
		if !isolated {
			t.later = &saveLater{}
		}
		for i, r := range reqs {
			if !isolated {
				t.req = i
				if errs[i] = r.Fn(t); errs[i] != nil {
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
			if errs[i] = r.Fn(st); errs[i] != nil {
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
		if t.later != nil {
			if err := t.later.save(t, errs); err != nil {
				return err
			}
		}
		return t.announce()
	})
	return errs, err
}

// saveLater holds a batch's plain events (neither replaceable, addressable nor reminders, which
// need their address's lock and checks at once) and saves them all in two statements at the
// batch's end: multi-row inserts of the events and of their tag rows.
type saveLater struct {
	rows []row
	evs  []*nostr.Event
	reqs []int
}

func (l *saveLater) add(ev *nostr.Event, channelID string, req int) error {
	r, err := newRow(ev, channelID)
	if err != nil {
		return err
	}
	l.rows, l.evs, l.reqs = append(l.rows, r), append(l.evs, ev), append(l.reqs, req)
	return nil
}

// save inserts the events in the order they were added; a request whose event was stored
// already (or earlier in this batch) gets store.ErrDuplicate, as SaveEvent would have said.
func (l *saveLater) save(t *pgTx, errs []error) error {
	if len(l.rows) == 0 {
		return nil
	}
	n := len(l.rows)
	ids, pubkeys, tags, contents, sigs := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	createdAt, kinds := make([]int64, n), make([]int32, n)
	raws, chans := make([]*string, n), make([]*string, n)
	for i, r := range l.rows {
		ids[i], pubkeys[i], tags[i], contents[i], sigs[i] = r.id, r.pubkey, r.tags, r.content, r.sig
		createdAt[i], kinds[i], raws[i], chans[i] = r.createdAt, int32(r.kind), r.raw, r.channel
	}
	rows, err := t.tx.Query(t.ctx, `INSERT INTO events (id, pubkey, created_at, kind, tags, content, content_raw, sig, channel_id, origin)
		SELECT u.*, $10::text FROM unnest($1::text[], $2::text[], $3::bigint[], $4::int[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[]) AS u
		ON CONFLICT (id) DO NOTHING RETURNING id, seq`,
		ids, pubkeys, createdAt, kinds, tags, contents, raws, sigs, chans, t.s.node)
	if err != nil {
		return err
	}
	seqs := map[string]int64{}
	for rows.Next() {
		var id string
		var seq int64
		if err := rows.Scan(&id, &seq); err != nil {
			rows.Close()
			return err
		}
		seqs[id] = seq
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	var tagged tagRows
	for i, r := range l.rows {
		seq, ok := seqs[r.id]
		if !ok {
			errs[l.reqs[i]] = store.ErrDuplicate
			continue
		}
		delete(seqs, r.id) // a second copy in this batch is a duplicate
		tagged.add(l.evs[i].Tags, r.createdAt, seq)
		t.stored = append(t.stored, savedEvent{seq, l.evs[i], l.rows[i].channelID()})
	}
	if len(tagged.names) == 0 {
		return nil
	}
	_, err = t.tx.Exec(t.ctx, `INSERT INTO event_tags (name, value, created_at, seq)
		SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[])`, tagged.names, tagged.values, tagged.createdAt, tagged.seqs)
	return err
}
