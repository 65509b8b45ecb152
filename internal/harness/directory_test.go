package harness

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/buzz-harness/buzz/internal/clock"
	"github.com/buzz-harness/buzz/internal/testwait"
)

// startDirectoryWorker runs runDirectory on a fake clock; each write's "n" field goes to the
// returned channel, and fail makes the next write fail.
func startDirectoryWorker(t *testing.T) (*directory, *clock.Fake, chan int, chan bool) {
	t.Helper()
	d, clk := newDirectory(), clock.NewFake(time.Unix(1_000_000, 0))
	writes, fail := make(chan int, 16), make(chan bool, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		runDirectory(ctx, d, clk, slog.New(slog.DiscardHandler), func(_ context.Context, f map[string]any) error {
			writes <- f["n"].(int)
			select {
			case <-fail:
				return errors.New("relay down")
			default:
				return nil
			}
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	return d, clk, writes, fail
}

func TestDirectoryWritesAtOnceThenCoalescesABurstIntoOneWrite(t *testing.T) {
	d, clk, writes, _ := startDirectoryWorker(t)
	d.offer(map[string]any{"n": 1})
	if n := <-writes; n != 1 {
		t.Fatalf("first write %d", n)
	}
	d.offer(map[string]any{"n": 2})
	testwait.Eventually(t, 5*time.Second, func() bool { return len(clk.Pending()) == 1 }, "the worker to wait out the debounce")
	d.offer(map[string]any{"n": 3})
	select {
	case n := <-writes:
		t.Fatalf("write %d within the debounce", n)
	default:
	}
	clk.Advance(directoryDebounce)
	if n := <-writes; n != 3 {
		t.Fatalf("write after the debounce %d, want the newest (3)", n)
	}
}

func TestDirectoryRetriesAFailedWriteWithTheNewestFields(t *testing.T) {
	d, clk, writes, fail := startDirectoryWorker(t)
	fail <- true
	d.offer(map[string]any{"n": 1})
	if n := <-writes; n != 1 {
		t.Fatalf("first write %d", n)
	}
	testwait.Eventually(t, 5*time.Second, func() bool { return len(clk.Pending()) == 1 }, "the worker to wait to retry")
	d.offer(map[string]any{"n": 2})
	clk.Advance(directoryRetry)
	if n := <-writes; n != 2 {
		t.Fatalf("retry wrote %d, want the newest (2)", n)
	}
}
