// Package postgres is the relay's store.Store on PostgreSQL, for running several relay nodes
// on one database. It keeps the SQLite store's contract: same replaceable and addressable
// rules, soft delete, the relay's read Access applied inside every query, NIP-50 search and a NIP-98 replay set that
// holds across nodes.
package postgres

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/relay/store"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Store is a store.Store on a pgx connection pool.
type Store struct {
	pool   *pgxpool.Pool
	closed atomic.Bool

	// UpdateAsync's writer: the store's group commit (store.WriteQueue, commit in writer.go).
	writes *store.WriteQueue

	// node names this Store in its change notices, so a node skips its own; topic is the
	// NOTIFY channel, one per schema (nodes share a schema, tests each have their own).
	node  string
	topic string
	live  atomic.Bool // the Follow connection is up (set by Follow)
}

var _ store.Store = (*Store)(nil)

// maxAttempts bounds how often Update reruns a transaction that lost a deadlock or
// serialization race to another writer (another request, or another node).
const maxAttempts = 5

// Option adjusts how Open sets the pool up.
type Option func(*pgxpool.Config)

// ObserveAcquire has f told how long each request waited for a pool connection (the relay's
// buzz_db_pool_acquire_duration_seconds).
func ObserveAcquire(f func(wait time.Duration)) Option {
	return func(c *pgxpool.Config) { c.ConnConfig.Tracer = acquireTimer{f} }
}

// acquireTimer is a pgx tracer that times pool acquisitions only.
type acquireTimer struct{ observe func(time.Duration) }

type acquireStart struct{}

func (acquireTimer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}
func (acquireTimer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (acquireTimer) TraceAcquireStart(ctx context.Context, _ *pgxpool.Pool, _ pgxpool.TraceAcquireStartData) context.Context {
	return context.WithValue(ctx, acquireStart{}, time.Now())
}

func (t acquireTimer) TraceAcquireEnd(ctx context.Context, _ *pgxpool.Pool, data pgxpool.TraceAcquireEndData) {
	if start, ok := ctx.Value(acquireStart{}).(time.Time); ok && data.Err == nil {
		t.observe(time.Since(start))
	}
}

// Open connects to the database at url (postgres://…) and applies pending migrations.
// Connection parameters such as search_path may be given in the URL.
func Open(ctx context.Context, url string, opts ...Option) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres: bad database URL: %w", err)
	}
	for _, o := range opts {
		o(cfg)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	if err := migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: migrate: %w", err)
	}
	var schema string
	if err := pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: %w", err)
	}
	s := &Store{pool: pool, node: newNodeID(), topic: "buzz_relay:" + schema}
	s.writes = store.NewWriteQueue(s.commit, nil)
	return s, nil
}

// migrate applies the embedded migrations not yet recorded in schema_migrations, all in one
// transaction under an advisory lock: nodes starting together take turns, and the later ones
// find nothing left to do.
func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		// Keyed by schema, so separate schemas (one per test, say) migrate independently.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('buzz-relay-migrate:' || current_schema(), 0))`); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())`); err != nil {
			return err
		}
		var current int
		if err := tx.QueryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
			return err
		}
		pending, err := store.PendingMigrations(migrations, current)
		if err != nil {
			return err
		}
		for _, m := range pending {
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return fmt.Errorf("migration %s: %w", m.Name, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version) VALUES ($1)`, m.Version); err != nil {
				return err
			}
		}
		return nil
	})
}

// Ping checks that the database answers (readiness); store.ErrClosed after Close.
func (s *Store) Ping(ctx context.Context) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	return s.pool.Ping(ctx)
}

// Close closes the pool; later calls fail with store.ErrClosed.
func (s *Store) Close() error {
	if s.closed.CompareAndSwap(false, true) {
		s.writes.Close()
		s.pool.Close()
	}
	return nil
}

// Update runs fn in one transaction. Unlike SQLite's single writer, transactions from other
// requests and nodes run concurrently: SaveEvent serializes the writers of one replaceable
// address with an advisory lock, and a transaction that loses a deadlock or serialization
// race is rolled back and fn runs again (so fn must only do its writes through the Tx).
func (s *Store) Update(ctx context.Context, fn func(store.Tx) error) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	var err error
	for range maxAttempts {
		err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			t := &pgTx{ctx: ctx, tx: tx, s: s}
			if err := fn(t); err != nil {
				return err
			}
			return t.announce()
		})
		if !retryable(err) {
			break
		}
	}
	return s.wrap(err)
}

func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01") // serialization_failure, deadlock_detected
}

// wrap turns the pool's own "closed" failure into store.ErrClosed.
func (s *Store) wrap(err error) error {
	if err != nil && s.closed.Load() && !errors.Is(err, store.ErrClosed) {
		return fmt.Errorf("%w: %v", store.ErrClosed, err)
	}
	return err
}

type pgTx struct {
	ctx    context.Context
	tx     pgx.Tx
	s      *Store
	stored []savedEvent // the events saved, for announce

	later *saveLater // a batch's: plain events are saved together at its end (writer.go)
	req   int        // the batch request running now
}

// text makes s storable as PostgreSQL text, which holds neither NUL nor invalid UTF-8. Used on
// both sides (stored values and filter values), so lookups still agree.
func text(s string) string {
	if strings.IndexByte(s, 0) >= 0 {
		s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// row is an event as the events table stores it.
type row struct {
	id, pubkey, tags, content, sig string
	createdAt                      int64
	kind                           int
	raw, channel                   *string // content_raw (content with NUL or bad UTF-8), channel_id
}

// channelID is the row's channel as the event gave it ("" for a global event).
func (r row) channelID() string {
	if r.channel == nil {
		return ""
	}
	return *r.channel
}

func newRow(ev *nostr.Event, channelID string) (row, error) {
	tags, err := json.Marshal(ev.Tags)
	if err != nil {
		return row{}, err
	}
	r := row{id: text(ev.ID), pubkey: text(ev.PubKey), tags: string(tags), content: ev.Content, sig: text(ev.Sig),
		createdAt: int64(ev.CreatedAt), kind: ev.Kind}
	if channelID != "" {
		v := text(channelID)
		r.channel = &v
	}
	if c := text(r.content); c != r.content {
		b, _ := json.Marshal(r.content) // escapes NUL and bad UTF-8 as \u sequences
		raw := string(b)
		r.content, r.raw = c, &raw
	}
	return r, nil
}

func (t *pgTx) SaveEvent(ev *nostr.Event, channelID string) error {
	addr, addressed := store.AddressOf(ev)
	if t.later != nil && !addressed && ev.Kind != protocol.KindPrivateReminder {
		return t.later.add(ev, channelID, t.req) // saved with the rest of the batch (saveLater)
	}
	var d *string
	if addressed {
		if addr.D != nil {
			v := text(*addr.D)
			d = &v
		}
		if err := t.replace(ev, addr); err != nil {
			return err
		}
	}
	r, err := newRow(ev, channelID)
	if err != nil {
		return err
	}
	tags, content, raw, ch := r.tags, r.content, r.raw, r.channel
	// The event and its tag rows in one statement: one round trip per event on the ingest path.
	var mine tagRows
	mine.add(ev.Tags, int64(ev.CreatedAt), 0)
	var seq int64
	err = t.tx.QueryRow(t.ctx, `WITH ins AS (
			INSERT INTO events (id, pubkey, created_at, kind, tags, content, content_raw, sig, channel_id, d_tag, origin)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT (id) DO NOTHING RETURNING seq),
		tag_rows AS (
			INSERT INTO event_tags (name, value, created_at, seq)
			SELECT u.name, u.value, $3, ins.seq FROM ins, unnest($12::text[], $13::text[]) AS u(name, value))
		SELECT seq FROM ins`,
		text(ev.ID), text(ev.PubKey), int64(ev.CreatedAt), ev.Kind, string(tags), content, raw, text(ev.Sig), ch, d, t.s.node,
		mine.names, mine.values).Scan(&seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.ErrDuplicate
	}
	if err != nil {
		return err
	}
	if ev.Kind == protocol.KindPrivateReminder {
		if err := t.schedule(ev); err != nil {
			return err
		}
	}
	t.stored = append(t.stored, savedEvent{seq, ev, channelID}) // notified once per transaction (announce)
	return nil
}

// replace removes the versions stored at addr that ev replaces, or refuses ev (store.Replaces).
func (t *pgTx) replace(ev *nostr.Event, addr store.Address) error {
	// One writer per address at a time, across nodes: without it two versions saved at once
	// would both see no rival and both be stored.
	lock := fmt.Sprintf("%d:%s", addr.Kind, addr.Pubkey)
	if addr.D != nil {
		lock += ":" + *addr.D
	}
	if _, err := t.tx.Exec(t.ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, text(lock)); err != nil {
		return err
	}
	q, args := store.VersionsQuery(dialect{}, addr)
	rows, err := t.tx.Query(t.ctx, q, args...)
	if err != nil {
		return err
	}
	var stored []store.Version
	var seqs []int64
	var tags []string
	for rows.Next() {
		var v store.Version
		var seq int64
		var tt string
		if err := rows.Scan(&seq, &v.ID, &v.CreatedAt, &tt); err != nil {
			rows.Close()
			return err
		}
		stored, seqs, tags = append(stored, v), append(seqs, seq), append(tags, tt)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	older, err := store.Replaces(ev, stored)
	if err != nil || len(older) == 0 {
		return err
	}
	// Replaced versions go entirely: no replaceable history. Their tag rows are addressed by
	// their whole key, rebuilt from the stored tags: event_tags has no index by seq.
	var gone tagRows
	var goneSeqs []int64
	for _, i := range older {
		var tt nostr.Tags
		if err := json.Unmarshal([]byte(tags[i]), &tt); err != nil {
			return fmt.Errorf("event %d: bad stored tags: %w", seqs[i], err)
		}
		gone.add(tt, stored[i].CreatedAt, seqs[i])
		goneSeqs = append(goneSeqs, seqs[i])
	}
	if len(gone.names) > 0 {
		if _, err := t.tx.Exec(t.ctx, `DELETE FROM event_tags WHERE (name, value, created_at, seq) IN
			(SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[]))`,
			gone.names, gone.values, gone.createdAt, gone.seqs); err != nil {
			return err
		}
	}
	_, err = t.tx.Exec(t.ctx, `DELETE FROM events WHERE seq = ANY($1)`, goneSeqs)
	return err
}

// tagRows are event_tags keys as parallel arrays, for unnest.
type tagRows struct {
	names, values   []string
	createdAt, seqs []int64
}

// add appends the rows an event with tags, created_at and seq has (store.IndexedTags).
func (r *tagRows) add(tags nostr.Tags, createdAt, seq int64) {
	for _, k := range store.IndexedTags(tags, text) {
		r.names, r.values = append(r.names, k.Name), append(r.values, k.Value)
		r.createdAt, r.seqs = append(r.createdAt, createdAt), append(r.seqs, seq)
	}
}

func (t *pgTx) SoftDelete(ids []string, author string, at int64) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	clean := make([]string, len(ids))
	for i, id := range ids {
		clean[i] = text(id)
	}
	q := `UPDATE events SET deleted_at = $1 WHERE id = ANY($2) AND deleted_at IS NULL`
	args := []any{at, clean}
	if author != "" {
		q += ` AND pubkey = $3`
		args = append(args, text(author))
	}
	tag, err := t.tx.Exec(t.ctx, q, args...)
	return int(tag.RowsAffected()), err
}

func (t *pgTx) PutChannel(c store.Channel) error {
	var deleted *int64
	if c.Deleted {
		now := time.Now().Unix()
		deleted = &now
	}
	_, err := t.tx.Exec(t.ctx, `INSERT INTO channels (id, name, about, visibility, channel_type, topic, purpose, archived, ttl, created_by, created_at, deleted_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
		ON CONFLICT (id) DO UPDATE SET name = excluded.name, about = excluded.about, visibility = excluded.visibility,
			channel_type = excluded.channel_type, topic = excluded.topic, purpose = excluded.purpose,
			archived = excluded.archived, ttl = excluded.ttl,
			deleted_at = COALESCE(channels.deleted_at, excluded.deleted_at)`,
		text(c.ID), text(c.Name), text(c.About), text(c.Visibility), text(c.Type), text(c.Topic), text(c.Purpose),
		c.Archived, c.TTL, text(c.CreatedBy), c.CreatedAt, deleted)
	if err != nil {
		return err
	}
	return t.notify(noticeChannel, text(c.ID))
}

func (t *pgTx) PutMember(channelID, pubkey, role string, at int64) error {
	_, err := t.tx.Exec(t.ctx, `INSERT INTO members (channel_id, pubkey, role, joined_at) VALUES ($1, $2, $3, $4)
		ON CONFLICT (channel_id, pubkey) DO UPDATE SET role = excluded.role`, text(channelID), text(pubkey), text(role), at)
	if err != nil {
		return err
	}
	return t.notify(noticeChannel, text(channelID))
}

func (t *pgTx) RemoveMember(channelID, pubkey string) error {
	_, err := t.tx.Exec(t.ctx, `DELETE FROM members WHERE channel_id = $1 AND pubkey = $2`, text(channelID), text(pubkey))
	if err != nil {
		return err
	}
	return t.notify(noticeChannel, text(channelID))
}

// Query implements store.Store.
func (s *Store) Query(ctx context.Context, acc store.Access, f store.Filter, limit int) ([]nostr.Event, error) {
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	var a []any
	where, empty := store.Where(dialect{}, &a, acc, f)
	if empty || limit <= 0 {
		return []nostr.Event{}, nil
	}
	q := `SELECT e.id, e.pubkey, e.created_at, e.kind, e.tags, e.content, e.content_raw, e.sig FROM events e WHERE ` + where +
		` ORDER BY e.created_at DESC, e.id ASC LIMIT ` + dialect{}.Param(&a, limit)
	rows, err := s.pool.Query(ctx, q, a...)
	if err != nil {
		return nil, s.wrap(err)
	}
	defer rows.Close()
	out := []nostr.Event{}
	size := 0
	for !f.Full(size) && rows.Next() {
		ev, err := scanEvent(rows, nil)
		if err != nil {
			return nil, err
		}
		out = append(out, ev)
		size += store.EventBytes(&ev)
	}
	return out, s.wrap(rows.Err())
}

// scanEvent reads id, pubkey, created_at, kind, tags, content, content_raw, sig (and the
// channel into ch when not nil).
func scanEvent(row pgx.Row, ch *string) (nostr.Event, error) {
	var ev nostr.Event
	var ca int64
	var tags string
	var raw, chv *string
	dest := []any{&ev.ID, &ev.PubKey, &ca, &ev.Kind, &tags, &ev.Content, &raw, &ev.Sig}
	if ch != nil {
		dest = append(dest, &chv)
	}
	if err := row.Scan(dest...); err != nil {
		return ev, err
	}
	ev.CreatedAt = nostr.Timestamp(ca)
	if err := json.Unmarshal([]byte(tags), &ev.Tags); err != nil {
		return ev, fmt.Errorf("event %s: bad stored tags: %w", ev.ID, err)
	}
	if raw != nil {
		if err := json.Unmarshal([]byte(*raw), &ev.Content); err != nil {
			return ev, fmt.Errorf("event %s: bad stored content: %w", ev.ID, err)
		}
	}
	if ch != nil && chv != nil {
		*ch = *chv
	}
	return ev, nil
}

// Count implements store.Store.
func (s *Store) Count(ctx context.Context, acc store.Access, filters []store.Filter) (int64, error) {
	if s.closed.Load() {
		return 0, store.ErrClosed
	}
	var a []any
	var parts []string
	for _, f := range filters {
		where, empty := store.Where(dialect{}, &a, acc, f)
		if empty {
			continue
		}
		parts = append(parts, `SELECT e.seq FROM events e WHERE `+where)
	}
	if len(parts) == 0 {
		return 0, nil
	}
	var n int64
	err := s.pool.QueryRow(ctx, `SELECT COUNT(*) FROM (`+strings.Join(parts, " UNION ")+`) AS matched`, a...).Scan(&n)
	return n, s.wrap(err)
}

// Event implements store.Store.
func (s *Store) Event(ctx context.Context, id string) (*nostr.Event, string, error) {
	if s.closed.Load() {
		return nil, "", store.ErrClosed
	}
	var ch string
	ev, err := scanEvent(s.pool.QueryRow(ctx, `SELECT id, pubkey, created_at, kind, tags, content, content_raw, sig, channel_id
		FROM events WHERE id = $1 AND deleted_at IS NULL`, text(id)), &ch)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", s.wrap(err)
	}
	return &ev, ch, nil
}

// LatestCreatedAt implements store.Store.
func (s *Store) LatestCreatedAt(ctx context.Context, pubkey string, kind int, channelID string) (int64, error) {
	if s.closed.Load() {
		return 0, store.ErrClosed
	}
	q := `SELECT COALESCE(MAX(created_at), 0) FROM events WHERE pubkey = $1 AND kind = $2 AND `
	args := []any{text(pubkey), kind}
	if channelID == "" {
		q += `channel_id IS NULL`
	} else {
		q += `channel_id = $3`
		args = append(args, text(channelID))
	}
	var n int64
	err := s.pool.QueryRow(ctx, q, args...).Scan(&n)
	return n, s.wrap(err)
}

// Channels implements store.Store.
func (s *Store) Channels(ctx context.Context) ([]store.Channel, error) {
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	rows, err := s.pool.Query(ctx, `SELECT id, name, about, visibility, channel_type, topic, purpose, archived, ttl,
		created_by, created_at, deleted_at IS NOT NULL FROM channels`)
	if err != nil {
		return nil, s.wrap(err)
	}
	byID := map[string]int{}
	var out []store.Channel
	for rows.Next() {
		var c store.Channel
		if err := rows.Scan(&c.ID, &c.Name, &c.About, &c.Visibility, &c.Type, &c.Topic, &c.Purpose, &c.Archived, &c.TTL,
			&c.CreatedBy, &c.CreatedAt, &c.Deleted); err != nil {
			rows.Close()
			return nil, err
		}
		c.Members = map[string]string{}
		byID[c.ID] = len(out)
		out = append(out, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, s.wrap(err)
	}
	mrows, err := s.pool.Query(ctx, `SELECT channel_id, pubkey, role FROM members`)
	if err != nil {
		return nil, s.wrap(err)
	}
	defer mrows.Close()
	for mrows.Next() {
		var ch, pk, role string
		if err := mrows.Scan(&ch, &pk, &role); err != nil {
			return nil, err
		}
		if i, ok := byID[ch]; ok {
			out[i].Members[pk] = role
		}
	}
	return out, s.wrap(mrows.Err())
}

// MarkAuthSeen implements store.Store. The primary key makes it hold across nodes: of two
// concurrent inserts of one id, the second waits for the first to commit and then conflicts.
func (s *Store) MarkAuthSeen(ctx context.Context, id string, now, expires time.Time) (bool, error) {
	fresh := false
	err := s.Update(ctx, func(tx store.Tx) error {
		t := tx.(*pgTx)
		if _, err := t.tx.Exec(ctx, `DELETE FROM nip98_seen WHERE expires_at < $1`, now.Unix()); err != nil {
			return err
		}
		tag, err := t.tx.Exec(ctx, `INSERT INTO nip98_seen (id, expires_at) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING`,
			text(id), expires.Unix())
		fresh = err == nil && tag.RowsAffected() == 1
		return err
	})
	return fresh, err
}
