// Package testbin builds the project's binaries once per test process, so end-to-end tests run
// the real programs (buzz, buzz-acp, buzz-agent, the scripted test agent) as subprocesses.
package testbin

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

var (
	mu    sync.Mutex
	dir   string
	built = map[string]error{}
)

// Dir builds the named main packages (paths relative to the module root, e.g. "cmd/buzz") into
// one shared directory and returns it. Binaries are named after the package's last element.
// Putting them in one directory matters: buzz-acp finds `buzz` and `buzz-agent` beside itself.
func Dir(t testing.TB, pkgs ...string) string {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if dir == "" {
		d, err := ownDir()
		if err != nil {
			t.Fatal(err)
		}
		dir = d
	}
	root := moduleRoot(t)
	for _, p := range pkgs {
		err, done := built[p]
		if !done {
			name := filepath.Base(p)
			cmd := exec.Command("go", "build", "-o", filepath.Join(dir, name), "./"+p)
			cmd.Dir = root
			out, berr := cmd.CombinedOutput()
			if berr != nil {
				err = &buildError{pkg: p, out: string(out)}
			}
			built[p] = err
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// ownDir is this test process's directory under $TMPDIR/buzz-testbin, named by its pid. A test
// process has no hook that runs when it ends, so each new one removes the directories of
// processes that are gone (about 200 MB each; left alone they filled the disk).
func ownDir() (string, error) {
	parent := filepath.Join(os.TempDir(), "buzz-testbin")
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return "", err
	}
	ents, _ := os.ReadDir(parent)
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil && syscall.Kill(pid, 0) == syscall.ESRCH {
			_ = os.RemoveAll(filepath.Join(parent, e.Name()))
		}
	}
	d := filepath.Join(parent, strconv.Itoa(os.Getpid()))
	if err := os.RemoveAll(d); err != nil { // a dead process's, whose pid this one reused
		return "", err
	}
	return d, os.Mkdir(d, 0o700)
}

// Path builds one package and returns its binary's path.
func Path(t testing.TB, pkg string) string {
	return filepath.Join(Dir(t, pkg), filepath.Base(pkg))
}

type buildError struct{ pkg, out string }

func (e *buildError) Error() string { return "go build " + e.pkg + ": " + strings.TrimSpace(e.out) }

func moduleRoot(t testing.TB) string {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}
