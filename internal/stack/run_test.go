package stack

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/buzz-harness/buzz/internal/leakcheck"
	"github.com/buzz-harness/buzz/internal/testbin"
)

// A start that fails late — after the data dir, keys, relay database and #general exist — must
// still leave no half-made data dir behind when this start created it, nor its owner dir.
func TestRunThatFailsAfterSetupRemovesTheDataDirAndOwnerDirItCreated(t *testing.T) {
	parent, ownerParent := filepath.Join(t.TempDir(), "new"), filepath.Join(t.TempDir(), "config")
	var out strings.Builder
	err := Run(context.Background(), Config{
		DataDir: filepath.Join(parent, "data"), OwnerDir: filepath.Join(ownerParent, "owner"), RelayAddr: "127.0.0.1:0", ConsoleAddr: "127.0.0.1:0",
		AgentCwd: "relative/cwd", // refused by the harness, after bootstrap
		Out:      &out,
	})
	if err == nil || !strings.Contains(err.Error(), "harness") {
		t.Fatalf("err = %v, want a harness failure", err)
	}
	if !strings.Contains(out.String(), "setting up #general") {
		t.Fatalf("the failure came before setup; output:\n%s", out.String())
	}
	for _, dir := range []string{parent, ownerParent} {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("failed start left %s behind (%v)", dir, err)
		}
	}
}

func TestRunThatFailsKeepsADataDirThatAlreadyExisted(t *testing.T) {
	dataDir, ownerDir := t.TempDir(), t.TempDir()
	err := Run(context.Background(), Config{DataDir: dataDir, OwnerDir: ownerDir, RelayAddr: "127.0.0.1:0", ConsoleAddr: "127.0.0.1:0", AgentCwd: "relative/cwd"})
	if err == nil {
		t.Fatal("Run succeeded")
	}
	for _, f := range []string{filepath.Join(dataDir, "agent.key"), filepath.Join(ownerDir, "owner.key")} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("existing data dir lost a key: %v", err)
		}
	}
}

// Stopping a running stack undoes its start last part first, saying what stopped, and Run
// returns only once the parts' goroutines are gone.
func TestRunStopsHarnessConsoleAndRelayInThatOrderAndLeavesNoGoroutineBehind(t *testing.T) {
	bin := testbin.Dir(t, "internal/testagent")
	dataDir, ownerDir := t.TempDir(), t.TempDir()
	var out testbin.Output
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan Info, 1)
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{DataDir: dataDir, OwnerDir: ownerDir, RelayAddr: "127.0.0.1:0", ConsoleAddr: "127.0.0.1:0",
			AgentCommand: filepath.Join(bin, "testagent"), AgentEnv: []string{"TESTAGENT_STATE_DIR=" + t.TempDir()},
			AgentCwd: t.TempDir(), NoMCP: true, Out: &out, Ready: func(i Info) { ready <- i }})
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("Run: %v\n%s", err, out.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("the stack did not come up within 60s:\n%s", out.String())
	}
	cancel()
	select {
	case err := <-done:
		// Stopped this early the harness may still be starting, and says it was cancelled.
		t.Logf("Run: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatalf("Run did not return after its context ended:\n%s", out.String())
	}
	said := out.String()
	last := -1
	for _, want := range []string{"buzz up: stopping", "stopped the harness and the agent", "stopped the console", "stopped the relay; everything is kept in " + dataDir} {
		i := strings.Index(said, want)
		if i < last {
			t.Fatalf("output lacks %q after what came before it:\n%s", want, said)
		}
		last = i
	}
	if _, err := os.Stat(filepath.Join(ownerDir, runningFile)); !os.IsNotExist(err) {
		t.Errorf("%s left behind (%v)", runningFile, err)
	}
	// What the parts' goroutines run (their wrapper may still be closing its done channel).
	for _, fn := range []string{"github.com/buzz-harness/buzz/internal/stack.(*starting).", "github.com/buzz-harness/buzz/internal/relay.Serve",
		"github.com/buzz-harness/buzz/internal/console.", "github.com/buzz-harness/buzz/internal/harness.(*Harness).Run"} {
		if left := leakcheck.Running(fn); len(left) > 0 {
			t.Errorf("%d goroutine(s) in %s after Run returned:\n%s", len(left), fn, strings.Join(left, "\n\n"))
		}
	}
}

// Ctrl-C right after the banner, while the harness may still be starting (connecting, publishing
// the agent's profile): the stop was asked for, so Run returns nil rather than the harness's
// "context canceled", and `buzz up` exits 0.
func TestRunStoppedRightAfterItsBannerReturnsNil(t *testing.T) {
	bin := testbin.Dir(t, "cmd/buzz", "internal/testagent")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	err := Run(ctx, Config{
		DataDir: filepath.Join(t.TempDir(), "data"), OwnerDir: t.TempDir(), RelayAddr: "127.0.0.1:0", ConsoleAddr: "127.0.0.1:0",
		AgentCommand: filepath.Join(bin, "testagent"), AgentCwd: t.TempDir(), BuzzCLIDir: bin,
		Out: io.Discard, Ready: func(Info) { cancel() },
	})
	if err != nil {
		t.Fatalf("Run stopped at its banner: %v", err)
	}
}

func TestRunServesTheRelaysAndTheHarnesssMetricsOnTheMetricsAddress(t *testing.T) {
	bin := testbin.Dir(t, "internal/testagent")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan Info, 1)
	done := make(chan error, 1)
	var out testbin.Output
	go func() {
		done <- Run(ctx, Config{DataDir: t.TempDir(), OwnerDir: t.TempDir(), RelayAddr: "127.0.0.1:0", ConsoleAddr: "127.0.0.1:0", MetricsAddr: "127.0.0.1:0",
			AgentCommand: filepath.Join(bin, "testagent"), AgentEnv: []string{"TESTAGENT_STATE_DIR=" + t.TempDir()},
			AgentCwd: t.TempDir(), NoMCP: true, Out: &out, Ready: func(i Info) { ready <- i }})
	}()
	var info Info
	select {
	case info = <-ready:
	case err := <-done:
		t.Fatalf("Run: %v\n%s", err, out.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("the stack did not come up within 60s:\n%s", out.String())
	}
	defer func() { cancel(); <-done }()
	base := strings.TrimSuffix(info.MetricsURL, "/metrics")
	for path, want := range map[string]string{"/metrics": "buzz_ws_connections_active", "/metrics/acp": "buzz_acp_turns_total", "/readyz": `"ok"`, "/healthz": `"ok"`} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			t.Errorf("%s: %d, want 200 with %s:\n%.400s", path, resp.StatusCode, want, body)
		}
	}
}
