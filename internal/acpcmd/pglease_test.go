package acpcmd

import (
	"context"
	"crypto/rand"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/buzz-harness/buzz/internal/leakcheck"
	"github.com/buzz-harness/buzz/internal/relay/store/postgres/pgtest"
)

const leaseWatcher = "github.com/buzz-harness/buzz/internal/acpcmd.(*pgLease).watch"

// holdPGLease takes a PostgreSQL lease for an agent of its own (advisory locks are per
// database, not per test schema). onLost is the test's.
func holdPGLease(t *testing.T, onLost func(error)) *pgLease {
	t.Helper()
	dsn := pgtest.URL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := takePGLease(ctx, dsn, rand.Text(), []string{"ws://relay.test"}, slog.New(slog.DiscardHandler), onLost)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestPGLeaseReleaseReturnsOnlyOnceItsWatcherHasStopped(t *testing.T) {
	l := holdPGLease(t, func(err error) { t.Errorf("a held lease was reported lost: %v", err) })
	l.release()
	if left := leakcheck.Running(leaseWatcher); len(left) > 0 {
		t.Fatalf("lease watcher still running after release:\n%s", strings.Join(left, "\n\n"))
	}
}

// The connection holding the lease is killed from the server side, as a dead machine's is
// dropped: the watcher reports it, on its own goroutine, and is gone once release returns.
func TestPGLeaseLostWithItsConnectionIsReportedByItsWatcher(t *testing.T) {
	lost, proceed := make(chan error, 2), make(chan struct{})
	l := holdPGLease(t, func(err error) {
		lost <- err
		<-proceed
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, l.conn.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	if _, err := admin.Exec(ctx, "SELECT pg_terminate_backend($1)", l.conn.PgConn().PID()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-lost:
		if !strings.Contains(err.Error(), "lease lost") {
			t.Errorf("onLost told %q, want it to say the lease is lost", err)
		}
	case <-ctx.Done():
		t.Fatal("a lease whose connection was terminated was not reported lost")
	}
	if n := len(leakcheck.Running(leaseWatcher)); n != 1 {
		t.Errorf("%d lease watchers while one reports the loss, want 1", n)
	}
	close(proceed)
	l.release()
	if left := leakcheck.Running(leaseWatcher); len(left) > 0 {
		t.Fatalf("lease watcher still running after release:\n%s", strings.Join(left, "\n\n"))
	}
	if len(lost) > 0 {
		t.Fatalf("the lease was reported lost twice: %v", <-lost)
	}
}
