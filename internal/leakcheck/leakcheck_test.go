package leakcheck

import (
	"strings"
	"sync"
	"testing"
)

const self = "github.com/buzz-harness/buzz/internal/leakcheck."

// parked says when it runs, and waits.
func parked(started, release chan struct{}) {
	close(started)
	<-release
}

type owner struct{}

// loop starts a closure of its own, which says when it runs, and waits.
func (*owner) loop(started, release chan struct{}) {
	go func() {
		close(started)
		<-release
	}()
	<-release
}

func TestRunningFindsAGoroutineInTheFunctionUntilItHasReturned(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { parked(started, release) })
	stop := sync.OnceFunc(func() {
		close(release)
		wg.Wait()
	})
	defer stop()
	<-started
	if got := Running(self + "parked"); len(got) != 1 || !strings.Contains(got[0], "leakcheck.parked(") {
		t.Fatalf("Running(parked) = %q, want the one parked goroutine", got)
	}
	stop() // parked has returned; its wrapper may still be finishing Done
	if got := Running(self + "parked"); len(got) != 0 {
		t.Fatalf("after the join Running(parked) = %q, want none", got)
	}
}

func TestRunningMatchesClosuresAndWholeTypesButNotPartialNames(t *testing.T) {
	release := make(chan struct{})
	var wg sync.WaitGroup
	defer func() {
		close(release)
		wg.Wait()
	}()
	started := make(chan struct{})
	wg.Go(func() { (&owner{}).loop(started, release) })
	<-started
	if got := Running(self + "(*owner)."); len(got) != 2 {
		t.Errorf("Running of the whole type found %d goroutines, want loop and its closure", len(got))
	}
	if got := Running(self + "(*owner).loop"); len(got) != 2 {
		t.Errorf("Running(loop) found %d goroutines, want loop and its closure", len(got))
	}
	if got := Running(self + "(*owner).lo"); len(got) != 0 {
		t.Errorf("Running of a prefix of the name found %d goroutines, want none", len(got))
	}
	if got := Running(self + "parked"); len(got) != 0 {
		t.Errorf("Running(parked) found %d goroutines, want none", len(got))
	}
}
