package atomicfile

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// state is an owner with a counter; snapshot encodes it.
type state struct {
	mu    sync.Mutex
	n     int
	snaps atomic.Int32
}

func (s *state) snapshot() ([]byte, bool) {
	s.snaps.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	return []byte(strconv.Itoa(s.n)), s.n >= 0
}

func (s *state) set(n int) {
	s.mu.Lock()
	s.n = n
	s.mu.Unlock()
}

func TestSnapshotsMarkDoesNotWaitForABlockedWriteAndMarksFoldIntoOne(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	st := &state{}
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	w := NewSnapshots(path, 0o600, st.snapshot, BeforeRename(func(string) error {
		once.Do(func() { close(entered); <-release })
		return nil
	}))
	st.set(1)
	w.Mark()
	<-entered // the first write is stuck on the disk
	var last uint64
	for i := 2; i <= 100; i++ {
		st.set(i)
		last = w.Mark() // returns at once
	}
	close(release)
	if err := w.Wait(context.Background(), last); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != "100" {
		t.Fatalf("file holds %q, want the latest state 100", got)
	}
	if n := st.snaps.Load(); n != 2 {
		t.Fatalf("%d snapshots for 100 marks behind one blocked write, want 2", n)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestSnapshotsCloseWritesWhatIsMarked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	st := &state{}
	w := NewSnapshots(path, 0o600, st.snapshot)
	st.set(7)
	w.Mark()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != "7" {
		t.Fatalf("after Close the file holds %q, want 7", got)
	}
}

func TestSnapshotsRemoveTheFileWhenNothingIsKept(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	st := &state{}
	w := NewSnapshots(path, 0o600, st.snapshot)
	defer w.Close()
	st.set(3)
	if err := w.Wait(context.Background(), w.Mark()); err != nil {
		t.Fatal(err)
	}
	st.set(-1)
	if err := w.Wait(context.Background(), w.Mark()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("file still there (err %v) after a snapshot that keeps nothing", err)
	}
}

func TestSnapshotsReportAFailedWriteAndRetryOnTheNextMark(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	st := &state{}
	fail := atomic.Bool{}
	fail.Store(true)
	w := NewSnapshots(path, 0o600, st.snapshot, BeforeRename(func(string) error {
		if fail.Load() {
			return errors.New("disk full")
		}
		return nil
	}))
	defer w.Close()
	st.set(1)
	if err := w.Wait(context.Background(), w.Mark()); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("Wait after a failed write = %v, want the write's error", err)
	}
	fail.Store(false)
	st.set(2)
	if err := w.Wait(context.Background(), w.Mark()); err != nil {
		t.Fatalf("the next mark did not write: %v", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "2" {
		t.Fatalf("file holds %q, want 2", got)
	}
}

func TestSnapshotsEveryWritesAtMostOncePerIntervalAndCloseDoesNotWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "f")
		st := &state{}
		w := NewSnapshots(path, 0o600, st.snapshot, Every(time.Second))
		st.set(1)
		if err := w.Wait(context.Background(), w.Mark()); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		var last uint64
		for i := 2; i <= 50; i++ {
			st.set(i)
			last = w.Mark()
		}
		if err := w.Wait(context.Background(), last); err != nil {
			t.Fatal(err)
		}
		if waited := time.Since(start); waited != time.Second {
			t.Fatalf("the marks after a write were written after %v, want the interval (1s)", waited)
		}
		if n := st.snaps.Load(); n != 2 {
			t.Fatalf("%d snapshots for a write and 49 marks within the interval, want 2", n)
		}
		st.set(51)
		w.Mark()
		closed := time.Now()
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(path); string(got) != "51" || time.Since(closed) != 0 {
			t.Fatalf("Close left %q after %v, want 51 at once", got, time.Since(closed))
		}
	})
}
