package store_test

import (
	"context"
	"path/filepath"
	"testing"

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
