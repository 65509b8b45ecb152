package acp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/buzz-harness/buzz/internal/testbin"
)

// testAgentBin is the real testagent program, built once for the package's tests.
var testAgentBin string

func TestMain(m *testing.M) {
	dir, err := testbin.Build("internal/testagent")
	if err != nil {
		fmt.Fprintf(os.Stderr, "build testagent: %v\n", err)
		os.Exit(1)
	}
	testAgentBin = filepath.Join(dir, "testagent")
	os.Exit(testbin.Run(m))
}

// fakeBuzz installs a stand-in `buzz` CLI (the outside edge) that writes its argv, one per
// line, after the relay URL it saw in the environment.
func fakeBuzz(t *testing.T) (binDir, argsFile string) {
	binDir = t.TempDir()
	argsFile = filepath.Join(t.TempDir(), "buzz-args")
	script := "#!/bin/sh\n{ echo \"relay=$BUZZ_RELAY_URL\"; printf '%s\\n' \"$@\"; } > " + argsFile + ".tmp && mv " + argsFile + ".tmp " + argsFile + "\necho '{\"ok\":true}'\n"
	if err := os.WriteFile(filepath.Join(binDir, "buzz"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return binDir, argsFile
}

// stderrLog collects the agent's stderr lines and lets a test wait for one.
type stderrLog struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	writes  int
	changed chan struct{}
}

func (s *stderrLog) Write(p []byte) (int, error) {
	s.mu.Lock()
	s.buf.Write(p)
	s.writes++
	s.mu.Unlock()
	select {
	case s.changed <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (s *stderrLog) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

func (s *stderrLog) waitFor(t *testing.T, sub string) {
	t.Helper()
	ctx := testCtx(t)
	for !strings.Contains(s.String(), sub) {
		select {
		case <-s.changed:
		case <-ctx.Done():
			t.Fatalf("agent never logged %q; stderr:\n%s", sub, s.String())
		}
	}
}

type agentRun struct {
	*Process
	stderr  *stderrLog
	updates *updateLog
	record  string
}

func spawnTestAgent(t *testing.T, env map[string]string, cfg ClientConfig) *agentRun {
	t.Helper()
	run := &agentRun{stderr: &stderrLog{changed: make(chan struct{}, 1)}, updates: newUpdateLog()}
	if _, ok := env["TESTAGENT_RECORD"]; !ok {
		env["TESTAGENT_RECORD"] = filepath.Join(t.TempDir(), "record.jsonl")
	}
	if _, ok := env["TESTAGENT_STATE_DIR"]; !ok {
		env["TESTAGENT_STATE_DIR"] = t.TempDir()
	}
	run.record = env["TESTAGENT_RECORD"]
	environ := os.Environ()
	for k, v := range env {
		environ = append(environ, k+"="+v)
	}
	if cfg.OnUpdate == nil {
		cfg.OnUpdate = run.updates.add
	}
	p, err := Spawn(context.Background(), SpawnConfig{Command: testAgentBin, Env: environ, Dir: t.TempDir(), Stderr: run.stderr, Client: cfg})
	if err != nil {
		t.Fatal(err)
	}
	run.Process = p
	t.Cleanup(func() { _ = p.Kill() })
	return run
}

// start initializes and opens a session.
func (r *agentRun) start(t *testing.T) string {
	t.Helper()
	if _, err := r.Initialize(testCtx(t)); err != nil {
		t.Fatalf("initialize: %v; stderr:\n%s", err, r.stderr)
	}
	sid, _, err := r.NewSessionState(testCtx(t), SessionParams{Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return sid
}

type recorded struct {
	Type   string          `json:"type"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *RPCError       `json:"error"`
}

func (r *agentRun) recorded(t *testing.T) []recorded {
	t.Helper()
	b, err := os.ReadFile(r.record)
	if err != nil {
		t.Fatal(err)
	}
	var out []recorded
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var rec recorded
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatalf("record line %q: %v", line, err)
		}
		out = append(out, rec)
	}
	return out
}

const (
	chanID  = "5c0ffee0-1234-4abc-8def-0123456789ab"
	eventID = "1111111111111111111111111111111111111111111111111111111111111111"
	rootID  = "2222222222222222222222222222222222222222222222222222222222222222"
)

func buzzPrompt(content string, replyTo string) []ContentBlock {
	ctxBlock := "[Context]\nScope: channel\nChannel: general (#" + chanID + ")\nHint: Use `buzz messages get --channel " + chanID + "` for recent messages if needed."
	if replyTo != "" {
		ctxBlock += "\nIMPORTANT: reply with `buzz messages send --channel " + chanID + " --reply-to " + replyTo + " --content ...`."
	}
	ev := "[Buzz event: message]\nEvent ID: " + eventID + "\nChannel: general (#" + chanID + ")\nKind: 9\nFrom: npub1xyz (hex: ab)\nTime: 2026-01-01T00:00:00Z\nContent: " + content + "\nTags: []"
	return []ContentBlock{TextBlock(ctxBlock), TextBlock(ev)}
}

func readArgs(t *testing.T, file string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("buzz CLI was not run: %v", err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

func TestSpawnedAgentTurnRepliesThroughBuzzCLI(t *testing.T) {
	bin, argsFile := fakeBuzz(t)
	run := spawnTestAgent(t, map[string]string{
		"PATH":             bin + ":" + os.Getenv("PATH"),
		"BUZZ_RELAY_URL":   "ws://127.0.0.1:1/relay",
		"TESTAGENT_STREAM": "3",
	}, ClientConfig{ClientVersion: "9.9.9"})
	sid := run.start(t)
	res, err := run.Prompt(testCtx(t), sid, buzzPrompt("hello there\nsecond line", rootID), PromptOptions{IdleTimeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("prompt: %v\nstderr:\n%s", err, run.stderr)
	}
	if res.StopReason != "end_turn" || len(res.Usage) == 0 {
		t.Fatalf("%+v", res)
	}
	want := []string{"relay=ws://127.0.0.1:1/relay", "messages", "send", "--channel", chanID, "--reply-to", rootID, "--content", "echo: hello there"}
	if got := readArgs(t, argsFile); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("buzz args\n got %q\nwant %q", got, want)
	}
	var text strings.Builder
	others, tools := 0, 0
	for _, u := range run.updates.snapshot() {
		if u.Kind == UpdateAgentMessageChunk && u.SessionID == sid && !u.Replay {
			text.WriteString(u.Text)
		}
		if u.Kind == "tool_call" || u.Kind == "tool_call_update" { // the CLI run, reported as a tool call
			tools++
		} else {
			others++
		}
	}
	if text.String() != "echo: hello there" || others != 3 || tools != 2 {
		t.Fatalf("streamed %q in %d updates and %d tool-call updates, want 3 and 2", text.String(), others, tools)
	}
	recs := run.recorded(t)
	if recs[0].Method != "initialize" || !strings.Contains(string(recs[0].Params), `"clientInfo":{"name":"buzz-acp","version":"9.9.9"}`) {
		t.Fatalf("initialize recorded as %+v", recs[0])
	}
	if recs[1].Method != "session/new" || !strings.Contains(string(recs[1].Params), `"mcpServers":[]`) {
		t.Fatalf("session/new recorded as %s", recs[1].Params)
	}
	if !strings.Contains(run.stderr.String(), fmt.Sprintf("testagent: started pid %d\n", run.Pid())) {
		t.Fatalf("agent stderr not captured: %q", run.stderr.String())
	}
}

func TestSpawnedAgentRepliesToLastEventWithoutInstruction(t *testing.T) {
	bin, argsFile := fakeBuzz(t)
	run := spawnTestAgent(t, map[string]string{"PATH": bin + ":" + os.Getenv("PATH"), "TESTAGENT_REPLY": "done ({content})"}, ClientConfig{})
	sid := run.start(t)
	if _, err := run.Prompt(testCtx(t), sid, buzzPrompt("ping", ""), PromptOptions{}); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(readArgs(t, argsFile)[1:], "|")
	if want := "messages|send|--channel|" + chanID + "|--reply-to|" + eventID + "|--content|done (ping)"; got != want {
		t.Fatalf("got %s\nwant %s", got, want)
	}
}

func TestSpawnedAgentLineOver10MiBIsAccepted(t *testing.T) {
	const size = 11 << 20
	var mu sync.Mutex
	longest := 0
	run := spawnTestAgent(t, map[string]string{"TESTAGENT_NO_CLI": "1", "TESTAGENT_BIG_CHUNK": strconv.Itoa(size)}, ClientConfig{
		OnUpdate: func(u SessionUpdate) {
			mu.Lock()
			longest = max(longest, len(u.Text))
			mu.Unlock()
		},
	})
	sid := run.start(t)
	if _, err := run.Prompt(testCtx(t), sid, buzzPrompt("x", ""), PromptOptions{}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if longest != size {
		t.Fatalf("longest chunk %d bytes, want %d", longest, size)
	}
}

func TestKillTakesDownTheWholeProcessGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	run := spawnTestAgent(t, map[string]string{"TESTAGENT_SPAWN_CHILD": pidFile}, ClientConfig{})
	run.start(t) // the pid file is written before the agent reads its first line
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	child, _ := strconv.Atoi(string(b))
	if !testbin.Running(child) {
		t.Fatalf("child %d not running before the kill", child)
	}
	if err := run.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-run.Exited():
	default:
		t.Fatal("Kill returned before the agent was reaped")
	}
	ctx := testCtx(t)
	for testbin.Running(child) {
		select {
		case <-ctx.Done():
			t.Fatalf("child %d survived the group kill", child)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func TestCloseEndsAgentPolitelyOnStdinEOF(t *testing.T) {
	run := spawnTestAgent(t, map[string]string{}, ClientConfig{})
	run.start(t)
	start := time.Now()
	if err := run.Close(); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el >= closeEOFWait {
		t.Fatalf("Close took %s: the agent needed a signal", el)
	}
	if err := run.ExitErr(); err != nil {
		t.Fatalf("agent exit status: %v", err)
	}
}

func TestCrashMidTurnReportsAgentExitedAndRespawnCarriesOn(t *testing.T) {
	state := t.TempDir()
	env := func() map[string]string {
		return map[string]string{"TESTAGENT_NO_CLI": "1", "TESTAGENT_CRASH_ON": "1", "TESTAGENT_STATE_DIR": state}
	}
	run := spawnTestAgent(t, env(), ClientConfig{})
	sid := run.start(t)
	_, err := run.Prompt(testCtx(t), sid, buzzPrompt("boom", ""), PromptOptions{})
	if !errors.Is(err, ErrAgentExited) {
		t.Fatalf("got %v, want ErrAgentExited", err)
	}
	<-run.Exited()
	var ee *exec.ExitError
	if !errors.As(run.ExitErr(), &ee) || ee.ExitCode() != 3 {
		t.Fatalf("exit %v, want status 3", run.ExitErr())
	}
	again := spawnTestAgent(t, env(), ClientConfig{})
	if _, err := again.Initialize(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := again.LoadSessionState(testCtx(t), SessionParams{Cwd: "/", SessionID: sid}); err != nil {
		t.Fatal(err)
	}
	res, err := again.Prompt(testCtx(t), sid, buzzPrompt("retry", ""), PromptOptions{})
	if err != nil || res.StopReason != "end_turn" {
		t.Fatalf("respawned agent: %+v %v", res, err)
	}
}

func TestSessionLoadAfterRestartReplaysHistoryAndRemembersCodeword(t *testing.T) {
	bin, argsFile := fakeBuzz(t)
	state := t.TempDir()
	env := func() map[string]string {
		return map[string]string{"PATH": bin + ":" + os.Getenv("PATH"), "TESTAGENT_STATE_DIR": state}
	}
	first := spawnTestAgent(t, env(), ClientConfig{})
	sid := first.start(t)
	if _, err := first.Prompt(testCtx(t), sid, buzzPrompt("remember codeword=PAPAYA", ""), PromptOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}

	second := spawnTestAgent(t, env(), ClientConfig{})
	init, err := second.Initialize(testCtx(t))
	if err != nil || !init.LoadSession {
		t.Fatalf("%+v %v", init, err)
	}
	if _, err := second.LoadSessionState(testCtx(t), SessionParams{Cwd: "/", SessionID: sid}); err != nil {
		t.Fatal(err)
	}
	replayed := second.updates.snapshot()
	if len(replayed) != 2 || !replayed[0].Replay || !replayed[1].Replay ||
		replayed[0].Kind != UpdateUserMessageChunk || !strings.Contains(replayed[0].Text, "Content: remember codeword=PAPAYA") ||
		replayed[1].Kind != UpdateAgentMessageChunk || replayed[1].Text != "echo: remember codeword=PAPAYA" {
		t.Fatalf("replay %+v", replayed)
	}
	if _, err := second.Prompt(testCtx(t), sid, buzzPrompt("what is the codeword?", ""), PromptOptions{}); err != nil {
		t.Fatal(err)
	}
	if args := readArgs(t, argsFile); args[len(args)-1] != "codeword: PAPAYA" {
		t.Fatalf("reply %q", args[len(args)-1])
	}
	for _, u := range second.updates.snapshot()[2:] {
		if u.Replay {
			t.Fatalf("live update marked replay: %+v", u)
		}
	}
}

func TestLoadOfUnknownSessionIsResourceNotFound(t *testing.T) {
	run := spawnTestAgent(t, map[string]string{}, ClientConfig{})
	run.start(t)
	_, err := run.LoadSessionState(testCtx(t), SessionParams{Cwd: "/", SessionID: "sess_nope"})
	var re *RPCError
	if !errors.As(err, &re) || re.Code != CodeResourceNotFound {
		t.Fatalf("got %v", err)
	}
}

func TestSpawnedAgentPermissionFollowsPolicyByKind(t *testing.T) {
	for _, tc := range []struct {
		policy     PermissionPolicy
		wantOption string
		wantCLI    bool
	}{{PermissionAllow, "opt-c42", true}, {PermissionDeny, "opt-3f9", false}} {
		t.Run(string(tc.policy), func(t *testing.T) {
			bin, argsFile := fakeBuzz(t)
			run := spawnTestAgent(t, map[string]string{"PATH": bin + ":" + os.Getenv("PATH"), "TESTAGENT_PERMISSION": "1"}, ClientConfig{Permissions: tc.policy})
			sid := run.start(t)
			if _, err := run.Prompt(testCtx(t), sid, buzzPrompt("hi", ""), PromptOptions{}); err != nil {
				t.Fatal(err)
			}
			var answer string
			for _, r := range run.recorded(t) {
				if r.Type == "response" && r.Method == "session/request_permission" {
					answer = string(r.Result)
				}
			}
			if want := `{"outcome":{"outcome":"selected","optionId":"` + tc.wantOption + `"}}`; answer != want {
				t.Fatalf("answer %s, want %s", answer, want)
			}
			if _, err := os.Stat(argsFile); (err == nil) != tc.wantCLI {
				t.Fatalf("CLI run = %v, want %v", err == nil, tc.wantCLI)
			}
		})
	}
}

func TestSpawnedAgentGetsMethodNotFoundForUnknownRequest(t *testing.T) {
	run := spawnTestAgent(t, map[string]string{"TESTAGENT_NO_CLI": "1", "TESTAGENT_UNKNOWN_REQUEST": "1"}, ClientConfig{})
	sid := run.start(t)
	if _, err := run.Prompt(testCtx(t), sid, buzzPrompt("hi", ""), PromptOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, r := range run.recorded(t) {
		if r.Type == "response" && r.Method == "_testagent/probe" {
			if r.Error == nil || r.Error.Code != CodeMethodNotFound {
				t.Fatalf("probe answered %+v", r)
			}
			return
		}
	}
	t.Fatal("probe answer not recorded")
}

func TestCancellingHangingAgentEndsTurnCancelled(t *testing.T) {
	run := spawnTestAgent(t, map[string]string{"TESTAGENT_NO_CLI": "1", "TESTAGENT_HANG_ON": "1"}, ClientConfig{})
	sid := run.start(t)
	ctx, cancel := context.WithCancel(testCtx(t))
	go func() {
		run.stderr.waitFor(t, "hanging on prompt 1")
		cancel()
	}()
	res, err := run.Prompt(ctx, sid, buzzPrompt("hi", ""), PromptOptions{})
	if err != nil || res.StopReason != "cancelled" {
		t.Fatalf("%+v %v", res, err)
	}
	recs := run.recorded(t)
	if last := recs[len(recs)-1]; last.Method != "session/cancel" || string(last.Params) != `{"sessionId":"`+sid+`"}` {
		t.Fatalf("last recorded %+v", last)
	}
}

func TestGarbageLinesFromAgentAreSkipped(t *testing.T) {
	lines := &lineLog{}
	run := spawnTestAgent(t, map[string]string{"TESTAGENT_NO_CLI": "1", "TESTAGENT_GARBAGE": "1", "TESTAGENT_STOP_REASON": "END_TURN"}, ClientConfig{OnLine: lines.add})
	sid := run.start(t)
	res, err := run.Prompt(testCtx(t), sid, buzzPrompt("hi", ""), PromptOptions{})
	if err != nil || res.StopReason != "end_turn" {
		t.Fatalf("%+v %v", res, err)
	}
	if n := run.Conn().BadLines(); n != 4 { // "not json" and "[1,2,3]", at start and in the turn
		t.Fatalf("bad lines %d, want 4", n)
	}
	found := false
	for _, l := range lines.snapshot() {
		found = found || (l.Dir == DirRecv && string(l.Data) == "this is not json")
	}
	if !found {
		t.Fatal("garbage line missing from the raw record")
	}
}

func TestImpersonatedAgentAdvertisesWhatItWasTold(t *testing.T) {
	run := spawnTestAgent(t, map[string]string{
		"TESTAGENT_NAME": "@agentclientprotocol/claude-agent-acp", "TESTAGENT_VERSION": "0.101.0",
		"TESTAGENT_LOAD_SESSION": "0", "TESTAGENT_CAPS": "resume,systemPrompt=override",
	}, ClientConfig{})
	r, err := run.Initialize(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if r.AgentName != "@agentclientprotocol/claude-agent-acp" || r.AgentVersion != "0.101.0" || r.LoadSession ||
		!r.HasSessionCapability("resume") || string(r.SessionCapabilities["systemPrompt"]) != `{"mode":{"override":{}}}` {
		t.Fatalf("%+v", r)
	}
}

func TestGooseSystemPromptMethodOnlyWhenEnabled(t *testing.T) {
	for _, enabled := range []bool{false, true} {
		env := map[string]string{"TESTAGENT_NAME": "goose"}
		if enabled {
			env["TESTAGENT_GOOSE_SYSTEM_PROMPT"] = "1"
		}
		run := spawnTestAgent(t, env, ClientConfig{})
		sid := run.start(t)
		err := run.Call(testCtx(t), "_goose/unstable/session/system-prompt/set", map[string]any{"sessionId": sid, "mode": "append", "text": "be kind"}, nil)
		var re *RPCError
		if enabled && err != nil || !enabled && (!errors.As(err, &re) || re.Code != CodeMethodNotFound) {
			t.Fatalf("enabled=%v: %v", enabled, err)
		}
	}
}

func TestKillWhileCallPendingReturnsAgentExited(t *testing.T) {
	run := spawnTestAgent(t, map[string]string{"TESTAGENT_NO_INIT": "1"}, ClientConfig{})
	errc := make(chan error, 1)
	go func() { _, err := run.Initialize(testCtx(t)); errc <- err }()
	ctx := testCtx(t)
	for len(run.recordedOrNil()) == 0 { // wait until the agent has the request
		select {
		case <-ctx.Done():
			t.Fatal("initialize never reached the agent")
		case <-time.After(5 * time.Millisecond):
		}
	}
	if err := run.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, ErrAgentExited) {
		t.Fatalf("got %v", err)
	}
}

func (r *agentRun) recordedOrNil() []byte {
	b, _ := os.ReadFile(r.record)
	return b
}

func TestSpawnReportsMissingCommand(t *testing.T) {
	_, err := Spawn(context.Background(), SpawnConfig{Command: filepath.Join(t.TempDir(), "no-such-agent")})
	if err == nil || !strings.Contains(err.Error(), "no-such-agent") {
		t.Fatalf("got %v", err)
	}
}

func TestCloseEscalatesToTermThenKillForAgentsIgnoringEOF(t *testing.T) {
	defer func(e, w time.Duration) { closeEOFWait, closeTermWait = e, w }(closeEOFWait, closeTermWait)
	closeEOFWait, closeTermWait = 50*time.Millisecond, 50*time.Millisecond
	for _, tc := range []struct {
		script string
		signal string
	}{
		{"exec sleep 30", "terminated"},                   // ignores EOF, dies on SIGTERM
		{"trap '' TERM; sleep 30 & wait; wait", "killed"}, // ignores both
	} {
		p, err := Spawn(context.Background(), SpawnConfig{Command: "sh", Args: []string{"-c", tc.script}})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		var ee *exec.ExitError
		if !errors.As(p.ExitErr(), &ee) || !strings.Contains(ee.Error(), tc.signal) {
			t.Fatalf("%s: exit %v, want signal %s", tc.script, p.ExitErr(), tc.signal)
		}
	}
}
