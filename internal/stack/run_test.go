package stack

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/buzz-harness/buzz/internal/testbin"
)

// A start that fails late — after the data dir, keys, relay database and #general exist — must
// still leave no half-made data dir behind when this start created it.
func TestRunThatFailsAfterSetupRemovesTheDataDirItCreated(t *testing.T) {
	parent := filepath.Join(t.TempDir(), "new")
	var out strings.Builder
	err := Run(context.Background(), Config{
		DataDir: filepath.Join(parent, "data"), RelayAddr: "127.0.0.1:0", ConsoleAddr: "127.0.0.1:0",
		AgentCwd: "relative/cwd", // refused by the harness, after bootstrap
		Out:      &out,
	})
	if err == nil || !strings.Contains(err.Error(), "harness") {
		t.Fatalf("err = %v, want a harness failure", err)
	}
	if !strings.Contains(out.String(), "setting up #general") {
		t.Fatalf("the failure came before setup; output:\n%s", out.String())
	}
	if _, err := os.Stat(parent); !os.IsNotExist(err) {
		t.Errorf("failed start left %s behind (%v)", parent, err)
	}
}

func TestRunThatFailsKeepsADataDirThatAlreadyExisted(t *testing.T) {
	dataDir := t.TempDir()
	err := Run(context.Background(), Config{DataDir: dataDir, RelayAddr: "127.0.0.1:0", ConsoleAddr: "127.0.0.1:0", AgentCwd: "relative/cwd"})
	if err == nil {
		t.Fatal("Run succeeded")
	}
	if _, err := os.Stat(filepath.Join(dataDir, "owner.key")); err != nil {
		t.Errorf("existing data dir lost its owner key: %v", err)
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
		DataDir: filepath.Join(t.TempDir(), "data"), RelayAddr: "127.0.0.1:0", ConsoleAddr: "127.0.0.1:0",
		AgentCommand: filepath.Join(bin, "testagent"), AgentCwd: t.TempDir(), BuzzCLIDir: bin,
		Out: io.Discard, Ready: func(Info) { cancel() },
	})
	if err != nil {
		t.Fatalf("Run stopped at its banner: %v", err)
	}
}
