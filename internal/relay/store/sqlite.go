package store

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nbd-wtf/go-nostr"
	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/buzz-harness/buzz/internal/protocol"
)

//go:embed migrations/*.sql
var migrations embed.FS

// SQLite is the embedded Store: WAL mode, one writer connection behind a mutex, a small pool of
// reader connections.
type SQLite struct {
	w *sql.DB
	r *sql.DB

	// Writes go through the queue's one goroutine, which commits whatever requests are waiting
	// as one transaction (writequeue.go).
	writes    *WriteQueue
	closeOnce sync.Once
	stmts     map[string]*sql.Stmt // writer goroutine only
	uncached  map[string]bool      // writer goroutine only: to prepare after the commit

	// Checkpoints run on their own connection, never in a commit (see checkpointer).
	ck              *sql.DB
	ckKick          chan struct{}
	ckQuit          chan struct{}
	ckEnd           chan struct{}
	checkpointEvery atomic.Int64 // nanoseconds between checkpoints at most

	blobDir string // blob files (sqlite_blobs.go), beside the database

	execs atomic.Int64 // write statements run (tests: a write's cost in statements)
}

// defaultCheckpointEvery spaces checkpoints: each copies the WAL's new pages into the database
// and fsyncs twice, so once a second at most; the WAL holds about a second of writes.
const defaultCheckpointEvery = time.Second

// ErrClosed is returned by writes after Close.
var ErrClosed = errors.New("store is closed")

var _ Store = (*SQLite)(nil)

// Open opens (creating if needed) the database at path and applies pending migrations.
// The database file and its WAL/shared-memory companions are kept 0600: they hold private
// channels. SQLite creates the companions with the main file's mode.
func Open(path string) (*SQLite, error) {
	if err := privateFiles(path); err != nil {
		return nil, err
	}
	pragmas := "_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_pragma=synchronous(NORMAL)&_pragma=foreign_keys(ON)"
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + pragmas
	// wal_autocheckpoint(0): a commit never checkpoints (the checkpointer does).
	w, err := sql.Open("sqlite", dsn+"&_txlock=immediate&_pragma=wal_autocheckpoint(0)")
	if err != nil {
		return nil, err
	}
	w.SetMaxOpenConns(1)
	if err := migrate(w); err != nil {
		w.Close()
		return nil, fmt.Errorf("migrate %s: %w", path, err)
	}
	r, err := sql.Open("sqlite", dsn+"&_pragma=query_only(1)")
	if err != nil {
		w.Close()
		return nil, err
	}
	r.SetMaxOpenConns(4)
	r.SetMaxIdleConns(4)
	ck, err := sql.Open("sqlite", dsn)
	if err != nil {
		w.Close()
		r.Close()
		return nil, err
	}
	ck.SetMaxOpenConns(1)
	s := &SQLite{w: w, r: r, ck: ck, stmts: map[string]*sql.Stmt{}, uncached: map[string]bool{},
		ckKick: make(chan struct{}, 1), ckQuit: make(chan struct{}), ckEnd: make(chan struct{}), blobDir: filepath.Join(filepath.Dir(path), "blobs")}
	s.checkpointEvery.Store(int64(defaultCheckpointEvery))
	s.writes = NewWriteQueue(s.commit, s.afterCommit)
	go s.checkpointer()
	return s, nil
}

// walRestartFrames bounds the WAL under sustained writes. A PASSIVE checkpoint racing a busy
// writer never finds the whole WAL copied, so the writer cannot restart it from the beginning and
// it grows; past this many frames (16 MiB of 4 KiB pages) a RESTART checkpoint briefly holds the
// writer until it has.
const walRestartFrames = 4096

// checkpoint runs one PASSIVE checkpoint, and a RESTART one when the WAL has grown too long.
func (s *SQLite) checkpoint() error {
	var busy, frames, copied int
	if err := s.ck.QueryRow(`PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &frames, &copied); err != nil {
		return err
	}
	if frames > walRestartFrames {
		_, err := s.ck.Exec(`PRAGMA wal_checkpoint(RESTART)`)
		return err
	}
	return nil
}

// checkpointer copies committed WAL pages into the database, PASSIVE (it never waits for, or
// blocks, the writer or a reader), at most once per checkpointEvery after a commit. SQLite's
// own automatic checkpoint ran inside the commit that crossed 1,000 WAL pages and held that
// commit for ~15 ms (the copy and two fsyncs): the relay's fan-out p99 was that stall.
func (s *SQLite) checkpointer() {
	defer close(s.ckEnd)
	for {
		select {
		case <-s.ckKick:
		case <-s.ckQuit:
			return
		}
		if err := s.checkpoint(); err != nil {
			slog.Warn("relay store: WAL checkpoint failed; retrying after the next commit", "err", err)
		}
		select {
		case <-time.After(time.Duration(s.checkpointEvery.Load())):
		case <-s.ckQuit:
			return
		}
	}
}

// privateFiles creates path 0600 when missing and takes group/other bits off it and its
// -wal/-shm/-journal files when they exist.
func privateFiles(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	f.Close()
	for _, p := range []string{path, path + "-wal", path + "-shm", path + "-journal"} {
		fi, err := os.Stat(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o077 != 0 {
			if err := os.Chmod(p, fi.Mode().Perm()&0o700); err != nil {
				return fmt.Errorf("restrict %s: %w", p, err)
			}
		}
	}
	return nil
}

func migrate(db *sql.DB) error {
	if _, err := db.Exec(`CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY)`); err != nil {
		return err
	}
	var current int
	if err := db.QueryRow(`SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
		return err
	}
	pending, err := PendingMigrations(migrations, current)
	if err != nil {
		return err
	}
	for _, m := range pending {
		tx, err := db.Begin()
		if err != nil {
			return err
		}
		if _, err := tx.Exec(m.SQL); err != nil {
			tx.Rollback()
			return fmt.Errorf("migration %s: %w", m.Name, err)
		}
		if _, err := tx.Exec(`INSERT INTO schema_migrations (version) VALUES (?)`, m.Version); err != nil {
			tx.Rollback()
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
	}
	return nil
}

// Close stops the writer and closes both connection pools.
func (s *SQLite) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.writes.Close()
		close(s.ckQuit)
		<-s.ckEnd
		for _, st := range s.stmts {
			st.Close()
		}
		err = errors.Join(s.r.Close(), s.ck.Close(), s.w.Close()) // the last close checkpoints the rest
	})
	return err
}

// Ping checks that the database answers a query (readiness); ErrClosed after Close.
func (s *SQLite) Ping(ctx context.Context) error {
	if s.writes.Closed() {
		return ErrClosed
	}
	return s.r.QueryRowContext(ctx, `SELECT 1`).Scan(new(int))
}

// Update runs fn in a write transaction, serialized with every other write. A failing fn
// rolls back only its own changes.
func (s *SQLite) Update(ctx context.Context, fn func(Tx) error) error {
	return <-s.UpdateAsync(ctx, fn)
}

// UpdateAsync queues fn for the writer and returns at once; the channel gives Update's result.
// Writes queued one after another by one goroutine run in that order, so a caller can keep
// several in flight (one connection's events commit in one batch) and still answer in order.
func (s *SQLite) UpdateAsync(ctx context.Context, fn func(Tx) error) <-chan error {
	return s.writes.Send(ctx, fn)
}

// afterCommit runs on the writer goroutine after each batch: it wakes the checkpointer and
// prepares the statements the batch ran unprepared.
func (s *SQLite) afterCommit() {
	select {
	case s.ckKick <- struct{}{}:
	default: // a checkpoint is already due
	}
	for q := range s.uncached {
		if st, err := s.w.Prepare(q); err == nil {
			s.stmts[q] = st
		}
		delete(s.uncached, q)
	}
}

// commit runs a batch in one transaction. It first runs every request straight through: in the
// common case none fails and the batch commits without a savepoint per request (SAVEPOINT,
// RELEASE and the sub-journal were about a fifth of the writer's time). If one fails, that
// attempt is rolled back and the batch runs again with each request in its own savepoint, so
// a failure undoes only its own changes. Requests are database work only, safe to run twice.
func (s *SQLite) commit(batch []*WriteReq) {
	if s.commitAllOrNothing(batch) {
		return
	}
	s.commitIsolated(batch)
}

// commitAllOrNothing commits the batch if no request fails and answers them all; with a failing
// request it rolls back and answers nothing (reporting false), except for a batch of one, whose
// answer is that failure.
func (s *SQLite) commitAllOrNothing(batch []*WriteReq) bool {
	tx, err := s.w.Begin()
	if err != nil {
		return false // commitIsolated meets the same error and answers it
	}
	t := &sqliteTx{s: s, tx: tx}
	for _, r := range batch {
		if ferr := r.Fn(t); ferr != nil {
			tx.Rollback()
			if len(batch) == 1 {
				r.Done <- ferr
				return true
			}
			return false
		}
	}
	err = tx.Commit()
	for _, r := range batch {
		r.Done <- err
	}
	return true
}

// commitIsolated runs each request of the batch in its own savepoint.
func (s *SQLite) commitIsolated(batch []*WriteReq) {
	errs := make([]error, len(batch))
	tx, err := s.w.Begin()
	if err == nil {
		t := &sqliteTx{s: s, tx: tx}
		for i, r := range batch {
			if err = t.exec(`SAVEPOINT req`); err != nil {
				break
			}
			if errs[i] = r.Fn(t); errs[i] != nil {
				if err = t.exec(`ROLLBACK TO req`); err != nil {
					break
				}
			}
			if err = t.exec(`RELEASE req`); err != nil {
				break
			}
		}
		if err == nil {
			err = tx.Commit()
		} else {
			tx.Rollback()
		}
	}
	for i, r := range batch {
		if err != nil {
			r.Done <- err
		} else {
			r.Done <- errs[i]
		}
	}
}

type sqliteTx struct {
	s  *SQLite
	tx *sql.Tx
}

// stmt returns q bound to this transaction, from the writer's statement cache. A statement
// not cached yet is prepared on the transaction this once and cached after the commit: the
// single writer connection is busy with the transaction until then.
func (t *sqliteTx) stmt(q string) (*sql.Stmt, error) {
	if st, ok := t.s.stmts[q]; ok {
		return t.tx.Stmt(st), nil
	}
	t.s.uncached[q] = true
	return t.tx.Prepare(q)
}

func (t *sqliteTx) exec(q string, args ...any) error {
	_, err := t.execResult(q, args...)
	return err
}

func (t *sqliteTx) execResult(q string, args ...any) (sql.Result, error) {
	t.s.execs.Add(1)
	st, err := t.stmt(q)
	if err != nil {
		return nil, err
	}
	return st.Exec(args...)
}

func (t *sqliteTx) SaveEvent(ev *nostr.Event, channelID string) error {
	var d any
	if addr, ok := AddressOf(ev); ok {
		if addr.D != nil {
			d = *addr.D
		}
		if err := t.replace(ev, addr); err != nil {
			return err
		}
	}
	tags, err := json.Marshal(ev.Tags)
	if err != nil {
		return err
	}
	var ch any
	if channelID != "" {
		ch = channelID
	}
	res, err := t.execResult(`INSERT INTO events (id, pubkey, created_at, kind, tags, content, sig, channel_id, d_tag)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
		ev.ID, ev.PubKey, int64(ev.CreatedAt), ev.Kind, string(tags), ev.Content, ev.Sig, ch, d)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrDuplicate
	}
	seq, err := res.LastInsertId()
	if err != nil {
		return err
	}
	if keys := IndexedTags(ev.Tags, nil); len(keys) > 0 {
		if err := t.exec(`INSERT INTO event_tags (name, value, created_at, seq)
			SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), ?, ? FROM json_each(?)`,
			int64(ev.CreatedAt), seq, tagPairs(keys)); err != nil {
			return err
		}
	}
	if Searchable(ev) {
		if err := t.exec(`INSERT INTO events_fts (rowid, content) VALUES (?, ?)`, seq, ev.Content); err != nil {
			return err
		}
	}
	if ev.Kind == protocol.KindPrivateReminder {
		return t.schedule(ev)
	}
	return nil
}

// schedule keeps the due row of a reminder's address in step with its new head.
func (t *sqliteTx) schedule(ev *nostr.Event) error {
	d := protocol.TagValue(ev.Tags, "d")
	nb, ok := DueOf(ev)
	if !ok {
		return t.exec(`DELETE FROM reminders_due WHERE pubkey = ? AND d = ?`, ev.PubKey, d)
	}
	return t.exec(`INSERT INTO reminders_due (pubkey, d, event_id, not_before, fired) VALUES (?, ?, ?, ?, 0)
		ON CONFLICT (pubkey, d) DO UPDATE SET event_id = excluded.event_id, not_before = excluded.not_before, fired = 0`,
		ev.PubKey, d, ev.ID, nb)
}

// ClaimDue implements Reminders.
func (s *SQLite) ClaimDue(ctx context.Context, now int64, limit int) ([]nostr.Event, error) {
	var ids []string
	err := s.Update(ctx, func(tx Tx) error {
		ids = ids[:0]
		st, err := tx.(*sqliteTx).stmt(`UPDATE reminders_due SET fired = 1 WHERE rowid IN
			(SELECT rowid FROM reminders_due WHERE fired = 0 AND not_before <= ? ORDER BY not_before LIMIT ?) RETURNING event_id`)
		if err != nil {
			return err
		}
		rows, err := st.Query(now, limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return err
			}
			ids = append(ids, id)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	var out []nostr.Event
	for _, id := range ids {
		if ev, _, err := s.Event(ctx, id); err == nil && ev != nil {
			out = append(out, *ev)
		}
	}
	return out, nil
}

// replace removes the versions stored at addr that ev replaces, or refuses ev (Replaces).
func (t *sqliteTx) replace(ev *nostr.Event, addr Address) error {
	q, args := VersionsQuery(sqliteDialect{}, addr)
	st, err := t.stmt(q)
	if err != nil {
		return err
	}
	rows, err := st.Query(args...)
	if err != nil {
		return err
	}
	var stored []Version
	var found []storedRow
	for rows.Next() {
		var r storedRow
		var v Version
		if err := rows.Scan(&r.seq, &v.ID, &v.CreatedAt, &r.tags); err != nil {
			rows.Close()
			return err
		}
		r.createdAt = v.CreatedAt
		stored, found = append(stored, v), append(found, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	older, err := Replaces(ev, stored)
	if err != nil {
		return err
	}
	for _, i := range older {
		if err := t.purge(found[i]); err != nil {
			return err
		}
	}
	return nil
}

// tagPairs is keys as one JSON parameter, [[name, value], ...]: an event's tag rows are written
// and deleted by one statement each, however many there are (each row by its whole key).
func tagPairs(keys []TagKey) string {
	pairs := make([][2]string, len(keys))
	for i, k := range keys {
		pairs[i] = [2]string{k.Name, k.Value}
	}
	b, _ := json.Marshal(pairs)
	return string(b)
}

// storedRow is what purging a stored event needs of it.
type storedRow struct {
	seq, createdAt int64
	tags           string
}

// purge removes a replaced event entirely (replaceable history is not kept). Its tag rows are
// addressed by their whole key, rebuilt from the event's tags: event_tags has no index by seq.
func (t *sqliteTx) purge(r storedRow) error {
	var tags nostr.Tags
	if err := json.Unmarshal([]byte(r.tags), &tags); err != nil {
		return fmt.Errorf("purge event %d: bad stored tags: %w", r.seq, err)
	}
	if keys := IndexedTags(tags, nil); len(keys) > 0 {
		if err := t.exec(`DELETE FROM event_tags WHERE (name, value, created_at, seq) IN
			(SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), ?, ? FROM json_each(?))`,
			r.createdAt, r.seq, tagPairs(keys)); err != nil {
			return err
		}
	}
	for _, q := range []string{
		`DELETE FROM events_fts WHERE rowid = ?`, // a no-op for events never indexed
		`DELETE FROM events WHERE seq = ?`,
	} {
		if err := t.exec(q, r.seq); err != nil {
			return err
		}
	}
	return nil
}

func (t *sqliteTx) SoftDelete(ids []string, author string, at int64) (int, error) {
	n := 0
	for _, id := range ids {
		q := `UPDATE events SET deleted_at = ? WHERE id = ? AND deleted_at IS NULL`
		args := []any{at, id}
		if author != "" {
			q += ` AND pubkey = ?`
			args = append(args, author)
		}
		res, err := t.execResult(q, args...)
		if err != nil {
			return n, err
		}
		c, _ := res.RowsAffected()
		n += int(c)
	}
	return n, nil
}

func (t *sqliteTx) PutChannel(c Channel) error {
	var deleted any
	if c.Deleted {
		deleted = time.Now().Unix()
	}
	return t.exec(`INSERT INTO channels (id, name, about, visibility, channel_type, topic, purpose, archived, ttl, created_by, created_at, deleted_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET name = excluded.name, about = excluded.about, visibility = excluded.visibility,
			channel_type = excluded.channel_type, topic = excluded.topic, purpose = excluded.purpose,
			archived = excluded.archived, ttl = excluded.ttl,
			deleted_at = COALESCE(channels.deleted_at, excluded.deleted_at)`,
		c.ID, c.Name, c.About, c.Visibility, c.Type, c.Topic, c.Purpose, boolInt(c.Archived), c.TTL, c.CreatedBy, c.CreatedAt, deleted)
}

func (t *sqliteTx) PutMember(channelID, pubkey, role string, at int64) error {
	return t.exec(`INSERT INTO members (channel_id, pubkey, role, joined_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (channel_id, pubkey) DO UPDATE SET role = excluded.role`, channelID, pubkey, role, at)
}

func (t *sqliteTx) RemoveMember(channelID, pubkey string) error {
	return t.exec(`DELETE FROM members WHERE channel_id = ? AND pubkey = ?`, channelID, pubkey)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Query implements Store.
func (s *SQLite) Query(ctx context.Context, a Access, f Filter, limit int) ([]nostr.Event, error) {
	var args []any
	where, empty := Where(sqliteDialect{}, &args, a, f)
	if empty || limit <= 0 {
		return []nostr.Event{}, nil
	}
	q := `SELECT e.id, e.pubkey, e.created_at, e.kind, e.tags, e.content, e.sig FROM events e WHERE ` + where +
		` ORDER BY e.created_at DESC, e.id ASC LIMIT ` + sqliteDialect{}.Param(&args, limit)
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []nostr.Event{}
	size := 0
	for !f.Full(size) && rows.Next() {
		var ev nostr.Event
		var ca int64
		var tags string
		if err := rows.Scan(&ev.ID, &ev.PubKey, &ca, &ev.Kind, &tags, &ev.Content, &ev.Sig); err != nil {
			return nil, err
		}
		ev.CreatedAt = nostr.Timestamp(ca)
		if err := json.Unmarshal([]byte(tags), &ev.Tags); err != nil {
			return nil, fmt.Errorf("event %s: bad stored tags: %w", ev.ID, err)
		}
		out = append(out, ev)
		size += EventBytes(&ev)
	}
	return out, rows.Err()
}

// Count implements Store.
func (s *SQLite) Count(ctx context.Context, a Access, filters []Filter) (int64, error) {
	var parts []string
	var args []any
	for _, f := range filters {
		where, empty := Where(sqliteDialect{}, &args, a, f)
		if empty {
			continue
		}
		parts = append(parts, `SELECT e.seq FROM events e WHERE `+where)
	}
	if len(parts) == 0 {
		return 0, nil
	}
	var n int64
	err := s.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM (`+strings.Join(parts, " UNION ")+`)`, args...).Scan(&n)
	return n, err
}

// Event implements Store.
func (s *SQLite) Event(ctx context.Context, id string) (*nostr.Event, string, error) {
	var ev nostr.Event
	var ca int64
	var tags string
	var ch sql.NullString
	err := s.r.QueryRowContext(ctx, `SELECT id, pubkey, created_at, kind, tags, content, sig, channel_id FROM events
		WHERE id = ? AND deleted_at IS NULL`, id).Scan(&ev.ID, &ev.PubKey, &ca, &ev.Kind, &tags, &ev.Content, &ev.Sig, &ch)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", err
	}
	ev.CreatedAt = nostr.Timestamp(ca)
	if err := json.Unmarshal([]byte(tags), &ev.Tags); err != nil {
		return nil, "", err
	}
	return &ev, ch.String, nil
}

// LatestCreatedAt implements Store.
func (s *SQLite) LatestCreatedAt(ctx context.Context, pubkey string, kind int, channelID string) (int64, error) {
	var n sql.NullInt64
	q := `SELECT MAX(created_at) FROM events WHERE pubkey = ? AND kind = ? AND `
	args := []any{pubkey, kind}
	if channelID == "" {
		q += `channel_id IS NULL`
	} else {
		q += `channel_id = ?`
		args = append(args, channelID)
	}
	err := s.r.QueryRowContext(ctx, q, args...).Scan(&n)
	return n.Int64, err
}

// Channels implements Store.
func (s *SQLite) Channels(ctx context.Context) ([]Channel, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT id, name, about, visibility, channel_type, topic, purpose, archived, ttl,
		created_by, created_at, deleted_at IS NOT NULL FROM channels`)
	if err != nil {
		return nil, err
	}
	byID := map[string]int{}
	var out []Channel
	for rows.Next() {
		var c Channel
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
		return nil, err
	}
	mrows, err := s.r.QueryContext(ctx, `SELECT channel_id, pubkey, role FROM members`)
	if err != nil {
		return nil, err
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
	return out, mrows.Err()
}

// MarkAuthSeen implements Store.
func (s *SQLite) MarkAuthSeen(ctx context.Context, id string, now, expires time.Time) (bool, error) {
	fresh := false
	err := s.Update(ctx, func(tx Tx) error {
		t := tx.(*sqliteTx)
		if err := t.exec(`DELETE FROM nip98_seen WHERE expires_at < ?`, now.Unix()); err != nil {
			return err
		}
		res, err := t.execResult(`INSERT OR IGNORE INTO nip98_seen (id, expires_at) VALUES (?, ?)`, id, expires.Unix())
		if err != nil {
			return err
		}
		n, _ := res.RowsAffected()
		fresh = n == 1
		return nil
	})
	return fresh, err
}

// sqliteDialect is SQLite's Dialect: "?" placeholders, the reader's channels as one JSON array
// parameter, and FTS5 search.
type sqliteDialect struct{}

func (sqliteDialect) Param(args *[]any, v any) string {
	*args = append(*args, v)
	return "?"
}

func (sqliteDialect) In(args *[]any, col string, vals []string) string {
	return inList(args, col, vals)
}

func (sqliteDialect) InInts(args *[]any, col string, vals []int) string {
	return inList(args, col, vals)
}

// inList is "col IN (?,?,…)", one parameter per value.
func inList[T any](args *[]any, col string, vals []T) string {
	for _, v := range vals {
		*args = append(*args, v)
	}
	return col + " IN (" + placeholders(len(vals)) + ")"
}

func (sqliteDialect) InSet(args *[]any, col string, vals []string) string {
	set, _ := json.Marshal(vals)
	if vals == nil {
		set = []byte("[]")
	}
	*args = append(*args, string(set))
	return col + " IN (SELECT value FROM json_each(?))"
}

func (sqliteDialect) Search(args *[]any, text string) string {
	q := FTSQuery(text)
	if q == "" {
		return ""
	}
	*args = append(*args, q)
	return "e.seq IN (SELECT rowid FROM events_fts WHERE events_fts MATCH ?)"
}

func placeholders(n int) string {
	if n <= 0 {
		return ""
	}
	return strings.Repeat("?,", n-1) + "?"
}

// FTSQuery turns free text into an FTS5 query that cannot be a syntax error: every word
// becomes a quoted string (all must match). Returns "" when there are no words.
func FTSQuery(s string) string {
	words := SearchTerms(s)
	var parts []string
	for _, w := range words {
		w = strings.ReplaceAll(w, `"`, `""`)
		parts = append(parts, `"`+w+`"`)
	}
	return strings.Join(parts, " ")
}
