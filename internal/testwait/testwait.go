// Package testwait waits, in tests, for something real processes do: a log line, an event on the
// relay, a file. It polls, so it is for waiting on work outside the test's control (another
// process, a server's goroutines); a unit test whose timing is its own uses testing/synctest or an
// injected clock instead.
package testwait

import (
	"testing"
	"time"
)

// Eventually polls at about a tenth of the time it has waited so far, within these bounds: a
// condition that is nearly true costs little latency, and one that takes long (or a costly
// condition, such as a query to the relay) does not spin the CPU that tests running side by side
// share. The overshoot past the moment the condition holds stays under about a tenth.
const (
	minInterval = 10 * time.Millisecond
	maxInterval = 250 * time.Millisecond
)

// Eventually calls cond until it returns true and fails the test with t.Fatalf if it has not
// after timeout, saying what was awaited ("timed out after 20s waiting for <what>"). cond runs on
// the caller's goroutine, so it may itself call t.Fatal to give up early (say, when the process
// being waited on has exited).
func Eventually(t testing.TB, timeout time.Duration, cond func() bool, what string) {
	t.Helper()
	start := time.Now()
	for !cond() {
		waited := time.Since(start)
		if waited > timeout {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(min(max(waited/10, minInterval), maxInterval))
	}
}
