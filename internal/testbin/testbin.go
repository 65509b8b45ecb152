// Package testbin builds the project's binaries once per test process, so end-to-end tests run
// the real programs (buzz, buzz-acp, buzz-agent, the scripted test agent) as subprocesses.
package testbin

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
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
		d, err := os.MkdirTemp("", "buzz-testbin-")
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
