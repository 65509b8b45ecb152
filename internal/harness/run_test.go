package harness_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/buzz-harness/buzz/internal/harness"
	"github.com/buzz-harness/buzz/internal/testbin"
)

// TestRunReturnsWithNoHarnessGoroutineLeft runs the harness in this process, gives it work that
// starts each kind of goroutine (agent spawns and exit watchers, a turn, a session-store touch,
// an owner-command publish) and stops it while a turn hangs in the agent: when Run returns, no
// goroutine is running harness code any more.
func TestRunReturnsWithNoHarnessGoroutineLeft(t *testing.T) {
	s := newStack(t)
	cancel, ran := s.runInProcess(t, harness.Config{Agents: 2}, "TESTAGENT_HANG_ON=2", "TESTAGENT_IGNORE_CANCEL=1")
	defer cancel()

	first := s.mention(s.ownerSK, "hello")
	s.waitReply(first.ID)
	status := s.mention(s.ownerSK, "!status")
	s.waitOutcome(status.ID)
	s.mention(s.ownerSK, "this one hangs")
	s.waitRecorded("session/prompt", 2)

	cancel()
	select {
	case err := <-ran:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("Run did not return after its context ended; goroutines:\n%s", strings.Join(harnessGoroutines(), "\n\n"))
	}
	if left := harnessGoroutines(); len(left) > 0 {
		t.Fatalf("%d goroutine(s) still running harness code after Run returned:\n%s", len(left), strings.Join(left, "\n\n"))
	}
}

// harnessGoroutines returns the stacks of goroutines executing code of package harness, leaving
// out this test's own and those an agent's ACP connection owns (package acp joins those).
func harnessGoroutines() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "_test.go:") || strings.Contains(g, "created by github.com/buzz-harness/buzz/internal/acp.") {
			continue
		}
		for _, line := range strings.Split(g, "\n") {
			if strings.HasPrefix(line, "github.com/buzz-harness/buzz/internal/harness.") {
				out = append(out, g)
				break
			}
		}
	}
	return out
}

// runInProcess runs the harness in this test's process (so -race sees it), on the stack's relay,
// keys, test agent and state dir; cfg adds the rest, env the test agent's knobs. cancel stops
// Run, whose result then arrives on ran.
func (s *stack) runInProcess(t *testing.T, cfg harness.Config, env ...string) (cancel func(), ran <-chan error) {
	t.Helper()
	logs := &testbin.Output{}
	cfg.RelayURL, cfg.SecretKey, cfg.Owner = s.relay.URL, s.agentSK, s.ownerPK
	cfg.AgentCommand, cfg.AgentCwd = filepath.Join(s.bin, "testagent"), t.TempDir()
	cfg.AgentEnv = append([]string{"TESTAGENT_RECORD=" + s.record, "TESTAGENT_STATE_DIR=" + s.agentDir}, env...)
	cfg.BuzzCLIDir, cfg.StateDir = s.bin, s.stateDir
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h, err := harness.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.logs = logs
	ctx, stop := context.WithCancel(context.Background())
	done, finished := make(chan error, 1), make(chan struct{})
	go func() {
		done <- h.Run(ctx)
		close(finished)
	}()
	// Run writes into the state dir until it returns; t.TempDir's removal must wait for that.
	t.Cleanup(func() {
		stop()
		select {
		case <-finished:
		case <-time.After(30 * time.Second):
			t.Error("the in-process harness was still running 30 s after its context ended")
		}
	})
	return stop, done
}
