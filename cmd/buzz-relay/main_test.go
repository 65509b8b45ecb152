package main

import (
	"bufio"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary doubles as buzz-relay: with BUZZ_RELAY_RUN_MAIN=1 it runs main, so the
// tests below start a real process without a separate build step.
func TestMain(m *testing.M) {
	if os.Getenv("BUZZ_RELAY_RUN_MAIN") == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

func command(t *testing.T, args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "BUZZ_RELAY_RUN_MAIN=1")
	cmd.Dir = t.TempDir()
	return cmd
}

var listening = regexp.MustCompile(`buzz-relay listening on ws://(\S+)`)

func TestBuzzRelayServesAndStopsCleanlyOnSIGTERM(t *testing.T) {
	cmd := command(t, "--addr", "127.0.0.1:0")
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	lines := bufio.NewScanner(stderr)
	var addr string
	for addr == "" && lines.Scan() {
		if m := listening.FindStringSubmatch(lines.Text()); m != nil {
			addr = m[1]
		}
	}
	if addr == "" {
		t.Fatal("no listening line on stderr")
	}
	go func() {
		for lines.Scan() {
		}
	}()
	resp, err := http.Get("http://" + addr + "/health")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/health: %v %v", resp, err)
	}
	resp.Body.Close()
	if _, err := os.Stat(filepath.Join(cmd.Dir, ".buzz-relay", "relay.key")); err != nil {
		t.Fatalf("default data dir not used: %v", err)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("relay did not stop within 10s of SIGTERM")
	}
}

func TestBuzzRelayExitsOneWhenPortIsTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cmd := command(t)
	cmd.Env = append(cmd.Env, "BUZZ_BIND_ADDR="+ln.Addr().String())
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit = %v, want 1; output %s", err, out)
	}
	if lines := strings.Split(strings.TrimSpace(string(out)), "\n"); len(lines) != 1 || !strings.Contains(lines[0], "cannot listen on "+ln.Addr().String()) {
		t.Fatalf("output = %q, want one clear line", out)
	}
}
