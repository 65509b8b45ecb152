package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/relay/store"
	"github.com/buzz-harness/buzz/internal/relay/store/postgres"
	"github.com/buzz-harness/buzz/internal/relay/store/postgres/pgtest"
	"github.com/buzz-harness/buzz/internal/relay/store/storetest"
)

func open(t *testing.T, url string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestPostgresStoreSuite(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return open(t, pgtest.URL(t)) })
}

func TestPostgresNodesStartingTogetherMigrateOnce(t *testing.T) {
	url := pgtest.URL(t)
	const nodes = 4
	stores := make([]*postgres.Store, nodes)
	errs := make([]error, nodes)
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Go(func() { stores[i], errs[i] = postgres.Open(context.Background(), url) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
		t.Cleanup(func() { stores[i].Close() })
	}
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var applied, distinct int
	if err := conn.QueryRow(context.Background(), `SELECT COUNT(*), COUNT(DISTINCT version) FROM schema_migrations`).Scan(&applied, &distinct); err != nil {
		t.Fatal(err)
	}
	if applied != distinct || applied == 0 {
		t.Fatalf("schema_migrations has %d rows for %d versions", applied, distinct)
	}
}

func TestPostgresNodesShareOneStore(t *testing.T) {
	url := pgtest.URL(t)
	a, b := open(t, url), open(t, url)
	sk := nostr.GeneratePrivateKey()
	ev := nostr.Event{Kind: 1, CreatedAt: 1, Content: "written on a", Tags: nostr.Tags{}}
	ev.Sign(sk)
	if err := a.Update(context.Background(), func(tx store.Tx) error { return tx.SaveEvent(&ev, "") }); err != nil {
		t.Fatal(err)
	}
	if got, _, err := b.Event(context.Background(), ev.ID); err != nil || got == nil {
		t.Fatalf("node b does not see node a's event: %v %v", got, err)
	}
	// Reopening on a migrated schema applies nothing and keeps the data.
	c := open(t, url)
	if got, _, err := c.Event(context.Background(), ev.ID); err != nil || got == nil {
		t.Fatalf("after reopen: %v %v", got, err)
	}
}

func TestOpenRejectsABadURLInOneLine(t *testing.T) {
	_, err := postgres.Open(context.Background(), "postgres://host:notaport/db")
	if err == nil {
		t.Fatal("bad URL accepted")
	}
}

func BenchmarkPostgresStore(b *testing.B) {
	storetest.Bench(b, func(tb testing.TB) store.Store {
		s, err := postgres.Open(context.Background(), pgtest.URL(tb))
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { s.Close() })
		return s
	})
}

// Two nodes saving versions of one replaceable event at once: the second waits for the first
// to commit and then replaces it, instead of both seeing no rival and both being stored.
func TestPostgresSecondWriterOfAnAddressWaitsForTheFirst(t *testing.T) {
	ctx := context.Background()
	base := pgtest.URL(t)
	u, _ := url.Parse(base)
	q := u.Query()
	q.Set("application_name", "node-b-"+q.Get("search_path"))
	u.RawQuery = q.Encode()
	nodeA, nodeB := open(t, base), open(t, u.String())
	watch, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close(ctx)

	sk := nostr.GeneratePrivateKey()
	v1 := nostr.Event{Kind: 10002, CreatedAt: 10, Content: "v1", Tags: nostr.Tags{}}
	v2 := nostr.Event{Kind: 10002, CreatedAt: 20, Content: "v2", Tags: nostr.Tags{}}
	v1.Sign(sk)
	v2.Sign(sk)

	aSaved := make(chan struct{})
	var once sync.Once
	bDone := make(chan error, 1)
	go func() {
		<-aSaved
		bDone <- nodeB.Update(ctx, func(tx store.Tx) error { return tx.SaveEvent(&v2, "") })
	}()
	bFinishedFirst := false
	err = nodeA.Update(ctx, func(tx store.Tx) error {
		if err := tx.SaveEvent(&v1, ""); err != nil {
			return err
		}
		once.Do(func() { close(aSaved) })
		// Keep this transaction open until node B either finished (it did not wait: the bug)
		// or is blocked on a lock this transaction holds.
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		deadline := time.After(30 * time.Second)
		for {
			select {
			case err := <-bDone:
				bDone <- err
				bFinishedFirst = true
				return nil
			case <-deadline:
				t.Error("node B neither finished nor waited for a lock")
				return nil
			case <-tick.C:
			}
			var waiting int
			if err := watch.QueryRow(ctx, `SELECT COUNT(*) FROM pg_stat_activity
				WHERE application_name = $1 AND wait_event_type = 'Lock'`, q.Get("application_name")).Scan(&waiting); err != nil {
				return err
			}
			if waiting > 0 {
				return nil
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-bDone; err != nil {
		t.Fatalf("node B: %v", err)
	}
	if bFinishedFirst {
		t.Error("node B saved while node A's version was uncommitted")
	}
	got, err := nodeA.Query(ctx, store.Access{}, store.Filter{Filter: nostr.Filter{Kinds: []int{10002}}}, 10)
	if err != nil || len(got) != 1 || got[0].Content != "v2" {
		t.Fatalf("stored versions: %v (%v), want only v2", got, err)
	}
}

// A database written by the schema before the write-cost trim (0001-0002: tag rows with a seq
// index and foreign key, a tsvector and GIN entry for every event) migrates on Open and still
// answers the relay's queries.
func TestPostgresMigratesSecondSchemaData(t *testing.T) {
	url := pgtest.URL(t)
	legacy := storetest.NewLegacy(t)
	writeSecondSchema(t, url, legacy.Events)
	legacy.Check(t, open(t, url))
}

// writeSecondSchema creates the schema at version 2 and stores evs as that version's store did.
func writeSecondSchema(t *testing.T, url string, evs []storetest.LegacyEvent) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := conn.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%.60s: %v", sql, err)
		}
	}
	for _, f := range []string{"migrations/0001_init.sql", "migrations/0002_origin.sql"} {
		ddl, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		exec(string(ddl))
	}
	exec(`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())`)
	exec(`INSERT INTO schema_migrations (version) VALUES (1), (2)`)
	for _, le := range evs {
		ev := le.Event
		tags, _ := json.Marshal(ev.Tags)
		var ch, d *string
		if le.Channel != "" {
			ch = &le.Channel
		}
		if ev.Kind >= 30000 && ev.Kind < 40000 {
			v := ev.Tags.GetD()
			d = &v
		}
		var seq int64
		if err := conn.QueryRow(ctx, `INSERT INTO events (id, pubkey, created_at, kind, tags, content, sig, channel_id, d_tag)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING seq`,
			ev.ID, ev.PubKey, int64(ev.CreatedAt), ev.Kind, string(tags), ev.Content, ev.Sig, ch, d).Scan(&seq); err != nil {
			t.Fatal(err)
		}
		for _, k := range store.IndexedTags(ev.Tags, nil) {
			exec(`INSERT INTO event_tags (seq, name, value, created_at) VALUES ($1, $2, $3, $4)`, seq, k.Name, k.Value, int64(ev.CreatedAt))
		}
	}
}

// Writes queued together commit in one transaction; one that fails after writing undoes only
// its own changes, and the others still commit, as with SQLite's writer.
func TestPostgresBatchedWriteFailureUndoesOnlyItsOwnChanges(t *testing.T) {
	s := open(t, pgtest.URL(t))
	ctx := context.Background()
	sk := nostr.GeneratePrivateKey()
	event := func(content string) *nostr.Event {
		ev := &nostr.Event{Kind: 1, CreatedAt: 1, Content: content, Tags: nostr.Tags{{"t", content}}}
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
		s.UpdateAsync(ctx, func(tx store.Tx) error { return tx.SaveEvent(a, "") }),
	}
	close(release)
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	for i, want := range []error{nil, errBoom, nil, store.ErrDuplicate} {
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
		n, err := s.Count(ctx, store.Access{}, []store.Filter{{Filter: nostr.Filter{Tags: nostr.TagMap{"t": {c.ev.Content}}}}})
		if err != nil {
			t.Fatal(err)
		}
		if (n == 1) != c.want {
			t.Errorf("event %q found by its tag %d times, want stored = %v", c.ev.Content, n, c.want)
		}
	}
}

func TestPostgresQueuedWritesAfterCloseFailWithErrClosed(t *testing.T) {
	s := open(t, pgtest.URL(t))
	s.Close()
	if err := <-s.UpdateAsync(context.Background(), func(store.Tx) error { return nil }); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("UpdateAsync after Close: %v, want store.ErrClosed", err)
	}
}

// A batch of plain events is saved in one multi-row insert; one already stored, or repeated in
// the batch, is answered as a duplicate without failing the others.
func TestPostgresBatchAnswersDuplicatesWithoutFailingTheOthers(t *testing.T) {
	s := open(t, pgtest.URL(t))
	ctx := context.Background()
	sk := nostr.GeneratePrivateKey()
	event := func(content string) *nostr.Event {
		ev := &nostr.Event{Kind: 9, CreatedAt: 1, Content: content, Tags: nostr.Tags{{"t", content}}}
		if err := ev.Sign(sk); err != nil {
			t.Fatal(err)
		}
		return ev
	}
	old, y, z := event("old"), event("y"), event("z")
	if err := s.Update(ctx, func(tx store.Tx) error { return tx.SaveEvent(old, "") }); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	held := s.UpdateAsync(ctx, func(store.Tx) error { <-release; return nil })
	var results []<-chan error
	for _, ev := range []*nostr.Event{old, y, y, z} {
		results = append(results, s.UpdateAsync(ctx, func(tx store.Tx) error { return tx.SaveEvent(ev, "") }))
	}
	close(release)
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	for i, want := range []error{store.ErrDuplicate, nil, store.ErrDuplicate, nil} {
		if got := <-results[i]; !errors.Is(got, want) {
			t.Fatalf("write %d: %v, want %v", i, got, want)
		}
	}
	for _, ev := range []*nostr.Event{old, y, z} {
		n, err := s.Count(ctx, store.Access{}, []store.Filter{{Filter: nostr.Filter{Tags: nostr.TagMap{"t": {ev.Content}}}}})
		if err != nil || n != 1 {
			t.Errorf("event %q found by its tag %d times (%v), want once", ev.Content, n, err)
		}
	}
}
