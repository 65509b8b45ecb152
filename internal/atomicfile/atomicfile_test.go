package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteFileReplacesContentWithRequestedMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.json")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(path, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	st, _ := os.Stat(path)
	if string(data) != "new" || st.Mode().Perm() != 0o600 {
		t.Fatalf("content %q mode %v", data, st.Mode().Perm())
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("directory holds %d entries, want only the target", len(entries))
	}
}

func TestWriteFileAbortedBeforeRenameKeepsOldContentAndRemovesTemp(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.json")
	_ = os.WriteFile(path, []byte("old"), 0o600)
	boom := errors.New("boom")
	var tmp string
	err := WriteFile(path, []byte("new"), 0o600, BeforeRename(func(p string) error { tmp = p; return boom }))
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	if data, _ := os.ReadFile(path); string(data) != "old" {
		t.Fatalf("content %q, want old", data)
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Fatalf("temp %s left: %v", tmp, err)
	}
}

func TestWriteFileInMissingDirFails(t *testing.T) {
	if err := WriteFile(filepath.Join(t.TempDir(), "no", "f"), nil, 0o600); err == nil {
		t.Fatal("write into a missing directory succeeded")
	}
}

func TestRemoveStrayTempsRemovesOnlyOurTemps(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.json")
	_ = os.WriteFile(path, []byte("x"), 0o600)
	_ = os.WriteFile(filepath.Join(dir, "f.json.tmp-1"), nil, 0o600)
	_ = os.WriteFile(filepath.Join(dir, "g.json.tmp-1"), nil, 0o600)
	n, err := RemoveStrayTemps(path)
	if err != nil || n != 1 {
		t.Fatalf("removed %d, err %v", n, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "g.json.tmp-1")); err != nil {
		t.Fatal("removed another file's temp")
	}
}

func TestSecondTryLockFailsWithHolderPidUntilUnlock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	l, err := TryLock(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = TryLock(path)
	var le *LockedError
	if !errors.As(err, &le) || le.PID != os.Getpid() || le.Path != path {
		t.Fatalf("second TryLock err = %v", err)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	l2, err := TryLock(path)
	if err != nil {
		t.Fatalf("TryLock after Unlock: %v", err)
	}
	_ = l2.Unlock()
}

func TestLockedErrorWithoutPidSaysAnotherProcess(t *testing.T) {
	e := &LockedError{Path: "/x.lock"}
	if e.Error() != "/x.lock is locked by another process" {
		t.Fatal(e.Error())
	}
}
