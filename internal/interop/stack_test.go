package interop

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/fakemodel"
	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/relay/relaytest"
	"github.com/buzz-harness/buzz/internal/testbin"
	"github.com/buzz-harness/buzz/internal/testwait"
)

// adapter is one pinned npm package as scripts/install-adapters.sh lays it out.
type adapter struct {
	dir, pkg, version string
	entry             string // script run with node, relative to the package dir
}

// Keep in step with scripts/install-adapters.sh (the newer agents' pins sit next to their tests:
// qwen_test.go, opencode_test.go, copilot_test.go, gemini_test.go).
var (
	claudeACP    = adapter{"claude-acp-0.101.0", "@agentclientprotocol/claude-agent-acp", "0.101.0", "dist/index.js"}
	zedClaudeACP = adapter{"zed-claude-acp-0.23.1", "@zed-industries/claude-agent-acp", "0.23.1", "dist/index.js"}
	zedCodexACP  = adapter{"zed-codex-acp-0.16.0", "@zed-industries/codex-acp", "0.16.0", "bin/codex-acp.js"}
	codexACP     = adapter{"acp-codex-acp-2.6.0", "@agentclientprotocol/codex-acp", "2.6.0", "dist/index.js"}
)

func adapterCache() string {
	if d := os.Getenv("BUZZ_ADAPTER_CACHE"); d != "" {
		return d
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "buzz-adapters")
}

// command returns node and the adapter's entry script, skipping the test when the adapter is not
// installed — or failing it under BUZZ_INTEROP=1, where CI promises the install happened.
func (a adapter) command(t *testing.T) (node, script string) {
	t.Helper()
	pkgDir := filepath.Join(adapterCache(), a.dir, "node_modules", a.pkg)
	var meta struct{ Version string }
	b, err := os.ReadFile(filepath.Join(pkgDir, "package.json"))
	if err == nil {
		err = json.Unmarshal(b, &meta)
	}
	if err == nil && meta.Version != a.version {
		err = errVersion(meta.Version)
	}
	if err == nil {
		node, err = exec.LookPath("node")
	}
	if err != nil {
		msg := a.pkg + "@" + a.version + " not usable under " + adapterCache() + " (" + err.Error() +
			"); run scripts/install-adapters.sh (BUZZ_ADAPTER_CACHE picks the cache dir)"
		if os.Getenv("BUZZ_INTEROP") == "1" {
			t.Fatal("BUZZ_INTEROP=1: " + msg)
		}
		t.Skip(msg)
	}
	return node, filepath.Join(pkgDir, a.entry)
}

type errVersion string

func (e errVersion) Error() string { return "installed version is " + string(e) }

// stack is a real relay, a channel with the agent as member, and the real buzz-acp binary driving
// a real adapter whose HOME lives in home (kept across restarts).
type stack struct {
	t        *testing.T
	relay    *relaytest.Server
	bin      string
	ownerSK  string
	agentSK  string
	agentPK  string
	channel  string
	stateDir string
	cwd      string
	home     string
	runs     int
	activity string // activity log of the current run
	harness  *exec.Cmd
	logs     *testbin.Output
	exited   chan error
}

// adapterSlots bounds how many stacks run at once: each runs a real adapter, a Node process whose
// start alone takes seconds of CPU, so more of them side by side only push each past its bounds.
var adapterSlots = make(chan struct{}, 2)

func newStack(t *testing.T) *stack {
	t.Helper()
	adapterSlots <- struct{}{}
	t.Cleanup(func() { <-adapterSlots })
	s := &stack{t: t, relay: relaytest.Start(t)}
	s.bin = testbin.Dir(t, "cmd/buzz", "cmd/buzz-acp")
	s.ownerSK = nostr.GeneratePrivateKey()
	s.agentSK = nostr.GeneratePrivateKey()
	var err error
	if s.agentPK, err = protocol.PublicKey(s.agentSK); err != nil {
		t.Fatal(err)
	}
	s.channel = s.relay.CreateChannel(t, s.ownerSK, "general", false)
	s.relay.AddMember(t, s.ownerSK, s.channel, s.agentPK, "bot")
	dir := t.TempDir()
	s.stateDir = filepath.Join(dir, "state")
	s.cwd = filepath.Join(dir, "work")
	s.home = filepath.Join(dir, "home")
	for _, d := range []string{s.cwd, s.home} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// start runs buzz-acp with the given agent command; env entries come last and so win.
func (s *stack) start(agentCommand string, agentArgs []string, env ...string) {
	s.t.Helper()
	s.runs++
	s.activity = filepath.Join(filepath.Dir(s.stateDir), "activity-"+string(rune('0'+s.runs))+".jsonl")
	args := []string{
		"--agent-command", agentCommand,
		"--relay-url", s.relay.URL,
		"--agent-owner", mustPub(s.t, s.ownerSK),
		"--state-dir", s.stateDir,
		"--agent-cwd", s.cwd,
		"--activity-log", s.activity,
		"--idle-timeout", "60",
		"--log-level", "debug",
		// These tests follow one session across top-level mentions: one session per channel.
		"--session-policy", "channel",
	}
	if len(agentArgs) > 0 {
		args = append(args, "--agent-args", strings.Join(agentArgs, ","))
	}
	cmd := exec.Command(filepath.Join(s.bin, "buzz-acp"), args...)
	cmd.Dir = s.cwd
	cmd.Env = append(cleanEnv(),
		"BUZZ_PRIVATE_KEY="+s.agentSK,
		"HOME="+s.home,
		"NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost",
		"DISABLE_TELEMETRY=1",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_AUTOUPDATER=1",
		"IS_SANDBOX=1", // we may run as root; claude refuses bypass mode there without it
	)
	cmd.Env = append(cmd.Env, env...)
	s.logs = &testbin.Output{}
	cmd.Stdout, cmd.Stderr = s.logs, s.logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.harness = cmd
	s.exited = make(chan error, 1)
	go func() { s.exited <- cmd.Wait() }()
	s.t.Cleanup(s.kill)
	s.waitLog("buzz-acp ready", 30*time.Second)
}

// cleanEnv is this process's environment without anything that could point an adapter at a real
// model or account.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(k, "ANTHROPIC_"), strings.HasPrefix(k, "OPENAI_"), strings.HasPrefix(k, "CLAUDE_"),
			strings.HasPrefix(k, "CODEX_"), strings.HasPrefix(k, "BUZZ_"), strings.HasSuffix(k, "_PROXY"),
			strings.HasSuffix(k, "_proxy"):
			continue
		case strings.HasPrefix(k, "OPENCODE_"): // opencode reads its config and switches from these
			continue
		}
		out = append(out, kv)
	}
	return out
}

func mustPub(t *testing.T, sk string) string {
	pk, err := protocol.PublicKey(sk)
	if err != nil {
		t.Fatal(err)
	}
	return pk
}

// kill SIGKILLs buzz-acp and its agents, as a crash would, and returns once none of them runs:
// an adapter left to exit on its own still writes its transcript into HOME while the test's
// temp dir is being removed.
func (s *stack) kill() {
	if s.harness == nil {
		return
	}
	defer func() { // deferred: it runs even when KillWithAgents fails the test
		if s.t.Failed() {
			s.t.Logf("buzz-acp output (run %d):\n%s", s.runs, s.logs.String())
		}
	}()
	testbin.KillWithAgents(s.t, s.harness.Process.Pid)
	<-s.exited
	s.harness = nil
}

// waitLog waits until buzz-acp's output contains substr, failing at once if buzz-acp exits.
// On failure kill logs the output.
func (s *stack) waitLog(substr string, timeout time.Duration) {
	s.t.Helper()
	testwait.Eventually(s.t, timeout, func() bool {
		if strings.Contains(s.logs.String(), substr) {
			return true
		}
		select {
		case err := <-s.exited:
			s.exited <- err
			s.t.Fatalf("buzz-acp exited (%v) before logging %q", err, substr)
		default:
		}
		return false
	}, fmt.Sprintf("buzz-acp to log %q", substr))
}

// mention posts a top-level kind-9 message from the owner that p-tags the agent.
func (s *stack) mention(content string) nostr.Event {
	s.t.Helper()
	ev := nostr.Event{Kind: 9, Content: content, CreatedAt: nostr.Now(),
		Tags: nostr.Tags{{"h", s.channel}, {"p", s.agentPK}}}
	if err := ev.Sign(s.ownerSK); err != nil {
		s.t.Fatal(err)
	}
	s.relay.Publish(s.t, s.ownerSK, ev)
	return ev
}

// waitReply polls the relay for the agent's kind-9 reply referencing id.
func (s *stack) waitReply(id string, timeout time.Duration) nostr.Event {
	s.t.Helper()
	f := nostr.Filter{Kinds: []int{9}, Authors: []string{s.agentPK}, Tags: nostr.TagMap{"e": {id}}}
	var reply nostr.Event
	testwait.Eventually(s.t, timeout, func() bool {
		evs := s.relay.Query(s.t, s.ownerSK, f)
		if len(evs) > 0 {
			reply = evs[0]
		}
		return len(evs) > 0
	}, "the agent's reply to "+id)
	return reply
}

// acpLine is one raw JSON-RPC line from the activity log.
type acpLine struct {
	Dir    string
	Method string
	ID     json.RawMessage
	Params json.RawMessage
	Result json.RawMessage
	Raw    string
}

// acpLines reads the raw ACP lines of one run's activity log (file written by --activity-log).
func (s *stack) acpLines(file string) []acpLine {
	s.t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		s.t.Fatal(err)
	}
	var out []acpLine
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var ev struct {
			Type string `json:"type"`
			Data struct {
				Dir  string `json:"dir"`
				Line string `json:"line"`
			} `json:"data"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.Type != "acp_line" {
			continue
		}
		var msg struct {
			Method string          `json:"method"`
			ID     json.RawMessage `json:"id"`
			Params json.RawMessage `json:"params"`
			Result json.RawMessage `json:"result"`
		}
		_ = json.Unmarshal([]byte(ev.Data.Line), &msg)
		out = append(out, acpLine{Dir: ev.Data.Dir, Method: msg.Method, ID: msg.ID, Params: msg.Params, Result: msg.Result, Raw: ev.Data.Line})
	}
	return out
}

// sent returns the params of every request/notification buzz-acp wrote to the agent with method.
func sent(lines []acpLine, method string) []json.RawMessage {
	var out []json.RawMessage
	for _, l := range lines {
		if l.Dir == "send" && l.Method == method {
			out = append(out, l.Params)
		}
	}
	return out
}

// dumpOnFailure logs what the model saw and the ACP exchange, to explain a failed interop test.
func dumpOnFailure(t *testing.T, s *stack, reqs []fakemodel.Request) {
	if !t.Failed() {
		return
	}
	for i, r := range reqs {
		if d := os.Getenv("INTEROP_DUMP_DIR"); d != "" {
			_ = os.WriteFile(filepath.Join(d, fmt.Sprintf("req-%02d.json", i)), r.Body, 0o600)
		}
		last := r.Last()
		t.Logf("model request %d %s tools=%v system=%.200q last message (%s)=%.600q",
			i, r.Path, r.Tools, r.System, last.Role, last.Text)
	}
	if s.activity != "" {
		for _, l := range s.acpLines(s.activity) {
			t.Logf("acp %s %.500s", l.Dir, l.Raw)
		}
	}
}

// waitTurns waits until buzz-acp has logged n finished turns in this run, so everything the model
// was asked during them has been recorded.
func (s *stack) waitTurns(n int, timeout time.Duration) {
	s.t.Helper()
	testwait.Eventually(s.t, timeout, func() bool { return strings.Count(s.logs.String(), `msg="turn done"`) >= n },
		fmt.Sprintf("%d finished turns", n))
}

// resultOf returns the agent's result for the single request of method buzz-acp sent, failing
// unless there was exactly one such request and it was answered.
func resultOf(t *testing.T, lines []acpLine, method string) json.RawMessage {
	t.Helper()
	var id json.RawMessage
	n := 0
	for _, l := range lines {
		if l.Dir == "send" && l.Method == method {
			id, n = l.ID, n+1
		}
	}
	if n != 1 {
		t.Fatalf("%s sent %d times, want 1", method, n)
	}
	for _, l := range lines {
		if l.Dir == "recv" && l.Method == "" && string(l.ID) == string(id) && l.Result != nil {
			return l.Result
		}
	}
	t.Fatalf("%s (id %s) was never answered", method, id)
	return nil
}
