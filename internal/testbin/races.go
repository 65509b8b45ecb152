package testbin

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Under -race the binaries report data races to files rather than to their stderr, which the
// tests read in many different ways (or, for the agents' CLI calls, not at all): GORACE's
// log_path makes every race-built process, children of children included, write its reports to
// <raceDir>/report.<pid>, and exit with status 66 at its end. The test that ran them then fails
// with the report. atexit_sleep_ms=0: by default a race-built program sleeps 1 s before exiting,
// and the tests run the buzz CLI hundreds of times.
var (
	raceDir  string
	reported = map[string]bool{} // report files already failed a test
)

// watchRaces points the GORACE of every process this one starts at a directory inside own.
func watchRaces(own string) error {
	if !raceEnabled {
		return nil
	}
	raceDir = filepath.Join(own, "race")
	if err := os.Mkdir(raceDir, 0o700); err != nil {
		return err
	}
	opts := strings.TrimSpace(os.Getenv("GORACE") + " log_path=" + filepath.Join(raceDir, "report") + " atexit_sleep_ms=0")
	return os.Setenv("GORACE", opts)
}

// reportRaces fails t with every race report not yet reported. Tests run side by side share the
// directory, so a report may come from a neighbour's binary; the report's stacks tell which code.
func reportRaces(t testing.TB) {
	t.Helper()
	for _, r := range newReports() {
		t.Errorf("%s", r)
	}
}

// Run runs the tests of a package whose TestMain built its binaries with Build and returns the
// exit code: under -race, a failure if a binary reported a data race.
func Run(m *testing.M) int {
	code := m.Run()
	for _, r := range newReports() {
		fmt.Fprintln(os.Stderr, r)
		code = max(code, 1)
	}
	return code
}

// newReports reads the race reports that appeared since the last call.
func newReports() []string {
	mu.Lock()
	defer mu.Unlock()
	if raceDir == "" {
		return nil
	}
	ents, _ := os.ReadDir(raceDir)
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	var out []string
	for _, name := range names {
		if reported[name] {
			continue
		}
		reported[name] = true
		b, err := os.ReadFile(filepath.Join(raceDir, name))
		if err != nil {
			out = append(out, "read race report: "+err.Error())
			continue
		}
		out = append(out, fmt.Sprintf("data race in a binary this test process ran (pid %s, exit status 66 at its end; "+
			"with tests in parallel, maybe another test's):\n%s", strings.TrimPrefix(name, "report."), b))
	}
	return out
}
