// Package testbin builds the project's binaries once per test process (or takes the ones make
// test built once for the whole run, see PrebuiltEnv), so end-to-end tests run the real programs
// (buzz, buzz-acp, buzz-agent, the scripted test agent) as subprocesses.
//
// A race-built test process (go test -race) builds them with -race too, and makes a data race
// in any of them fail the test: see races.go.
package testbin

import (
	"debug/buildinfo"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// PrebuiltEnv names a directory of binaries built beforehand, one build shared by every test
// process of a `go test ./...` run (make test sets it) instead of one link per package. Each
// binary a test asks for must be there, built with the test process's race setting.
const PrebuiltEnv = "BUZZ_TESTBIN_DIR"

var (
	mu    sync.Mutex
	dir   string
	built = map[string]error{}
)

// Dir builds the named main packages (paths relative to the module root, e.g. "cmd/buzz") into
// one shared directory and returns it. Binaries are named after the package's last element.
// Putting them in one directory matters: buzz-acp finds `buzz` and `buzz-agent` beside itself.
// Under -race, the test fails at its end if any binary reported a data race meanwhile.
func Dir(t testing.TB, pkgs ...string) string {
	t.Helper()
	if raceEnabled {
		t.Cleanup(func() { reportRaces(t) })
	}
	d, err := Build(pkgs...)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Build is Dir for a TestMain, which builds before any test runs; such a TestMain ends with
// os.Exit(testbin.Run(m)).
func Build(pkgs ...string) (string, error) {
	mu.Lock()
	defer mu.Unlock()
	if dir == "" {
		d, err := setup()
		if err != nil {
			return "", err
		}
		dir = d
	}
	for _, p := range pkgs {
		err, done := built[p]
		if !done {
			err = build(p)
			built[p] = err
		}
		if err != nil {
			return "", err
		}
	}
	return dir, nil
}

// setup makes this process's own directory (the binaries' unless prebuilt ones are given, and
// the race reports') and returns the binaries' directory.
func setup() (string, error) {
	own, err := ownDir()
	if err != nil {
		return "", err
	}
	if err := watchRaces(own); err != nil {
		return "", err
	}
	d := os.Getenv(PrebuiltEnv)
	if d == "" {
		return own, nil
	}
	if !filepath.IsAbs(d) {
		return "", fmt.Errorf("%s=%q: want an absolute path", PrebuiltEnv, d)
	}
	return d, nil
}

// build puts package p's binary into dir, or, given prebuilt binaries, checks that p's is there
// and of the right kind (the prebuilt directory is shared: nothing is built into it).
func build(p string) error {
	target := filepath.Join(dir, filepath.Base(p))
	if os.Getenv(PrebuiltEnv) != "" {
		if _, err := os.Stat(target); err != nil {
			return fmt.Errorf("%s has no %s (%w): build it there, or unset %s", PrebuiltEnv, p, err, PrebuiltEnv)
		}
		return checkRace(target)
	}
	args := []string{"build"}
	if raceEnabled {
		args = append(args, "-race")
	}
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	cmd := exec.Command("go", append(args, "-o", target, "./"+p)...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return &buildError{pkg: p, out: string(out)}
	}
	return nil
}

// checkRace refuses a prebuilt binary whose race setting differs from this test process's: a
// non-race binary under go test -race would hide the races the run is there to find.
func checkRace(path string) error {
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	race := "false"
	for _, s := range info.Settings {
		if s.Key == "-race" {
			race = s.Value
		}
	}
	if want := strconv.FormatBool(raceEnabled); race != want {
		return fmt.Errorf("%s: built with -race=%s, but this test binary has -race=%s; rebuild it or unset %s",
			path, race, want, PrebuiltEnv)
	}
	return nil
}

// ownDir is this test process's directory under $TMPDIR/buzz-testbin, named by its pid. A test
// process has no hook that runs when it ends, so each new one removes the directories of
// processes that are gone (about 200 MB each with binaries; left alone they filled the disk).
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

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	return filepath.Dir(strings.TrimSpace(string(out))), nil
}
