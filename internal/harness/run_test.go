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
	logs := &testbin.Output{}
	h, err := harness.New(harness.Config{
		RelayURL:     s.relay.URL,
		SecretKey:    s.agentSK,
		Owner:        s.ownerPK,
		AgentCommand: filepath.Join(s.bin, "testagent"),
		AgentCwd:     t.TempDir(),
		AgentEnv:     []string{"TESTAGENT_RECORD=" + s.record, "TESTAGENT_STATE_DIR=" + s.agentDir, "TESTAGENT_HANG_ON=2", "TESTAGENT_IGNORE_CANCEL=1"},
		Agents:       2,
		BuzzCLIDir:   s.bin,
		StateDir:     s.stateDir,
		Logger:       slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatal(err)
	}
	s.logs = logs
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- h.Run(ctx) }()

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
