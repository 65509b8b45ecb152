package store_test

import (
	"context"
	"os"
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
