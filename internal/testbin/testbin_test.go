package testbin

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// errorsTB records what a test reports through Errorf; the rest is the real test's.
type errorsTB struct {
	testing.TB
	errs []string
}

func (e *errorsTB) Errorf(format string, args ...any) {
	e.errs = append(e.errs, fmt.Sprintf(format, args...))
}

// buildRacy builds testdata/racy, a program with a data race, with -race or without. It is built
// here rather than by Dir: a prebuilt directory (make test's) does not have it.
func buildRacy(t *testing.T, race bool) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "racy")
	args := []string{"build", "-o", bin}
	if race {
		args = append(args, "-race")
	}
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", append(args, "./internal/testbin/testdata/racy")...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func TestDataRaceInABinaryFailsTheTestThatRanIt(t *testing.T) {
	if !raceEnabled {
		t.Skip("the race detector is off (go test -race turns it on)")
	}
	racy := buildRacy(t, true)
	rec := &errorsTB{}
	var runErr error
	t.Run("runs racy", func(t *testing.T) {
		rec.TB = t
		Dir(rec) // what a test that runs binaries calls first
		runErr = exec.Command(racy).Run()
	})
	var exit *exec.ExitError
	if !errors.As(runErr, &exit) || exit.ExitCode() != 66 {
		t.Errorf("racy exited with %v, want exit status 66", runErr)
	}
	if len(rec.errs) != 1 || !strings.Contains(rec.errs[0], "WARNING: DATA RACE") || !strings.Contains(rec.errs[0], "main.main") {
		t.Fatalf("the test reported %q, want one error carrying the race report", rec.errs)
	}
}

func TestPrebuiltBinaryWithTheOtherRaceSettingIsRefused(t *testing.T) {
	err := checkRace(buildRacy(t, !raceEnabled))
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("built with -race=%v", !raceEnabled)) {
		t.Fatalf("checkRace = %v, want a refusal naming the binary's race setting", err)
	}
	if err := checkRace(buildRacy(t, raceEnabled)); err != nil {
		t.Fatalf("checkRace refused a binary with the test's own race setting: %v", err)
	}
}
