package cli

import (
	"io"
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

func TestMissingAgentCommandIsOneClearError(t *testing.T) {
	t.Setenv("BUZZ_PRIVATE_KEY", strings.Repeat("1", 64))
	err := run(t, "--agent-command", "no-such-agent-xyz")
	if err == nil || !strings.Contains(err.Error(), `"no-such-agent-xyz" not found`) {
		t.Fatalf("err = %v", err)
	}
}
