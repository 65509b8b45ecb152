package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
)

func openTemp(t *testing.T) (*SQLite, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "relay.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

func signed(t *testing.T, sk string, ev nostr.Event) *nostr.Event {
	t.Helper()
	if ev.Tags == nil {
		ev.Tags = nostr.Tags{}
	}
	if err := ev.Sign(sk); err != nil {
		t.Fatal(err)
	}
	return &ev
}

func save(t *testing.T, s *SQLite, ev *nostr.Event, ch string) error {
	t.Helper()
	return s.Update(context.Background(), func(tx Tx) error { return tx.SaveEvent(ev, ch) })
}

func TestSQLiteReopenKeepsDataAndSkipsAppliedMigrations(t *testing.T) {
	s, path := openTemp(t)
	sk := nostr.GeneratePrivateKey()
	ev := signed(t, sk, nostr.Event{Kind: 1, Content: "kept", CreatedAt: 10})
	if err := save(t, s, ev, ""); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s2, err := Open(path)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s2.Close()
	got, _, err := s2.Event(context.Background(), ev.ID)
	if err != nil || got == nil || got.Content != "kept" {
		t.Fatalf("after reopen: %v %v", got, err)
	}
}

func TestSQLiteAddressableKeepsNewestPerDTag(t *testing.T) {
	s, _ := openTemp(t)
	sk := nostr.GeneratePrivateKey()
	pk, _ := nostr.GetPublicKey(sk)
	a1 := signed(t, sk, nostr.Event{Kind: 30174, Content: "v1", CreatedAt: 10, Tags: nostr.Tags{{"d", "a"}}})
	a2 := signed(t, sk, nostr.Event{Kind: 30174, Content: "v2", CreatedAt: 20, Tags: nostr.Tags{{"d", "a"}}})
	b1 := signed(t, sk, nostr.Event{Kind: 30174, Content: "b", CreatedAt: 5, Tags: nostr.Tags{{"d", "b"}}})
	for _, ev := range []*nostr.Event{a1, a2, b1} {
		if err := save(t, s, ev, ""); err != nil {
			t.Fatal(err)
		}
	}
	if err := save(t, s, a2, ""); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("resaving the current version: %v", err)
	}
	if err := save(t, s, a1, ""); !errors.Is(err, ErrNewerExists) {
		t.Fatalf("resaving a replaced version: %v", err)
	}
	old := signed(t, sk, nostr.Event{Kind: 30174, Content: "v0", CreatedAt: 1, Tags: nostr.Tags{{"d", "a"}}})
	if err := save(t, s, old, ""); !errors.Is(err, ErrNewerExists) {
		t.Fatalf("older version: %v", err)
	}
	got, err := s.Query(context.Background(), Access{Pubkey: pk}, Filter{Filter: nostr.Filter{Kinds: []int{30174}}}, 10)
	if err != nil || len(got) != 2 || got[0].Content != "v2" || got[1].Content != "b" {
		t.Fatalf("got %v %v", got, err)
	}
}

func TestSQLiteMarkAuthSeenRefusesRepeatUntilExpiry(t *testing.T) {
	s, _ := openTemp(t)
	now := time.Unix(1000, 0)
	ctx := context.Background()
	if fresh, err := s.MarkAuthSeen(ctx, "id1", now, now.Add(time.Minute)); err != nil || !fresh {
		t.Fatalf("first: %v %v", fresh, err)
	}
	if fresh, _ := s.MarkAuthSeen(ctx, "id1", now, now.Add(time.Minute)); fresh {
		t.Fatal("repeat accepted")
	}
	// Once expired the row is swept (the event itself would fail the freshness check anyway).
	if fresh, _ := s.MarkAuthSeen(ctx, "id1", now.Add(2*time.Minute), now.Add(3*time.Minute)); !fresh {
		t.Fatal("expired id still blocked")
	}
}

// The store holds no read rule of its own: it returns channel events only from the channels
// the relay's Access lists, and applies the kind rules it is given.
func TestSQLiteQueryAppliesTheAccessItIsGiven(t *testing.T) {
	s, _ := openTemp(t)
	ctx := context.Background()
	owner, stranger := nostr.GeneratePrivateKey(), nostr.GeneratePrivateKey()
	opk, _ := nostr.GetPublicKey(owner)
	spk, _ := nostr.GetPublicKey(stranger)
	err := s.Update(ctx, func(tx Tx) error {
		if err := tx.PutChannel(Channel{ID: "c", Name: "c", Visibility: "private", Type: "stream", CreatedBy: opk}); err != nil {
			return err
		}
		if err := tx.SaveEvent(signed(t, owner, nostr.Event{Kind: 9, Content: "x", CreatedAt: 1, Tags: nostr.Tags{{"h", "c"}}}), "c"); err != nil {
			return err
		}
		if err := tx.SaveEvent(signed(t, owner, nostr.Event{Kind: 44100, CreatedAt: 2, Tags: nostr.Tags{{"p", opk}}}), ""); err != nil {
			return err
		}
		return tx.SaveEvent(signed(t, owner, nostr.Event{Kind: 30174, CreatedAt: 3, Tags: nostr.Tags{{"d", "core"}}}), "")
	})
	if err != nil {
		t.Fatal(err)
	}
	rules := func(pk string, chans ...string) Access {
		return Access{Pubkey: pk, Channels: chans, PGated: []int{44100}, Personal: []int{30174}}
	}
	f := Filter{}
	if got, _ := s.Query(ctx, rules(opk, "c"), f, 10); len(got) != 3 {
		t.Fatalf("a reader granted the channel sees %d events, want 3", len(got))
	}
	if got, _ := s.Query(ctx, rules(spk), f, 10); len(got) != 0 {
		t.Fatalf("a reader granted nothing sees %d events: %v", len(got), got)
	}
	if n, _ := s.Count(ctx, rules(spk), []Filter{f}); n != 0 {
		t.Fatalf("a reader granted nothing counts %d", n)
	}
	if got, _ := s.Query(ctx, rules(spk, "c"), f, 10); len(got) != 1 || got[0].Kind != 9 {
		t.Fatalf("a stranger granted the channel sees %v, want only the channel message", got)
	}
}

func TestFTSQueryQuotesEveryWord(t *testing.T) {
	for in, want := range map[string]string{
		`deploy`:         `"deploy"`,
		`a "b" OR c*`:    `"a" """b""" "OR" "c*"`,
		"  \t\n":         ``,
		"NEAR(x y)\x00z": `"NEAR(x" "y)" "z"`,
	} {
		if got := FTSQuery(in); got != want {
			t.Errorf("FTSQuery(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSQLiteSearchNeverFailsOnOddInput(t *testing.T) {
	s, _ := openTemp(t)
	sk := nostr.GeneratePrivateKey()
	pk, _ := nostr.GetPublicKey(sk)
	save(t, s, signed(t, sk, nostr.Event{Kind: 1, Content: "release notes for v2", CreatedAt: 1}), "")
	for _, q := range []string{`"`, `*`, `NEAR(`, `notes AND`, `v2)`, `-x`, `release`} {
		if _, err := s.Query(context.Background(), Access{Pubkey: pk}, Filter{Filter: nostr.Filter{Search: q}}, 10); err != nil {
			t.Errorf("search %q: %v", q, err)
		}
	}
}

// relay.db and its WAL files hold private channels: nobody but the relay's user may read them,
// also when an older relay left the database world-readable.
func TestSQLiteFilesAreOwnerOnly(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "relay.db")
	old, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	old.Close()
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sk := nostr.GeneratePrivateKey()
	if err := save(t, s, signed(t, sk, nostr.Event{Kind: 1, Content: "x", CreatedAt: 1}), ""); err != nil {
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
