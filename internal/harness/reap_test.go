package harness

import (
	"bufio"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/buzz-harness/buzz/internal/testbin"
	"github.com/buzz-harness/buzz/internal/testwait"
)

// orphan starts script as an agent would run (its own process group) and never reaps it, as a
// SIGKILLed harness does not; the returned pool's record lists it. Its stdout's first line is
// returned too.
func orphan(t *testing.T, script string) (*pool, *testbin.Output, *exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	line, _ := bufio.NewReader(out).ReadString('\n')
	st, ok := readProcStat(cmd.Process.Pid)
	if !ok {
		t.Fatal("no /proc stat for the agent")
	}
	path := filepath.Join(t.TempDir(), "agents.json")
	raw, _ := json.Marshal([]agentProc{{PID: cmd.Process.Pid, StartTime: st.start}})
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	logs := &testbin.Output{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return &pool{log: log, record: newAgentRecord(path, log)}, logs, cmd, strings.TrimSpace(line)
}

func waitZombie(t *testing.T, pid int) {
	t.Helper()
	testwait.Eventually(t, 10*time.Second, func() bool {
		st, ok := readProcStat(pid)
		return ok && st.zombie
	}, "the agent to exit unreaped")
}

func TestReapSaysNothingIsLeftRunningForAnAgentThatAlreadyExited(t *testing.T) {
	p, logs, cmd, _ := orphan(t, "echo up; exit 0")
	waitZombie(t, cmd.Process.Pid)
	if n := p.reapOrphans(); n != 0 {
		t.Fatalf("reapOrphans = %d, want 0: nothing ran, so no reply can be in flight", n)
	}
	if out := logs.String(); strings.Contains(out, "left running") || !strings.Contains(out, "had already exited") {
		t.Fatalf("log:\n%s", out)
	}
}

func TestReapKillsWhatAnExitedAgentLeftRunningInItsGroup(t *testing.T) {
	p, logs, cmd, child := orphan(t, "sleep 60 & echo $!; exit 0")
	waitZombie(t, cmd.Process.Pid)
	pid, err := strconv.Atoi(child)
	if err != nil {
		t.Fatalf("child pid %q", child)
	}
	if n := p.reapOrphans(); n != 1 {
		t.Fatalf("reapOrphans = %d, want 1", n)
	}
	if !strings.Contains(logs.String(), "left running in its process group; the agent itself had exited") {
		t.Fatalf("log:\n%s", logs.String())
	}
	testwait.Eventually(t, 10*time.Second, func() bool {
		st, ok := readProcStat(pid)
		return !ok || st.zombie
	}, "the agent's child to be killed")
}

func TestReapKillsAnAgentLeftRunning(t *testing.T) {
	p, logs, cmd, _ := orphan(t, "echo up; exec sleep 60")
	if n := p.reapOrphans(); n != 1 {
		t.Fatalf("reapOrphans = %d, want 1", n)
	}
	if !strings.Contains(logs.String(), "killing agent left running by a previous buzz-acp") {
		t.Fatalf("log:\n%s", logs.String())
	}
	if err := cmd.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("agent ended with %v, want killed", err)
	}
}
