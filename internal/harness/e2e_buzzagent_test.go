package harness_test

import (
	"github.com/buzz-harness/buzz/internal/testbin"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The default agent: buzz-acp finds buzz-agent beside itself, and buzz-agent (echo mode, no model
// key) receives the standing context as a spec system prompt, never in a user message.
func TestDefaultBuzzAgentEchoEndToEndGetsStandingAsSystemPrompt(t *testing.T) {
	t.Parallel()
	s := newStack(t) // builds buzz-agent beside buzz-acp
	cmd := exec.Command(filepath.Join(s.bin, "buzz-acp"),
		"--relay-url", s.relay.URL, "--agent-owner", s.ownerPK, "--state-dir", s.stateDir,
		"--agent-cwd", t.TempDir(), "--system-prompt", "You are Helper.")
	env := []string{"BUZZ_PRIVATE_KEY=" + s.agentSK, "BUZZ_AGENT_STATE_DIR=" + t.TempDir()}
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "OPENAI_API_KEY" && k != "ANTHROPIC_API_KEY" && k != "BUZZ_AGENT_PROVIDER" {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	s.logs = &testbin.Output{}
	cmd.Stdout, cmd.Stderr = s.logs, s.logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.harness, s.exited = cmd, make(chan error, 1)
	go func() { s.exited <- cmd.Wait() }()
	t.Cleanup(s.kill)
	s.waitLog("route=system_prompt", 30*time.Second)

	first := s.mention(s.ownerSK, "first question")
	r1 := s.waitReply(first.ID)
	if !strings.Contains(r1.Content, "echo: first question") || !strings.Contains(r1.Content, "via system prompt") {
		t.Fatalf("echo reply %q", r1.Content)
	}
	second := s.mention(s.ownerSK, "second question")
	r2 := s.waitReply(second.ID)
	if strings.Contains(r2.Content, "repeated") || strings.Contains(r2.Content, "first message") {
		t.Fatalf("standing context reached a user message: %q", r2.Content)
	}
}
