package store_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/relay/store"
	"github.com/buzz-harness/buzz/internal/relay/store/storetest"
)

func openTemp(t *testing.T) (*store.SQLite, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "relay.db")
	s, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

func TestSQLiteStoreSuite(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, _ := openTemp(t)
		return s
	})
}

func TestSQLiteReopenKeepsDataAndSkipsAppliedMigrations(t *testing.T) {
	s, path := openTemp(t)
	sk := nostr.GeneratePrivateKey()
	ev := nostr.Event{Kind: 1, Content: "kept", CreatedAt: 10, Tags: nostr.Tags{}}
	ev.Sign(sk)
	if err := s.Update(context.Background(), func(tx store.Tx) error { return tx.SaveEvent(&ev, "") }); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s2, err := store.Open(path)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s2.Close()
	got, _, err := s2.Event(context.Background(), ev.ID)
	if err != nil || got == nil || got.Content != "kept" {
		t.Fatalf("after reopen: %v %v", got, err)
	}
}

func TestFTSQueryQuotesEveryWord(t *testing.T) {
	for in, want := range map[string]string{
		`deploy`:         `"deploy"`,
		`a "b" OR c*`:    `"a" """b""" "OR" "c*"`,
		"  \t\n":         ``,
		"NEAR(x y)\x00z": `"NEAR(x" "y)" "z"`,
	} {
		if got := store.FTSQuery(in); got != want {
			t.Errorf("FTSQuery(%q) = %q, want %q", in, got, want)
		}
	}
}

func BenchmarkSQLiteStore(b *testing.B) {
	storetest.Bench(b, func(tb testing.TB) store.Store {
		s, err := store.Open(filepath.Join(tb.TempDir(), "relay.db"))
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { s.Close() })
		return s
	})
}

// relay.db and its WAL files hold private channels: nobody but the relay's user may read them,
// also when an older relay left the database world-readable.
func TestSQLiteFilesAreOwnerOnly(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "relay.db")
	old, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	old.Close()
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ev := nostr.Event{Kind: 1, Content: "x", CreatedAt: 1, Tags: nostr.Tags{}}
	ev.Sign(nostr.GeneratePrivateKey())
	if err := s.Update(context.Background(), func(tx store.Tx) error { return tx.SaveEvent(&ev, "") }); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if mode := fi.Mode().Perm(); mode&0o077 != 0 {
			t.Errorf("%s has mode %04o, want no group/other access", filepath.Base(p), mode)
		}
	}
}

// Writes queued while the store closes are each answered — committed, or ErrClosed — and none
// is left waiting forever in the writer's buffer.
func TestWritesRacingCloseAreAllAnswered(t *testing.T) {
	s, _ := openTemp(t)
	const writers = 32
	answered := make(chan error, writers*20)
	var wg sync.WaitGroup
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				answered <- <-s.UpdateAsync(context.Background(), func(store.Tx) error { return nil })
			}
		}()
	}
	_ = s.Close()
	wg.Wait() // a write stranded in the buffer would hang here (the test's deadline catches it)
	close(answered)
	n := 0
	for err := range answered {
		if err != nil && !errors.Is(err, store.ErrClosed) {
			t.Fatalf("write answered %v, want nil or ErrClosed", err)
		}
		n++
	}
	if n != writers*20 {
		t.Fatalf("%d answers, want %d", n, writers*20)
	}
}

// A database written by the first schema (0001: tag rows with a rowid, every event in the
// search index) migrates on Open and still answers the relay's queries.
func TestSQLiteMigratesFirstSchemaData(t *testing.T) {
	path := filepath.Join(t.TempDir(), "relay.db")
	legacy := storetest.NewLegacy(t)
	writeFirstSchema(t, path, legacy.Events)
	s, err := store.Open(path)
	if err != nil {
		t.Fatalf("open the 0001 database: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	legacy.Check(t, s)
}

// writeFirstSchema creates path at schema version 1 and stores evs as that version's store did.
func writeFirstSchema(t *testing.T, path string, evs []storetest.LegacyEvent) {
	t.Helper()
	ddl, err := os.ReadFile("migrations/0001_init.sql")
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	must := func(_ sql.Result, err error) sql.Result {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return nil
	}
	must(db.Exec(string(ddl)))
	must(db.Exec(`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY); INSERT INTO schema_migrations VALUES (1)`))
	for _, le := range evs {
		ev := le.Event
		tags, _ := json.Marshal(ev.Tags)
		var ch, d any
		if le.Channel != "" {
			ch = le.Channel
		}
		if ev.Kind >= 30000 && ev.Kind < 40000 {
			d = ev.Tags.GetD()
		}
		res, err := db.Exec(`INSERT INTO events (id, pubkey, created_at, kind, tags, content, sig, channel_id, d_tag)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, ev.ID, ev.PubKey, int64(ev.CreatedAt), ev.Kind, string(tags), ev.Content, ev.Sig, ch, d)
		if err != nil {
			t.Fatal(err)
		}
		seq, _ := res.LastInsertId()
		for _, k := range store.IndexedTags(ev.Tags, nil) {
			must(db.Exec(`INSERT INTO event_tags (seq, name, value, created_at) VALUES (?, ?, ?, ?)`, seq, k.Name, k.Value, int64(ev.CreatedAt)))
		}
		if strings.TrimSpace(ev.Content) != "" {
			must(db.Exec(`INSERT INTO events_fts (rowid, content) VALUES (?, ?)`, seq, ev.Content))
		}
	}
}

// The migrations that rebuild the search index name store.SearchKinds in SQL: they must list
// the same kinds the stores index new events by.
func TestSearchMigrationsIndexTheSearchKinds(t *testing.T) {
	ks := make([]string, len(store.SearchKinds))
	for i, k := range store.SearchKinds {
		ks[i] = strconv.Itoa(k)
	}
	want := "kind IN (" + strings.Join(ks, ", ") + ")"
	for _, f := range []string{"migrations/0002_trim_write_cost.sql", "postgres/migrations/0003_trim_write_cost.sql"} {
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(body), want) {
			t.Errorf("%s does not select %s", f, want)
		}
	}
}

// writeWALPages commits n events of 8 KiB each (two or three WAL pages apiece), one per commit.
func writeWALPages(t *testing.T, s *store.SQLite, n int) {
	t.Helper()
	sk := nostr.GeneratePrivateKey()
	body := strings.Repeat("x", 8<<10)
	for i := range n {
		ev := nostr.Event{Kind: 1, CreatedAt: nostr.Timestamp(i + 1), Content: body, Tags: nostr.Tags{}}
		if err := ev.Sign(sk); err != nil {
			t.Fatal(err)
		}
		if err := s.Update(context.Background(), func(tx store.Tx) error { return tx.SaveEvent(&ev, "") }); err != nil {
			t.Fatal(err)
		}
	}
}

func walSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// A commit never checkpoints: SQLite's automatic checkpoint (at 1,000 WAL pages) would reuse the
// WAL from its start, so the file could not outgrow ~4 MiB; with the checkpointer held off it does.
func TestSQLiteCommitsNeverCheckpoint(t *testing.T) {
	s, path := openTemp(t)
	store.SetCheckpointEvery(s, time.Hour) // one checkpoint after the first commit, then none
	writeWALPages(t, s, 1000)
	if got := walSize(t, path); got < 6<<20 {
		t.Fatalf("WAL is %d bytes after ~8 MiB of commits: a commit checkpointed", got)
	}
}

// The checkpointer keeps the WAL bounded under a writer that never pauses: ~40 MiB of WAL frames
// are written, and once past 16 MiB a RESTART checkpoint lets the writer start the WAL over.
func TestSQLiteCheckpointerKeepsTheWALShort(t *testing.T) {
	s, path := openTemp(t)
	store.SetCheckpointEvery(s, 0)
	writeWALPages(t, s, 1000)
	if got := walSize(t, path); got > 32<<20 {
		t.Fatalf("WAL grew to %d bytes over ~8 MiB of commits: the checkpointer did not keep up", got)
	}
}

// Writes queued together commit in one transaction; one that fails after writing undoes only
// its own changes, and the others still commit.
func TestSQLiteBatchedWriteFailureUndoesOnlyItsOwnChanges(t *testing.T) {
	s, _ := openTemp(t)
	ctx := context.Background()
	sk := nostr.GeneratePrivateKey()
	event := func(content string) *nostr.Event {
		ev := &nostr.Event{Kind: 1, CreatedAt: 1, Content: content, Tags: nostr.Tags{}}
		if err := ev.Sign(sk); err != nil {
			t.Fatal(err)
		}
		return ev
	}
	a, b, c := event("a"), event("b"), event("c")
	// Hold the writer so the next three writes queue up and form one batch.
	release := make(chan struct{})
	held := s.UpdateAsync(ctx, func(store.Tx) error { <-release; return nil })
	errBoom := errors.New("boom")
	results := []<-chan error{
		s.UpdateAsync(ctx, func(tx store.Tx) error { return tx.SaveEvent(a, "") }),
		s.UpdateAsync(ctx, func(tx store.Tx) error {
			if err := tx.SaveEvent(b, ""); err != nil {
				return err
			}
			return errBoom
		}),
		s.UpdateAsync(ctx, func(tx store.Tx) error { return tx.SaveEvent(c, "") }),
	}
	close(release)
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	for i, want := range []error{nil, errBoom, nil} {
		if got := <-results[i]; !errors.Is(got, want) {
			t.Fatalf("write %d: %v, want %v", i, got, want)
		}
	}
	for _, c := range []struct {
		ev   *nostr.Event
		want bool
	}{{a, true}, {b, false}, {c, true}} {
		got, _, err := s.Event(ctx, c.ev.ID)
		if err != nil {
			t.Fatal(err)
		}
		if (got != nil) != c.want {
			t.Errorf("event %q stored = %v, want %v", c.ev.Content, got != nil, c.want)
		}
	}
}

// A replaceable event's tag rows are written, and deleted when it is replaced, by one statement
// each: a tag-heavy kind 0 costs the single writer no more statements than a one-tag one (a
// kind 0 with 34,134 t tags once cost a second of it, one statement per tag each way).
func TestSQLiteTagRowsCostOneStatementEachWay(t *testing.T) {
	s, _ := openTemp(t)
	saveAndReplace := func(tags int) int64 {
		sk := nostr.GeneratePrivateKey()
		before := store.WriteStatements(s)
		for at := range 2 {
			ev := nostr.Event{Kind: 0, CreatedAt: nostr.Timestamp(1 + at + 10*tags), Content: "{}"}
			for i := range tags {
				ev.Tags = append(ev.Tags, nostr.Tag{"t", strconv.Itoa(i)})
			}
			ev.Sign(sk)
			if err := s.Update(context.Background(), func(tx store.Tx) error { return tx.SaveEvent(&ev, "") }); err != nil {
				t.Fatal(err)
			}
		}
		return store.WriteStatements(s) - before
	}
	if one, many := saveAndReplace(1), saveAndReplace(200); many != one {
		t.Fatalf("saving and replacing a kind 0 ran %d statements with 200 tags, %d with 1", many, one)
	}
}
