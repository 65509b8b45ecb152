package stack_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/stack"
	"github.com/buzz-harness/buzz/internal/testbin"
	"github.com/buzz-harness/buzz/internal/testwait"
)

// cleanEnv is the environment for `buzz up` under test: no model keys (so buzz-agent runs in
// echo mode) and no inherited relay or buzz up settings.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "BUZZ_RELAY_URL", "BUZZ_PRIVATE_KEY", "BUZZ_AGENT_PROVIDER", "BUZZ_UP_DATA_DIR", "BUZZ_UP_OWNER_DIR":
			continue
		}
		env = append(env, kv)
	}
	return env
}

// banner is what a test needs from `buzz up`'s startup lines. ownerKey is the owner key file
// its copy-paste line reads, which the tests' CLI calls read too.
type banner struct {
	relayHTTP, ownerKey, console, channel, agentName, agentNpub, ownerNpub string
}

var (
	reExport  = regexp.MustCompile(`export BUZZ_RELAY_URL=(\S+) BUZZ_PRIVATE_KEY=`)
	reKeyFile = regexp.MustCompile(`BUZZ_PRIVATE_KEY=\$\(cat ('[^']*'|\S+)\)`)
	reSend    = regexp.MustCompile(`buzz messages send --channel (\S+) --content "@(\S+) hello"`)
	reConsole = regexp.MustCompile(`console\s+(http://\S+)`)
	reAgent   = regexp.MustCompile(`agent\s+@\S+\s+(npub1\w+)`)
	reOwner   = regexp.MustCompile(`owner\s+(npub1\w+)`)
)

type upProc struct {
	cmd    *exec.Cmd
	banner banner
	done   chan error      // Wait's result, once
	exited chan struct{}   // closed once Wait has returned
	out    *testbin.Output // all of stdout
	stderr *testbin.Output
}

// startUp runs the real `buzz up` binary and waits for its banner.
func startUp(t *testing.T, bin, dataDir, relayAddr string, extra ...string) *upProc {
	t.Helper()
	return startUpEnv(t, nil, bin, dataDir, relayAddr, extra...)
}

// configHome is the XDG_CONFIG_HOME the tests give `buzz up` on dataDir, so its owner dir is
// never the real user's: beside the data dir, in the test's temporary directory, and the same
// for every start on that data dir.
func configHome(dataDir string) string { return filepath.Join(filepath.Dir(dataDir), "config-home") }

// startUpEnv is startUp with env added to buzz up's environment (and so its agent's).
func startUpEnv(t *testing.T, env []string, bin, dataDir, relayAddr string, extra ...string) *upProc {
	t.Helper()
	args := append([]string{"--data-dir", dataDir, "--relay-addr", relayAddr, "--console-addr", "127.0.0.1:0"}, extra...)
	// Outside the source tree: nothing may be built.
	return startUpIn(t, t.TempDir(), append([]string{"XDG_CONFIG_HOME=" + configHome(dataDir)}, env...), bin, args...)
}

// startUpIn runs `buzz up args…` in dir, with env added to a clean environment.
func startUpIn(t *testing.T, dir string, env []string, bin string, args ...string) *upProc {
	t.Helper()
	cmd := exec.Command(filepath.Join(bin, "buzz"), append([]string{"up"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(cleanEnv(), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &testbin.Output{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &upProc{cmd: cmd, done: make(chan error, 1), exited: make(chan struct{}), out: &testbin.Output{}, stderr: stderr}
	t.Cleanup(func() {
		// Wait runs on the reader goroutine; cmd.ProcessState is its to write, so the exit is
		// learned from the channel, not by reading the field.
		select {
		case <-p.exited:
		default:
			cmd.Process.Kill()
			<-p.exited
		}
	})
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.out.Write([]byte(sc.Text() + "\n"))
			lines <- sc.Text()
		}
		close(lines)
		p.done <- cmd.Wait()
		close(p.exited)
	}()
	var text strings.Builder
	deadline := time.After(60 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("buzz up exited before its banner:\n%s\nstderr: %s", text.String(), stderr.String())
			}
			text.WriteString(l + "\n")
			if m := reSend.FindStringSubmatch(l); m != nil {
				go func() {
					for range lines { // keep draining so the process never blocks on stdout
					}
				}()
				s := text.String()
				p.banner = banner{channel: m[1], agentName: m[2]}
				for _, f := range []struct {
					re  *regexp.Regexp
					dst *string
				}{{reExport, &p.banner.relayHTTP}, {reKeyFile, &p.banner.ownerKey}, {reConsole, &p.banner.console}, {reAgent, &p.banner.agentNpub}, {reOwner, &p.banner.ownerNpub}} {
					mm := f.re.FindStringSubmatch(s)
					if mm == nil {
						t.Fatalf("banner lacks %s:\n%s", f.re, s)
					}
					*f.dst = mm[1]
				}
				p.banner.ownerKey = strings.Trim(p.banner.ownerKey, "'")
				return p
			}
		case <-deadline:
			t.Fatalf("no banner within 60s:\n%s\nstderr: %s", text.String(), stderr.String())
		}
	}
}

// stop sends SIGINT and waits for a clean exit.
func (p *upProc) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.done:
		if err != nil {
			t.Fatalf("buzz up after SIGINT: %v; stderr:\n%s", err, p.stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("buzz up did not stop within 30s of SIGINT")
	}
}

// cmdline is a process's argv (from /proc).
func cmdline(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return nil
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}

// cli runs the buzz CLI as the owner whose key is in ownerKey (the file the banner names).
func cli(t *testing.T, bin, relay, ownerKey string, args ...string) []byte {
	t.Helper()
	key, err := os.ReadFile(ownerKey)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(bin, "buzz"), args...)
	cmd.Env = append(cleanEnv(), "BUZZ_RELAY_URL="+relay, "BUZZ_PRIVATE_KEY="+strings.TrimSpace(string(key)))
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("buzz %s: %v: %s", strings.Join(args, " "), err, stderr)
	}
	return out
}

func pubkeyOf(t *testing.T, keyFile string) string {
	t.Helper()
	pk, _ := protocol.PublicKey(secretOf(t, keyFile))
	return pk
}

func secretOf(t *testing.T, keyFile string) string {
	t.Helper()
	b, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	sk, err := protocol.ParseSecretKey(string(b))
	if err != nil {
		t.Fatal(err)
	}
	return sk
}

// waitReply polls `buzz messages get` until the agent has answered the message parentID.
func waitReply(t *testing.T, bin, relay, ownerKey, channel, agentPK, parentID string) string {
	t.Helper()
	return waitReplyWith(t, bin, relay, ownerKey, channel, agentPK, parentID, "")
}

// waitReplyWith waits for an agent message referencing parentID whose content contains want.
func waitReplyWith(t *testing.T, bin, relay, ownerKey, channel, agentPK, parentID, want string) string {
	t.Helper()
	reply := ""
	testwait.Eventually(t, 45*time.Second, func() bool {
		var msgs []struct {
			Pubkey  string     `json:"pubkey"`
			Content string     `json:"content"`
			Tags    [][]string `json:"tags"`
		}
		if err := json.Unmarshal(cli(t, bin, relay, ownerKey, "messages", "get", "--channel", channel), &msgs); err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			if m.Pubkey != agentPK || !strings.Contains(m.Content, want) {
				continue
			}
			for _, tag := range m.Tags {
				if len(tag) >= 2 && tag[0] == "e" && tag[1] == parentID {
					reply = m.Content
					return true
				}
			}
		}
		return false
	}, fmt.Sprintf("the agent's answer to %s containing %q", parentID, want))
	return reply
}

func send(t *testing.T, bin, relay, ownerKey, channel, content string, extra ...string) string {
	t.Helper()
	var res struct {
		EventID  string   `json:"event_id"`
		Mentions []string `json:"mention_pubkeys"`
	}
	if err := json.Unmarshal(cli(t, bin, relay, ownerKey, append([]string{"messages", "send", "--channel", channel, "--content", content}, extra...)...), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Mentions) != 1 {
		t.Fatalf("%q resolved mentions %v, want the agent", content, res.Mentions)
	}
	return res.EventID
}

// activityTypes collects activity event types from the console's stream until want shows up.
func waitActivity(t *testing.T, consoleURL, want string) {
	t.Helper()
	base, token, _ := strings.Cut(consoleURL, "/?token=")
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/stream?token="+token, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 8<<20)
	var seen []string
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var e struct {
			Type string `json:"type"`
		}
		if json.Unmarshal([]byte(data), &e) == nil && e.Type != "" {
			seen = append(seen, e.Type)
			if e.Type == want {
				return
			}
		}
	}
	t.Fatalf("no %s activity within 45s; saw %v", want, seen)
}

func TestUpAnswersMentionStopsOnSIGINTWithoutLeftoversAndResumesOnSecondStart(t *testing.T) {
	t.Parallel()
	bin := testbin.Dir(t, "cmd/buzz")
	dataDir := filepath.Join(t.TempDir(), "data")

	// Sessions are remembered per relay URL, so both starts use the same port, as a user's would.
	relayAddr := testbin.FreeAddr(t)
	first := startUp(t, bin, dataDir, relayAddr)
	agentPK := pubkeyOf(t, filepath.Join(dataDir, "agent.key"))
	if first.banner.agentNpub != protocol.Npub(agentPK) {
		t.Errorf("banner agent %s, key file says %s", first.banner.agentNpub, protocol.Npub(agentPK))
	}
	ownerKey := first.banner.ownerKey
	for _, f := range []string{ownerKey, filepath.Join(dataDir, "agent.key")} {
		st, err := os.Stat(f)
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: mode %v (err %v), want 0600", f, st.Mode().Perm(), err)
		}
	}
	if first.banner.ownerNpub != protocol.Npub(pubkeyOf(t, ownerKey)) {
		t.Errorf("banner owner %s, key file %s says otherwise", first.banner.ownerNpub, ownerKey)
	}
	checkStackLockedDown(t, first.banner.relayHTTP, first.banner.channel, secretOf(t, ownerKey), agentPK)
	// The banner's copy-paste line works as printed.
	id := send(t, bin, first.banner.relayHTTP, ownerKey, first.banner.channel, "@"+first.banner.agentName+" hello")
	if reply := waitReply(t, bin, first.banner.relayHTTP, ownerKey, first.banner.channel, agentPK, id); !strings.Contains(reply, "hello") {
		t.Errorf("agent reply %q does not echo the request", reply)
	}

	kids := testbin.Children(first.cmd.Process.Pid)
	if len(kids) == 0 {
		t.Fatal("buzz up has no child process; the agent should run as its child")
	}
	// The agent is this same binary's `buzz agent`, through the data dir's stable link (no
	// buzz-agent binary exists in bin).
	for _, pid := range kids {
		argv := cmdline(pid)
		if len(argv) < 2 || argv[0] != filepath.Join(dataDir, "bin", "buzz") || argv[1] != "agent" {
			t.Errorf("child %d runs %q, want <data-dir>/bin/buzz agent", pid, argv)
		}
	}
	first.stop(t)
	for _, pid := range kids {
		if testbin.Running(pid) {
			t.Errorf("child %d still running after buzz up stopped", pid)
		}
	}
	// Ctrl-C says what stopped.
	for _, want := range []string{"stopped the harness and the agent", "stopped the console", "stopped the relay"} {
		if !strings.Contains(first.out.String(), want) {
			t.Errorf("output after SIGINT lacks %q:\n%s", want, first.out.String())
		}
	}

	second := startUp(t, bin, dataDir, relayAddr)
	if second.banner.channel != first.banner.channel || second.banner.ownerNpub != first.banner.ownerNpub || second.banner.agentNpub != first.banner.agentNpub {
		t.Errorf("second start changed identities or channel:\nfirst  %+v\nsecond %+v", first.banner, second.banner)
	}
	resumed := make(chan struct{})
	go func() { defer close(resumed); waitActivity(t, second.banner.console, "session_resumed") }()
	// A reply in the first thread: its session is the one to resume (a session per thread). The
	// agent answers in the thread, under its root.
	send(t, bin, second.banner.relayHTTP, ownerKey, second.banner.channel, "@"+second.banner.agentName+" are you back?", "--reply-to", id)
	waitReplyWith(t, bin, second.banner.relayHTTP, ownerKey, second.banner.channel, agentPK, id, "are you back")
	<-resumed
	second.stop(t)
}

// runUp runs `buzz up` expecting it to fail, and returns its exit code and stderr lines.
func runUp(t *testing.T, bin string, args ...string) (int, []string) {
	t.Helper()
	return runUpEnv(t, []string{"XDG_CONFIG_HOME=" + t.TempDir()}, bin, args...)
}

// runUpEnv is runUp with env added to a clean environment.
func runUpEnv(t *testing.T, env []string, bin string, args ...string) (int, []string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(bin, "buzz"), append([]string{"up"}, args...)...)
	cmd.Dir = t.TempDir()
	cmd.Env = append(cleanEnv(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	cmd.Stdout = io.Discard
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("buzz up did not fail within 30s")
	}
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	return cmd.ProcessState.ExitCode(), lines
}

// checkOneLineFailure expects the CLI's failure shape: a non-zero exit and exactly one JSON line
// {"error","message","retryable"} on stderr whose message says what is wrong.
func checkOneLineFailure(t *testing.T, code int, lines []string, want string) {
	t.Helper()
	if code == 0 {
		t.Errorf("exit code 0, want non-zero")
	}
	if len(lines) != 1 {
		t.Fatalf("stderr = %q, want one line", lines)
	}
	var e struct {
		Error   string `json:"error"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &e); err != nil || !strings.Contains(e.Message, want) {
		t.Errorf("stderr = %q (%v), want a message containing %q", lines[0], err, want)
	}
}

func TestUpFailsWithOneLineWhenRelayPortIsInUse(t *testing.T) {
	t.Parallel()
	bin := testbin.Dir(t, "cmd/buzz")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	code, lines := runUp(t, bin, "--data-dir", t.TempDir(), "--relay-addr", ln.Addr().String(), "--console-addr", "127.0.0.1:0")
	checkOneLineFailure(t, code, lines, "port "+ln.Addr().String()+" is already in use")
}

func TestUpFailedFirstStartLeavesNoDataDir(t *testing.T) {
	t.Parallel()
	bin := testbin.Dir(t, "cmd/buzz")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for name, args := range map[string][]string{
		"agent missing": {"--relay-addr", "127.0.0.1:0", "--agent-command", "no-such-agent-xyz"},
		"port in use":   {"--relay-addr", ln.Addr().String()},
		"bad console":   {"--relay-addr", "127.0.0.1:0", "--console-addr", "0.0.0.0:0"},
	} {
		parent := filepath.Join(t.TempDir(), "new")
		dataDir := filepath.Join(parent, "data")
		code, lines := runUp(t, bin, append([]string{"--data-dir", dataDir, "--console-addr", "127.0.0.1:0"}, args...)...)
		if code == 0 {
			t.Errorf("%s: exit 0", name)
		}
		if _, err := os.Stat(parent); !os.IsNotExist(err) {
			t.Errorf("%s: failed start left %s behind (%v); stderr %q", name, parent, err, lines)
		}
	}
}

func TestUpOnADataDirAnotherBuzzUpHoldsNamesBuzzUp(t *testing.T) {
	t.Parallel()
	bin := testbin.Dir(t, "cmd/buzz")
	dataDir := filepath.Join(t.TempDir(), "data")
	first := startUp(t, bin, dataDir, testbin.FreeAddr(t))
	code, lines := runUp(t, bin, "--data-dir", dataDir, "--relay-addr", "127.0.0.1:0", "--console-addr", "127.0.0.1:0")
	checkOneLineFailure(t, code, lines, "in use by another buzz up (pid "+strconv.Itoa(first.cmd.Process.Pid)+")")
	first.stop(t)
}

// printEnv runs `buzz up --print-env --data-dir dataDir args…` as startUp's stacks run.
func printEnv(t *testing.T, bin, dataDir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(bin, "buzz"), append([]string{"up", "--print-env", "--data-dir", dataDir}, args...)...)
	cmd.Env = append(cleanEnv(), "XDG_CONFIG_HOME="+configHome(dataDir))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("buzz up --print-env: %v", err)
	}
	return string(out)
}

func TestUpPrintEnvGivesTheRunningStacksRelayURL(t *testing.T) {
	t.Parallel()
	bin := testbin.Dir(t, "cmd/buzz")
	dataDir := filepath.Join(t.TempDir(), "data")
	first := startUp(t, bin, dataDir, testbin.FreeAddr(t))
	out := printEnv(t, bin, dataDir)
	if want := "export BUZZ_RELAY_URL=" + first.banner.relayHTTP + "\n"; !strings.HasPrefix(out, want) {
		t.Errorf("--print-env while running printed\n%s\nwant it to start with\n%s", out, want)
	}
	first.stop(t)
	// Stopped: the record is gone and the flag (here the default) decides again.
	out = printEnv(t, bin, dataDir)
	if want := "export BUZZ_RELAY_URL=http://" + stack.DefaultRelayAddr + "\n"; !strings.HasPrefix(out, want) {
		t.Errorf("--print-env after stop printed\n%s\nwant it to start with\n%s", out, want)
	}
}

func TestUpFailsWithOneLineWhenDataDirIsNotADirectory(t *testing.T) {
	t.Parallel()
	bin := testbin.Dir(t, "cmd/buzz")
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, []byte("x"), 0o600)
	code, lines := runUp(t, bin, "--data-dir", file, "--relay-addr", "127.0.0.1:0", "--console-addr", "127.0.0.1:0")
	checkOneLineFailure(t, code, lines, "is not a directory")
}

func TestUpFailsWithOneLineWhenAgentCommandIsMissing(t *testing.T) {
	t.Parallel()
	bin := testbin.Dir(t, "cmd/buzz")
	code, lines := runUp(t, bin, "--data-dir", t.TempDir(), "--relay-addr", "127.0.0.1:0", "--console-addr", "127.0.0.1:0", "--agent-command", "no-such-agent-xyz")
	checkOneLineFailure(t, code, lines, `agent command "no-such-agent-xyz" not found`)
}

func TestUpPrintEnvExportsTheOwnersKeyAndRelayURL(t *testing.T) {
	t.Parallel()
	bin := testbin.Dir(t, "cmd/buzz")
	dataDir := filepath.Join(t.TempDir(), "data")
	run := func() string { return printEnv(t, bin, dataDir, "--relay-addr", "127.0.0.1:4555") }
	out := run()
	// The key is in the default owner dir, under the config dir, and not in the data dir.
	keys, _ := filepath.Glob(filepath.Join(configHome(dataDir), "buzz", "owner", "*", "owner.key"))
	if len(keys) != 1 {
		t.Fatalf("owner keys under the config dir: %q, want one", keys)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "owner.key")); !os.IsNotExist(err) {
		t.Errorf("the data dir has an owner.key (%v)", err)
	}
	key, err := os.ReadFile(keys[0])
	if err != nil {
		t.Fatal(err)
	}
	want := "export BUZZ_RELAY_URL=http://127.0.0.1:4555\nexport BUZZ_PRIVATE_KEY=" + strings.TrimSpace(string(key)) + "\n"
	if out != want {
		t.Errorf("--print-env printed\n%s\nwant\n%s", out, want)
	}
	if again := run(); again != out {
		t.Errorf("second --print-env differs: the owner identity must be kept")
	}
}

func TestLoadIdentitiesTightensAKeyFileOthersCanRead(t *testing.T) {
	t.Parallel()
	dir, ownerDir := t.TempDir(), t.TempDir()
	ids, err := stack.LoadIdentities(dir, ownerDir, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(ids.Owner.KeyFile, 0o644)
	again, err := stack.LoadIdentities(dir, ownerDir, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if again.Owner.Pubkey != ids.Owner.Pubkey || again.Agent.Pubkey != ids.Agent.Pubkey {
		t.Error("identities changed between loads")
	}
	if st, _ := os.Stat(ids.Owner.KeyFile); st.Mode().Perm() != 0o600 {
		t.Errorf("owner.key mode %v after load, want 0600", st.Mode().Perm())
	}
}

func TestLoadIdentitiesRejectsAGarbledKeyFile(t *testing.T) {
	t.Parallel()
	dir, ownerDir := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(ownerDir, "owner.key"), []byte("not a key\n"), 0o600)
	_, err := stack.LoadIdentities(dir, ownerDir, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "owner.key") {
		t.Errorf("err = %v, want one naming owner.key", err)
	}
}

// A data dir from before the owner dir existed keeps its owner: the key moves out of it, with
// one line saying so, and the stale running.json (console token included) goes too.
func TestUpMovesAnOlderDataDirsOwnerKeyToTheOwnerDir(t *testing.T) {
	t.Parallel()
	bin := testbin.Dir(t, "cmd/buzz")
	dataDir := filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	sk := nostr.GeneratePrivateKey()
	old := filepath.Join(dataDir, "owner.key")
	os.WriteFile(old, []byte(protocol.Nsec(sk)+"\n"), 0o600)
	os.WriteFile(filepath.Join(dataDir, "running.json"), []byte(`{"pid":1,"httpURL":"http://127.0.0.1:1","consoleURL":"http://127.0.0.1:2/?token=old"}`), 0o600)
	up := startUp(t, bin, dataDir, testbin.FreeAddr(t))
	if got := secretOf(t, up.banner.ownerKey); got != sk {
		t.Errorf("owner key at %s is not the data dir's old one", up.banner.ownerKey)
	}
	if pk, _ := protocol.PublicKey(sk); up.banner.ownerNpub != protocol.Npub(pk) {
		t.Errorf("banner owner %s, want the old key's %s", up.banner.ownerNpub, protocol.Npub(pk))
	}
	for _, f := range []string{old, filepath.Join(dataDir, "running.json")} {
		if _, err := os.Stat(f); !os.IsNotExist(err) {
			t.Errorf("%s still there (%v)", f, err)
		}
	}
	if want := "buzz up: moved the owner key from " + old + " to " + up.banner.ownerKey; strings.Count(up.out.String(), want) != 1 {
		t.Errorf("output does not say once %q:\n%s", want, up.out.String())
	}
	up.stop(t)
}

// A data dir whose owner key is not where this start looks (another config dir, a forgotten
// --owner-dir) is refused with one line naming both places, rather than given a new owner.
func TestUpWhoseOwnerKeyIsMissingSaysWhereItLookedAndMakesNoNewOwner(t *testing.T) {
	t.Parallel()
	bin := testbin.Dir(t, "cmd/buzz")
	dataDir := filepath.Join(t.TempDir(), "data")
	printEnv(t, bin, dataDir) // first use: the owner key goes under configHome(dataDir)
	keys, _ := filepath.Glob(filepath.Join(configHome(dataDir), "buzz", "owner", "*", "owner.key"))
	if len(keys) != 1 {
		t.Fatalf("owner keys: %q, want one", keys)
	}
	elsewhere := t.TempDir()
	code, lines := runUpEnv(t, []string{"XDG_CONFIG_HOME=" + elsewhere}, bin, "--data-dir", dataDir, "--relay-addr", "127.0.0.1:0", "--console-addr", "127.0.0.1:0")
	checkOneLineFailure(t, code, lines, "owner key not found: looked for "+elsewhere)
	checkOneLineFailure(t, code, lines, "pass --owner-dir "+filepath.Dir(keys[0]))
	if made, _ := os.ReadDir(elsewhere); len(made) != 0 {
		t.Errorf("the refused start made %v under %s", made, elsewhere)
	}
}
