package harness_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/buzz-harness/buzz/internal/relay/store/postgres/pgtest"
	"github.com/buzz-harness/buzz/internal/testbin"
	"github.com/buzz-harness/buzz/internal/testwait"
)

func TestSecondHarnessForSameAgentOnSameRelayRefusesNamingHolderPID(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
	s := newStack(t)
	s.start(nil)
	s.kill() // SIGKILL: no cleanup runs, the kernel drops the lock
	s.start(nil)
	s.waitReply(s.mention(s.ownerSK, "still here").ID)
}

// Two buzz-acp for one agent with the same --lease postgres://…: the second waits as a standby
// naming the holder, takes over within seconds when the holder is killed, and resumes the
// thread's session from the state dir both use.
func TestStandbyTakesOverThePostgresLeaseAndResumesTheSession(t *testing.T) {
	t.Parallel()
	dsn := pgtest.URL(t)
	s := newStack(t)
	args := []string{"--lease", dsn}
	s.start(args)
	holder := s.harness.Process.Pid
	first := s.mention(s.ownerSK, "codeword=QUINCE")
	r1 := s.waitReply(first.ID)
	s.waitLog("turn done", 20*time.Second) // the test agent saves its history after posting the reply

	standby, logs := s.command(args, "TESTAGENT_REPLY=answer {codeword}")
	if err := standby.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- standby.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-standby.Process.Pid, syscall.SIGKILL)
		<-exited
		if t.Failed() {
			t.Logf("standby output:\n%s", logs.String())
		}
	})
	waitOutput(t, logs, "standby: another buzz-acp holds the lease", 20*time.Second)
	if !strings.Contains(logs.String(), "buzz-acp pid "+strconv.Itoa(holder)) {
		t.Fatalf("the standby does not name the holder (pid %d):\n%s", holder, logs.String())
	}
	if strings.Contains(logs.String(), "buzz-acp ready") {
		t.Fatal("the standby started while the holder held the lease")
	}

	s.kill() // SIGKILL: the holder's database connection ends and the lock with it
	waitOutput(t, logs, "buzz-acp ready", 20*time.Second)
	s.mention(s.ownerSK, "codeword?", replyTo(first.ID))
	if reply := s.waitNewReply(first.ID, r1); !strings.Contains(reply.Content, "QUINCE") {
		t.Fatalf("reply %q does not remember the codeword: the standby did not resume the session", reply.Content)
	}
	if loads := s.methods("session/load"); len(loads) != 1 {
		t.Fatalf("session/load ×%d, want 1", len(loads))
	}
}

// waitOutput waits until a process's output contains substr.
func waitOutput(t *testing.T, out *testbin.Output, substr string, timeout time.Duration) {
	t.Helper()
	testwait.Eventually(t, timeout, func() bool { return strings.Contains(out.String(), substr) },
		fmt.Sprintf("%q in the output (logged at the end)", substr))
}

// A holder whose lease connection dies must stop answering: a standby may hold the lease now.
func TestHolderStopsWhenItsLeaseConnectionIsLost(t *testing.T) {
	t.Parallel()
	dsn := pgtest.URL(t)
	s := newStack(t)
	s.start([]string{"--lease", dsn})
	host, _ := os.Hostname()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	name := "buzz-acp pid " + strconv.Itoa(s.harness.Process.Pid) + " on " + host
	if err := conn.QueryRow(context.Background(),
		"SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1", name).Scan(&n); err != nil || n != 1 {
		t.Fatalf("terminated %d lease connections (%v), want 1", n, err)
	}
	select {
	case err := <-s.exited:
		s.exited <- err
		if err == nil {
			t.Fatal("buzz-acp exited 0 after losing its lease")
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("buzz-acp still running 30 s after its lease connection was terminated:\n%s", s.logs.String())
	}
	if !strings.Contains(s.logs.String(), "lease lost") {
		t.Fatalf("no 'lease lost' in the output:\n%s", s.logs.String())
	}
}
