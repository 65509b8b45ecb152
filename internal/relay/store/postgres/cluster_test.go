package postgres_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/relay/store"
	"github.com/buzz-harness/buzz/internal/relay/store/postgres"
	"github.com/buzz-harness/buzz/internal/relay/store/postgres/pgtest"
)

func signedNote(t *testing.T, content string) *nostr.Event {
	t.Helper()
	ev := nostr.Event{Kind: 1, Content: content, CreatedAt: nostr.Now(), Tags: nostr.Tags{}}
	if err := ev.Sign(nostr.GeneratePrivateKey()); err != nil {
		t.Fatal(err)
	}
	return &ev
}

// follow runs x.Follow until the test ends and returns the contents it hands on and its Up
// signals.
func follow(t *testing.T, x *postgres.Store, retry time.Duration) (<-chan string, <-chan struct{}) {
	stored, up := make(chan string, 16), make(chan struct{}, 16)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		x.Follow(ctx, postgres.Peer{
			Stored: func(ev *nostr.Event, _ string) { stored <- ev.Content },
			Up:     func() { up <- struct{}{} },
			Retry:  retry,
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	return stored, up
}

func next[T any](t *testing.T, c <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// Seqs are taken at insert, so a transaction can commit a lower seq after a higher one was
// seen. A node that lost its feed in between must still find it when catching up.
func TestFollowCatchUpFindsAnEarlierSeqCommittedLate(t *testing.T) {
	url := pgtest.URL(t)
	x, y := open(t, url), open(t, url)
	stored, up := follow(t, x, 2*time.Second)
	next(t, up, "the feed")

	inserted, commit, slowDone := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		first := true
		slowDone <- y.Update(context.Background(), func(tx store.Tx) error {
			if err := tx.SaveEvent(signedNote(t, "slow"), ""); err != nil {
				return err
			}
			if first {
				first = false
				close(inserted)
				<-commit
			}
			return nil
		})
	}()
	<-inserted
	if err := y.Update(context.Background(), func(tx store.Tx) error { return tx.SaveEvent(signedNote(t, "fast"), "") }); err != nil {
		t.Fatal(err)
	}
	if got := next(t, stored, "the fast event"); got != "fast" {
		t.Fatalf("handed on %q, want fast", got)
	}

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`,
		"buzz-relay-follow-"+x.Node()); err != nil {
		t.Fatal(err)
	}
	for x.Live() {
		time.Sleep(10 * time.Millisecond) // the feed notices the cut at once; this is not a timer
	}
	close(commit) // commits while x's feed is down: its notice is lost with the connection
	if err := <-slowDone; err != nil {
		t.Fatal(err)
	}
	next(t, up, "the feed to come back")
	if got := next(t, stored, "the slow event"); got != "slow" {
		t.Fatalf("catch-up handed on %q, want slow (and fast not twice)", got)
	}
	select {
	case got := <-stored:
		t.Fatalf("handed on %q again", got)
	default:
	}
}

// A node hands on only other nodes' events: it fanned its own out when it stored them.
func TestFollowSkipsTheNodesOwnEvents(t *testing.T) {
	url := pgtest.URL(t)
	x, y := open(t, url), open(t, url)
	stored, up := follow(t, x, 0)
	next(t, up, "the feed")
	for _, w := range []struct {
		s       *postgres.Store
		content string
	}{{x, "mine"}, {y, "theirs"}} {
		if err := w.s.Update(context.Background(), func(tx store.Tx) error { return tx.SaveEvent(signedNote(t, w.content), "") }); err != nil {
			t.Fatal(err)
		}
	}
	if got := next(t, stored, "an event"); got != "theirs" {
		t.Fatalf("handed on %q, want only the other node's event", got)
	}
}

// A stored event goes to the other nodes twice in one statement: inside a noticeSaved, which
// they fan out without reading it back, and by seq, which a node of an older version (that
// knows only the seq notice) loads it by.
func TestStoredEventIsNotifiedWholeAndBySeqForOlderNodes(t *testing.T) {
	url := pgtest.URL(t)
	y := open(t, url)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `LISTEN `+pgx.Identifier{y.Topic()}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	ev := signedNote(t, "fan me out")
	if err := y.Update(ctx, func(tx store.Tx) error { return tx.SaveEvent(ev, "") }); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for len(kinds) < 2 {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		if err != nil {
			t.Fatalf("notices so far %v: %v", kinds, err)
		}
		kind, rest, _ := strings.Cut(n.Payload, " ")
		_, rest, _ = strings.Cut(rest, " ") // the node
		switch kind {
		case "s":
			if !strings.Contains(rest, ev.ID) || !strings.Contains(rest, `"fan me out"`) {
				t.Fatalf("saved-event notice %q lacks the event", rest)
			}
		case "e":
			if _, err := strconv.ParseInt(rest, 10, 64); err != nil {
				t.Fatalf("seq notice %q is not one seq", rest)
			}
		}
		kinds = append(kinds, kind)
	}
	if !slices.Equal(kinds, []string{"s", "e"}) {
		t.Fatalf("notices %v, want the event, then its seq", kinds)
	}
}

func TestEventTooLargeForANoticeReachesTheOtherNodeBySeq(t *testing.T) {
	url := pgtest.URL(t)
	x, y := open(t, url), open(t, url)
	stored, up := follow(t, x, 0)
	next(t, up, "the feed")
	big := strings.Repeat("x", 9000) // past PostgreSQL's 8000-byte notice payload
	if err := y.Update(context.Background(), func(tx store.Tx) error { return tx.SaveEvent(signedNote(t, big), "") }); err != nil {
		t.Fatal(err)
	}
	if got := next(t, stored, "the large event"); got != big {
		t.Fatalf("handed on %d bytes, want the 9000-byte event", len(got))
	}
}
