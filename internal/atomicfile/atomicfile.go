// Package atomicfile writes files that must never be seen half-written (session store, journal,
// keys) and takes the per-process exclusive locks that keep two harnesses off the same state.
//
// A write goes to a uniquely named temp file in the target's directory, is fsynced, renamed over
// the target, and then the directory is fsynced so the rename itself survives a power cut. A
// crash at any point leaves either the old file or the new one, never a mix.
package atomicfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// Option adjusts one WriteFile call, or a Snapshots writer's.
type Option func(*options)

type options struct {
	beforeRename func(tmpPath string) error
	every        time.Duration // Snapshots only: the least time between two writes
}

// Every makes a Snapshots writer wait at least d after each write before the next, so a state
// that changes many times a second is written about once per d (Close still writes what is
// pending). For state whose last moments a crash may lose: what was marked in the last d.
func Every(d time.Duration) Option {
	return func(o *options) { o.every = d }
}

// BeforeRename runs fn after the temp file is written and synced but before it is renamed over
// the target. If fn returns an error the write is abandoned as if the process had crashed at that
// point (the temp file is removed). It exists for crash-safety tests.
func BeforeRename(fn func(tmpPath string) error) Option {
	return func(o *options) { o.beforeRename = fn }
}

// TempPrefix is the prefix of temp files WriteFile creates next to path; owners may remove stray
// files with this prefix (left by a crash) while they hold the lock on path.
func TempPrefix(path string) string { return filepath.Base(path) + ".tmp-" }

// WriteFile atomically replaces path with data, created with mode perm.
func WriteFile(path string, data []byte, perm os.FileMode, opts ...Option) error {
	tmp, err := WriteTemp(path, data, perm, opts...)
	if err != nil {
		return err
	}
	if err = os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = SyncDir(filepath.Dir(path)); err != nil {
		// The data is in place; only durability of the rename is in doubt. Report it anyway so
		// callers that promise durability (the journal) do not acknowledge.
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// WriteTemp is WriteFile's first half: data in a fresh temp file beside path, fsynced and
// closed, ready to be renamed over path (then SyncDir the directory). The caller removes it if it
// does not rename it. Owners that must append to the file between the two halves (the journal's
// background compaction) use it directly.
func WriteTemp(path string, data []byte, perm os.FileMode, opts ...Option) (tmp string, err error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	f, err := os.CreateTemp(filepath.Dir(path), TempPrefix(path)+"*")
	if err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	tmp = f.Name()
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
			tmp = ""
		}
	}()
	if err = f.Chmod(perm); err != nil {
		return tmp, fmt.Errorf("write %s: %w", path, err)
	}
	if _, err = f.Write(data); err != nil {
		return tmp, fmt.Errorf("write %s: %w", path, err)
	}
	if err = Fsync(f); err != nil {
		return tmp, fmt.Errorf("write %s: sync: %w", path, err)
	}
	if err = f.Close(); err != nil {
		return tmp, fmt.Errorf("write %s: close: %w", path, err)
	}
	if o.beforeRename != nil {
		if err = o.beforeRename(tmp); err != nil {
			return tmp, fmt.Errorf("write %s: %w", path, err)
		}
	}
	return tmp, nil
}

func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	defer d.Close()
	if err := Fsync(d); err != nil && !errors.Is(err, os.ErrInvalid) {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	return nil
}

// RemoveStrayTemps deletes temp files a crashed WriteFile left next to path. Call it only while
// holding the lock that serialises writers of path.
func RemoveStrayTemps(path string) (int, error) {
	dir, prefix := filepath.Dir(path), TempPrefix(path)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("clean temps for %s: %w", path, err)
	}
	n := 0
	for _, e := range entries {
		if e.Type().IsRegular() && strings.HasPrefix(e.Name(), prefix) {
			if err := os.Remove(filepath.Join(dir, e.Name())); err == nil {
				n++
			}
		}
	}
	return n, nil
}

// Fsync is f.Sync, after letting the goroutines queued behind the caller run first. A goroutine
// blocked in fsync keeps its P (the scheduler's slot) until sysmon takes it back, which on a
// mostly idle process is up to 10 ms later, and whatever was queued on that P waits as long:
// traced, a turn's goroutine waited 3-4 ms behind a state file's fsync on its way to the prompt.
// Yielding first runs that queue; the fsync resumes on whichever P frees up next.
func Fsync(f interface{ Sync() error }) error {
	runtime.Gosched()
	return f.Sync()
}
