package atomicfile

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// Snapshots keeps one file in step with its owner's state, written by one goroutine of its own:
// the owner changes its state in memory and calls Mark, which never blocks; the goroutine then
// asks the owner for a snapshot and writes it with WriteFile. Marks made while a write runs fold
// into one more write (latest wins), so a slow disk costs the owner nothing and the file is
// never written by two goroutines at once. With Every, writes are also spaced in time.
//
// The snapshot function is called on the writing goroutine; it should take the owner's lock
// only to copy or encode its state, never hold it across the write.
type Snapshots struct {
	path     string
	perm     os.FileMode
	snapshot func() (data []byte, keep bool)
	opts     []Option
	every    time.Duration // Every

	mu      sync.Mutex
	cond    *sync.Cond
	marked  uint64 // versions asked for
	written uint64 // the newest version on disk
	tried   uint64 // the version of the last write attempt
	err     error  // that attempt's failure (nil: it succeeded)
	closed  bool
	closing chan struct{} // closed by Close: ends a wait between writes
	done    chan struct{}
}

// NewSnapshots starts the writer of path. snapshot returns the file's new content, or keep =
// false to remove the file (nothing to remember). Close stops the writer.
func NewSnapshots(path string, perm os.FileMode, snapshot func() (data []byte, keep bool), opts ...Option) *Snapshots {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	s := &Snapshots{path: path, perm: perm, snapshot: snapshot, opts: opts, every: o.every,
		closing: make(chan struct{}), done: make(chan struct{})}
	s.cond = sync.NewCond(&s.mu)
	go s.run()
	return s
}

// Mark says the state changed; it returns the version a Wait can wait for.
func (s *Snapshots) Mark() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return s.marked
	}
	s.marked++
	s.cond.Broadcast()
	return s.marked
}

// Wait blocks until version v (or a later one) is on disk, the writer is closed, or ctx ends.
// It returns the last write's error if that write failed.
func (s *Snapshots) Wait(ctx context.Context, v uint64) error {
	stop := context.AfterFunc(ctx, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.cond.Broadcast()
	})
	defer stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	failed := func() bool { return s.tried >= v && s.err != nil }
	for s.written < v && !failed() && !s.closed && ctx.Err() == nil {
		s.cond.Wait()
	}
	switch {
	case s.written >= v:
		return nil
	case failed():
		return s.err
	case ctx.Err() != nil:
		return ctx.Err()
	}
	return errors.New("atomicfile: snapshots closed")
}

// Close writes what is marked and not yet written, stops the writer and reports the last
// write's error.
func (s *Snapshots) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		<-s.done
		return nil
	}
	s.closed = true
	close(s.closing)
	s.cond.Broadcast()
	s.mu.Unlock()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func (s *Snapshots) run() {
	defer close(s.done)
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		for s.written == s.marked && !s.closed {
			s.cond.Wait()
		}
		if s.written == s.marked { // closed with nothing pending
			return
		}
		v := s.marked
		s.mu.Unlock()
		err := s.write()
		s.mu.Lock()
		s.tried, s.err = v, err
		if err == nil {
			s.written = v
		}
		s.cond.Broadcast()
		if err != nil && s.closed {
			return // one try at Close; the error is Close's
		}
		if err != nil {
			// Wait for the next change before trying again: a full disk must not spin.
			for s.marked == v && !s.closed {
				s.cond.Wait()
			}
		}
		if err == nil && s.every > 0 && !s.closed {
			s.mu.Unlock()
			t := time.NewTimer(s.every)
			select {
			case <-t.C:
			case <-s.closing:
				t.Stop()
			}
			s.mu.Lock()
		}
	}
}

func (s *Snapshots) write() error {
	data, keep := s.snapshot()
	if !keep {
		if err := os.Remove(s.path); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("remove %s: %w", s.path, err)
		}
		return nil
	}
	return WriteFile(s.path, data, s.perm, s.opts...)
}
