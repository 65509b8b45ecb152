package harness_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestSecondHarnessForSameAgentOnSameRelayRefusesNamingHolderPID(t *testing.T) {
	s := newStack(t)
	s.start(nil)
	// Another state dir and another spelling of the same relay: only the agent lease can stop it.
	url := strings.Replace(s.relay.URL, "ws://127.0.0.1", "http://localhost", 1) + "/"
	cmd := exec.Command(filepath.Join(s.bin, "buzz-acp"),
		"--agent-command", filepath.Join(s.bin, "testagent"),
		"--relay-url", url, "--state-dir", filepath.Join(t.TempDir(), "other-state"))
	cmd.Env = append(os.Environ(), "BUZZ_PRIVATE_KEY="+s.agentSK, "XDG_STATE_HOME="+s.xdgState)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("second buzz-acp exited 0; output:\n%s", out)
	}
	msg := strings.TrimSpace(string(out))
	want := "another buzz-acp (pid " + strconv.Itoa(s.harness.Process.Pid) + ") is already running as agent " + s.agentPK + " on " + s.relay.URL
	if strings.Contains(msg, "\n") || !strings.Contains(msg, want) {
		t.Fatalf("second buzz-acp said %q, want one line containing %q", msg, want)
	}
}

func TestHarnessLeaseIsFreedWhenHolderIsKilled(t *testing.T) {
	s := newStack(t)
	s.start(nil)
	s.kill() // SIGKILL: no cleanup runs, the kernel drops the lock
	s.start(nil)
	s.waitReply(s.mention(s.ownerSK, "still here").ID)
}
