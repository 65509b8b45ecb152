package acpcmd

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/buzz-harness/buzz/internal/harness"
	"github.com/buzz-harness/buzz/internal/leakcheck"
	"github.com/buzz-harness/buzz/internal/observer"
)

func run(t *testing.T, args ...string) error {
	t.Helper()
	cmd := Command()
	cmd.SetArgs(args)
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	return cmd.Execute()
}

// loaded is o's configuration as buzz-acp runs with it: parsed, then loaded.
func loaded(o *options) (harness.Config, error) {
	cfg, err := o.config(io.Discard)
	if err != nil {
		return cfg, err
	}
	return cfg, o.load(&cfg)
}

func TestUnparseableEnvValueIsAnErrorNotADefault(t *testing.T) {
	t.Setenv("BUZZ_ACP_AGENTS", "two")
	err := run(t)
	if err == nil || !strings.Contains(err.Error(), `BUZZ_ACP_AGENTS="two"`) {
		t.Fatalf("err = %v", err)
	}
}

func TestMissingPrivateKeyNamesFlagAndEnv(t *testing.T) {
	t.Setenv("BUZZ_PRIVATE_KEY", "")
	err := run(t)
	if err == nil || !strings.Contains(err.Error(), "BUZZ_PRIVATE_KEY") {
		t.Fatalf("err = %v", err)
	}
}

func TestBadRespondToModeIsRefused(t *testing.T) {
	t.Setenv("BUZZ_PRIVATE_KEY", strings.Repeat("1", 64))
	err := run(t, "--respond-to", "everyone", "--agent-command", "/bin/true")
	if err == nil || !strings.Contains(err.Error(), "--respond-to") {
		t.Fatalf("err = %v", err)
	}
}

func TestNegativeMaxProcsIsRefused(t *testing.T) {
	t.Setenv("BUZZ_PRIVATE_KEY", strings.Repeat("1", 64))
	err := run(t, "--max-procs", "-1")
	if err == nil || !strings.Contains(err.Error(), "--max-procs") {
		t.Fatalf("err = %v", err)
	}
}

func TestMissingAgentCommandIsOneClearError(t *testing.T) {
	t.Setenv("BUZZ_PRIVATE_KEY", strings.Repeat("1", 64))
	err := run(t, "--agent-command", "no-such-agent-xyz")
	if err == nil || !strings.Contains(err.Error(), `"no-such-agent-xyz" not found`) {
		t.Fatalf("err = %v", err)
	}
}

func TestUnderBuzzAMissingDefaultAgentIsThisProgramsAgentSubcommand(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no buzz-agent anywhere
	o := options{relayURL: "ws://a:1", privateKey: strings.Repeat("1", 64), agentCommand: defaultAgent, agentArgs: "x", permissions: "allow",
		logLevel: "info", kinds: DefaultKinds, stateDir: t.TempDir(), selfAgent: true}
	cfg, err := loaded(&o)
	if err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	if cfg.AgentCommand != exe || strings.Join(cfg.AgentArgs, " ") != "agent x" {
		t.Fatalf("agent = %s %q, want %s agent x", cfg.AgentCommand, cfg.AgentArgs, exe)
	}
	o.selfAgent = false
	if _, err := loaded(&o); err == nil || !strings.Contains(err.Error(), `"buzz-agent" not found`) {
		t.Fatalf("standalone buzz-acp: err = %v, want buzz-agent not found", err)
	}
}

func TestDedupDropFromTheEnvironmentWithTheDefaultSteerModeIsRefusedNamingBothFlags(t *testing.T) {
	t.Setenv("BUZZ_PRIVATE_KEY", strings.Repeat("1", 64))
	t.Setenv("BUZZ_ACP_DEDUP", "drop")
	err := run(t, "--agent-command", "/bin/true", "--state-dir", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "--dedup drop") || !strings.Contains(err.Error(), "--multiple-event-handling queue (got steer)") {
		t.Fatalf("err = %v", err)
	}
}

func TestBadMultipleEventHandlingModeFromTheEnvironmentIsRefused(t *testing.T) {
	t.Setenv("BUZZ_PRIVATE_KEY", strings.Repeat("1", 64))
	t.Setenv("BUZZ_ACP_MULTIPLE_EVENT_HANDLING", "merge")
	err := run(t, "--agent-command", "/bin/true", "--state-dir", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), `--multiple-event-handling must be queue, steer, interrupt or owner-interrupt, got "merge"`) {
		t.Fatalf("err = %v", err)
	}
}

// Parsing and loading the configuration touch nothing: the activity log a flag names is opened
// when buzz-acp runs, after it holds the agent's lease.
func TestConfigAndLoadCreateNoActivityLog(t *testing.T) {
	log := filepath.Join(t.TempDir(), "activity.jsonl")
	o := options{relayURL: "ws://a:1", privateKey: strings.Repeat("1", 64), agentCommand: "/bin/true",
		permissions: "allow", logLevel: "info", kinds: "9", stateDir: t.TempDir(), activityLog: log}
	if _, err := loaded(&o); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(log); !os.IsNotExist(err) {
		t.Fatalf("the activity log exists after config and load (%v), want it left to run", err)
	}
}

func TestActivityLogStopReturnsOnceItsWriterHasStopped(t *testing.T) {
	const writer = "github.com/buzz-harness/buzz/internal/observer.WriteJSONLines"
	bus := observer.NewBus(10)
	path := filepath.Join(t.TempDir(), "activity.jsonl")
	stop, err := startActivityLog(path, bus)
	if err != nil {
		t.Fatal(err)
	}
	bus.Publish(observer.Scope{TurnID: "t1"}, observer.TurnEnded{StopReason: "end_turn"})
	stop()
	if left := leakcheck.Running(writer); len(left) > 0 {
		t.Fatalf("activity log writer still running after stop:\n%s", strings.Join(left, "\n\n"))
	}
	if b, err := os.ReadFile(path); err != nil || !strings.Contains(string(b), `"end_turn"`) {
		t.Fatalf("activity log = %q (%v), want the event published before stop", b, err)
	}
}

func TestActivityConsoleStopReturnsOnceItHasStoppedServing(t *testing.T) {
	var stderr strings.Builder
	stop, err := startActivityConsole(t.Context(), "127.0.0.1:0", harness.Config{Observer: observer.NewBus(10)}, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr.String(), "buzz-acp activity console: http://127.0.0.1:") {
		t.Errorf("printed %q, want the console's URL", stderr.String())
	}
	stop()
	if left := leakcheck.Running("github.com/buzz-harness/buzz/internal/console."); len(left) > 0 {
		t.Fatalf("console still running after stop:\n%s", strings.Join(left, "\n\n"))
	}
}
