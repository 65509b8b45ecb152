package testwait

import (
	"fmt"
	"runtime"
	"testing"
	"testing/synctest"
	"time"
)

// fatalTB records a Fatalf and ends the goroutine, as testing.T does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// eventually runs Eventually on a goroutine of its own (Fatalf ends it) and returns the failure
// message, "" when it returned.
func eventually(timeout time.Duration, cond func() bool, what string) string {
	f := &fatalTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Eventually(f, timeout, cond, what)
	}()
	<-done
	return f.msg
}

func TestEventuallyReturnsOnceTheConditionHolds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		ready := start.Add(2 * time.Second)
		calls := 0
		msg := eventually(10*time.Second, func() bool { calls++; return !time.Now().Before(ready) }, "the thing")
		if msg != "" {
			t.Fatalf("failed: %s", msg)
		}
		// Polled about a tenth of the time waited apart: it notices within 2 s/10.
		if waited := time.Since(start); waited < 2*time.Second || waited > 2*time.Second+2*time.Second/10 {
			t.Errorf("returned after %s; the condition held from 2s", waited)
		}
		if calls < 2 {
			t.Errorf("cond called %d times", calls)
		}
	})
}

func TestEventuallyFailsAfterTheTimeoutSayingWhatItAwaited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		msg := eventually(3*time.Second, func() bool { return false }, "the agent's reply")
		if want := "timed out after 3s waiting for the agent's reply"; msg != want {
			t.Errorf("message %q, want %q", msg, want)
		}
		if waited := time.Since(start); waited < 3*time.Second || waited > 3*time.Second+maxInterval {
			t.Errorf("gave up after %s, want 3s", waited)
		}
	})
}

func TestEventuallyChecksATrueConditionWithoutSleeping(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		if msg := eventually(time.Second, func() bool { return true }, "x"); msg != "" {
			t.Fatal(msg)
		}
		if waited := time.Since(start); waited != 0 {
			t.Errorf("slept %s for a condition that already held", waited)
		}
	})
}
