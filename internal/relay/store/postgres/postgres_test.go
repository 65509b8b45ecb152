package postgres_test

import (
	"context"
	"sync"
	"testing"

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
