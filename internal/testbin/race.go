//go:build race

package testbin

// raceEnabled: this test binary was built with -race, so the binaries it builds are too, and the
// race detector sees the code the end-to-end tests run in subprocesses.
const raceEnabled = true
