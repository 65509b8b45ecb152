package store_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
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
