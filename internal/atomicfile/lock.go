package atomicfile

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Lock is an exclusive advisory lock (flock) on a lock file that records the holder's pid.
// flock is per open file description, so a second Lock on the same path fails even inside the
// same process, and the kernel drops the lock when the holder dies: no stale-lock cleanup needed.
type Lock struct {
	f    *os.File
	path string
}

// LockedError reports that another holder owns the lock.
type LockedError struct {
	Path string
	PID  int // 0 when the holder's pid could not be read
}

func (e *LockedError) Error() string {
	return fmt.Sprintf("%s is locked by %s", e.Path, e.Holder())
}

// Holder describes the holder for messages: "pid 1234" or "another process".
func (e *LockedError) Holder() string {
	if e.PID > 0 {
		return "pid " + strconv.Itoa(e.PID)
	}
	return "another process"
}

// TryLock takes the exclusive lock on path without waiting, creating the file (0600) if needed,
// and writes our pid into it. If someone else holds it, the error is a *LockedError.
func TryLock(path string) (*Lock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &LockedError{Path: path, PID: readPID(path)}
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := writePID(f); err != nil {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		_ = f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return &Lock{f: f, path: path}, nil
}

func writePID(f *os.File) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return err
}

func readPID(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// Unlock clears the recorded pid and releases the lock. The file stays: deleting it would let a
// waiter lock an unlinked inode while a newcomer locks a fresh one.
func (l *Lock) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	_ = l.f.Truncate(0)
	err := syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	l.f = nil
	return err
}
