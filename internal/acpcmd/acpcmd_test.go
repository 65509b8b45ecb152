package acpcmd

import (
	"io"
	"os"
	"strings"
	"testing"
)

func run(t *testing.T, args ...string) error {
	t.Helper()
	cmd := Command()
	cmd.SetArgs(args)
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	return cmd.Execute()
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
	o := options{privateKey: strings.Repeat("1", 64), agentCommand: defaultAgent, agentArgs: "x", permissions: "allow",
		logLevel: "info", kinds: DefaultKinds, stateDir: t.TempDir(), selfAgent: true}
	cfg, closeLog, err := o.config(io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer closeLog()
	exe, _ := os.Executable()
	if cfg.AgentCommand != exe || strings.Join(cfg.AgentArgs, " ") != "agent x" {
		t.Fatalf("agent = %s %q, want %s agent x", cfg.AgentCommand, cfg.AgentArgs, exe)
	}
	o.selfAgent = false
	if _, _, err := o.config(io.Discard); err == nil || !strings.Contains(err.Error(), `"buzz-agent" not found`) {
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
