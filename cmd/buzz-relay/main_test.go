package main

import (
	"bufio"
	"context"
	"io"
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

	"github.com/coder/websocket"

	"github.com/buzz-harness/buzz/internal/testbin"
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

var metricsLine = regexp.MustCompile(`buzz-relay metrics: http://(\S+)/metrics`)

// startRelay runs the binary with args and returns its relay and metrics addresses.
func startRelay(t *testing.T, env []string, args ...string) (addr, metrics string) {
	t.Helper()
	cmd := command(t, args...)
	cmd.Env = append(cmd.Env, env...)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() })
	lines := bufio.NewScanner(stderr)
	for (addr == "" || metrics == "") && lines.Scan() {
		if m := listening.FindStringSubmatch(lines.Text()); m != nil {
			addr = m[1]
		}
		if m := metricsLine.FindStringSubmatch(lines.Text()); m != nil {
			metrics = m[1]
		}
	}
	if addr == "" || metrics == "" {
		t.Fatalf("no listening and metrics lines on stderr (relay %q, metrics %q)", addr, metrics)
	}
	go func() {
		for lines.Scan() {
		}
	}()
	return addr, metrics
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestBuzzRelayServesMetricsAndProbesOnTheMetricsAddress(t *testing.T) {
	addr, metrics := startRelay(t, nil, "--addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws://"+addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	if _, _, err := ws.Read(ctx); err != nil { // the AUTH challenge: the connection is registered
		t.Fatal(err)
	}
	code, body := get(t, "http://"+metrics+"/metrics")
	if code != http.StatusOK || !strings.Contains(body, "\nbuzz_ws_connections_active 1\n") || !strings.Contains(body, "\nbuzz_events_received_total 0\n") {
		t.Fatalf("/metrics: %d\n%s", code, body)
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		if code, body := get(t, "http://"+metrics+p); code != http.StatusOK {
			t.Errorf("%s on the metrics address: %d %s", p, code, body)
		}
		if code, body := get(t, "http://"+addr+p); code != http.StatusOK {
			t.Errorf("%s on the relay address: %d %s", p, code, body)
		}
	}
	if code, _ := get(t, "http://"+addr+"/metrics"); code == http.StatusOK {
		t.Error("the relay's public address serves /metrics")
	}
}

func TestBuzzRelayTakesUpstreamsMetricsPortAsALoopbackPort(t *testing.T) {
	_, port, _ := net.SplitHostPort(testbin.FreeAddr(t))
	_, metrics := startRelay(t, []string{"BUZZ_METRICS_PORT=" + port}, "--addr", "127.0.0.1:0")
	if metrics != "127.0.0.1:"+port {
		t.Fatalf("BUZZ_METRICS_PORT=%s serves metrics on %s, want 127.0.0.1:%s", port, metrics, port)
	}
}

func TestBuzzRelayRefusesABadMetricsAddressInOneLine(t *testing.T) {
	for _, c := range []struct {
		env  []string
		args []string
		want string
	}{
		{args: []string{"--metrics-addr", "localhost"}, want: "--metrics-addr / BUZZ_METRICS_ADDR"},
		{env: []string{"BUZZ_METRICS_PORT=metrics"}, want: "BUZZ_METRICS_PORT"},
	} {
		cmd := command(t, append([]string{"--addr", "127.0.0.1:0"}, c.args...)...)
		cmd.Env = append(cmd.Env, c.env...)
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
			t.Fatalf("%v %v: exit = %v, want 1; output %s", c.env, c.args, err, out)
		}
		if lines := strings.Split(strings.TrimSpace(string(out)), "\n"); len(lines) != 1 || !strings.Contains(lines[0], c.want) {
			t.Errorf("%v %v: output = %q, want one line naming %s", c.env, c.args, out, c.want)
		}
	}
}
