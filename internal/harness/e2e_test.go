package harness_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/relay/relaytest"
	"github.com/buzz-harness/buzz/internal/testbin"
	"github.com/buzz-harness/buzz/internal/testwait"
)

// stack is a real relay, real keys, one channel with the agent as member, and (once started) the
// real buzz-acp binary driving the scripted test agent, which replies with the real buzz CLI.
type stack struct {
	t        testing.TB
	relay    *relaytest.Server
	bin      string
	ownerSK  string
	ownerPK  string
	agentSK  string
	agentPK  string
	channel  string
	stateDir string
	record   string
	agentDir string
	xdgState string // XDG_STATE_HOME: holds the agent leases, one per test
	harness  *exec.Cmd
	logs     *testbin.Output
	exited   chan error
}

func newStack(t testing.TB) *stack {
	t.Helper()
	s := &stack{t: t, relay: relaytest.Start(t)}
	s.bin = testbin.Dir(t, "cmd/buzz", "cmd/buzz-acp", "cmd/buzz-agent", "internal/testagent")
	s.ownerSK, s.ownerPK = newKey(t)
	s.agentSK, s.agentPK = newKey(t)
	s.channel = s.relay.CreateChannel(t, s.ownerSK, "general", false)
	s.relay.AddMember(t, s.ownerSK, s.channel, s.agentPK, "bot")
	dir := t.TempDir()
	s.stateDir = filepath.Join(dir, "state")
	s.record = filepath.Join(dir, "record.jsonl")
	s.agentDir = filepath.Join(dir, "agent-state")
	s.xdgState = filepath.Join(dir, "xdg-state")
	return s
}

func newKey(t testing.TB) (sk, pk string) {
	sk = nostr.GeneratePrivateKey()
	pk, err := protocol.PublicKey(sk)
	if err != nil {
		t.Fatal(err)
	}
	return sk, pk
}

// start runs buzz-acp with the test agent and waits until it is ready; env entries override the
// defaults.
func (s *stack) start(args []string, env ...string) {
	s.t.Helper()
	s.run(s.command(args, env...))
}

// run starts cmd as the stack's harness (buzz-acp, or a stand-in that prints the same ready line)
// and waits until it is ready.
func (s *stack) run(cmd *exec.Cmd, logs *testbin.Output) {
	s.t.Helper()
	s.logs = logs
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.harness = cmd
	s.exited = make(chan error, 1)
	go func() { s.exited <- cmd.Wait() }()
	s.t.Cleanup(func() { s.kill() })
	// Generous: discovery of a thousand channels, on two cores shared with the rest of the
	// suite, took over 20 s.
	s.waitLog("buzz-acp ready", 60*time.Second)
}

// activityLine is one line of buzz-acp's activity log (--activity-log), its data left raw.
type activityLine struct {
	Time time.Time       `json:"time"`
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
}

// readActivity reads an activity log, skipping lines that do not parse.
func readActivity(path string) ([]activityLine, error) { return readJSONLines[activityLine](path) }

// waitActivity waits until the activity log holds n events of type typ and returns its lines.
func (s *stack) waitActivity(path, typ string, n int) []activityLine {
	s.t.Helper()
	var lines []activityLine
	testwait.Eventually(s.t, 30*time.Second, func() bool {
		lines, _ = readActivity(path)
		got := 0
		for _, l := range lines {
			if l.Type == typ {
				got++
			}
		}
		return got >= n
	}, fmt.Sprintf("%d %s events in the activity log", n, typ))
	return lines
}

// readJSONLines reads a JSON-lines file (the activity log, the test agent's record), skipping
// lines that do not parse as T.
func readJSONLines[T any](path string) ([]T, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var v T
		if json.Unmarshal(sc.Bytes(), &v) == nil {
			out = append(out, v)
		}
	}
	return out, sc.Err()
}

// command is the buzz-acp command start runs, not yet started, with its output buffer.
func (s *stack) command(args []string, env ...string) (*exec.Cmd, *testbin.Output) {
	cmd := exec.Command(filepath.Join(s.bin, "buzz-acp"), append([]string{
		"--agent-command", filepath.Join(s.bin, "testagent"),
		"--relay-url", s.relay.URL,
		"--agent-owner", s.ownerPK,
		"--state-dir", s.stateDir,
		"--agent-cwd", s.t.TempDir(),
		"--log-level", "debug",
	}, args...)...)
	cmd.Env = append(os.Environ(),
		"BUZZ_PRIVATE_KEY="+s.agentSK,
		"TESTAGENT_RECORD="+s.record,
		"TESTAGENT_STATE_DIR="+s.agentDir,
		"XDG_STATE_HOME="+s.xdgState,
	)
	cmd.Env = append(cmd.Env, env...)
	logs := &testbin.Output{}
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd, logs
}

// kill SIGKILLs buzz-acp and its agents and returns once none of them runs.
func (s *stack) kill() {
	if s.harness == nil {
		return
	}
	defer func() { // deferred: it runs even when KillWithAgents fails the test
		if s.t.Failed() {
			s.t.Logf("buzz-acp output:\n%s", s.logs.String())
		}
	}()
	testbin.KillWithAgents(s.t, s.harness.Process.Pid)
	<-s.exited
	s.harness = nil
}

// waitLog waits until buzz-acp's output contains substr, failing at once if buzz-acp exits.
// On failure the stack's cleanup logs the output.
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

// mention posts a kind-9 message in the channel that p-tags the agent.
func (s *stack) mention(sk, content string, tags ...nostr.Tag) nostr.Event {
	s.t.Helper()
	return s.mentionAt(sk, content, nostr.Now(), tags...)
}

// mentionAt is mention signed with created_at at.
func (s *stack) mentionAt(sk, content string, at nostr.Timestamp, tags ...nostr.Tag) nostr.Event {
	s.t.Helper()
	ev := nostr.Event{Kind: 9, Content: content, CreatedAt: at,
		Tags: append(nostr.Tags{{"h", s.channel}, {"p", s.agentPK}}, tags...)}
	if err := ev.Sign(sk); err != nil {
		s.t.Fatal(err)
	}
	s.relay.Publish(s.t, sk, ev)
	return ev
}

// waitEvent polls the relay until a query returns something, or fails after timeout.
func (s *stack) waitEvent(timeout time.Duration, f nostr.Filter) nostr.Event {
	s.t.Helper()
	var ev nostr.Event
	testwait.Eventually(s.t, timeout, func() bool {
		evs := s.relay.Query(s.t, s.ownerSK, f)
		if len(evs) > 0 {
			ev = evs[0]
		}
		return len(evs) > 0
	}, fmt.Sprintf("an event matching %v", f))
	return ev
}

// waitReply waits for the agent's kind-9 reply referencing event id.
func (s *stack) waitReply(id string) nostr.Event {
	s.t.Helper()
	return s.waitEvent(30*time.Second, nostr.Filter{Kinds: []int{9}, Authors: []string{s.agentPK}, Tags: nostr.TagMap{"e": {id}}})
}

// waitNewReply waits for an agent reply in root's thread that is none of known. The agent answers
// a reply in a thread by replying to the thread's root, so waitReply(followUp.ID) cannot see it.
func (s *stack) waitNewReply(root string, known ...nostr.Event) nostr.Event {
	s.t.Helper()
	var reply nostr.Event
	testwait.Eventually(s.t, 30*time.Second, func() (ok bool) {
		reply, ok = s.newReply(root, known...)
		return ok
	}, "a new agent reply in thread "+root)
	return reply
}

// newReply is an agent reply in root's thread that is none of known, if there is one yet.
func (s *stack) newReply(root string, known ...nostr.Event) (nostr.Event, bool) {
	s.t.Helper()
	for _, ev := range s.relay.Query(s.t, s.ownerSK, nostr.Filter{Kinds: []int{9}, Authors: []string{s.agentPK}, Tags: nostr.TagMap{"e": {root}}}) {
		if !slices.ContainsFunc(known, func(k nostr.Event) bool { return k.ID == ev.ID }) {
			return ev, true
		}
	}
	return nostr.Event{}, false
}

// waitOutcome waits for the agent's 40099 row answering the owner command event id.
func (s *stack) waitOutcome(id string) map[string]any {
	s.t.Helper()
	ev := s.waitEvent(20*time.Second, nostr.Filter{Kinds: []int{protocol.KindSystemMessage}, Authors: []string{s.agentPK}, Tags: nostr.TagMap{"e": {id}}})
	var out map[string]any
	if err := json.Unmarshal([]byte(ev.Content), &out); err != nil {
		s.t.Fatalf("outcome row content %q: %v", ev.Content, err)
	}
	return out
}

// recorded returns what the test agent received, as {method, params} records.
func (s *stack) recorded() []record {
	s.t.Helper()
	out, err := readJSONLines[record](s.record)
	if err != nil && !os.IsNotExist(err) {
		s.t.Fatal(err)
	}
	return out
}

type record struct {
	Type   string          `json:"type"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// prompts returns the text of every session/prompt the agent received.
func (s *stack) prompts() []string {
	var out []string
	for _, r := range s.recorded() {
		if r.Method != "session/prompt" {
			continue
		}
		var p struct {
			Prompt []struct{ Text string } `json:"prompt"`
		}
		_ = json.Unmarshal(r.Params, &p)
		var b strings.Builder
		for _, blk := range p.Prompt {
			b.WriteString(blk.Text + "\n")
		}
		out = append(out, b.String())
	}
	return out
}

// waitPrompted waits until some prompt the agent received shows event id.
func (s *stack) waitPrompted(id string) {
	s.t.Helper()
	testwait.Eventually(s.t, 20*time.Second, func() bool {
		return strings.Contains(strings.Join(s.prompts(), "\n"), "Event ID: "+id)
	}, "a prompt showing event "+id)
}

// waitRecorded waits until the agent has received n messages of method.
func (s *stack) waitRecorded(method string, n int) {
	s.t.Helper()
	s.waitRecordedWithin(method, n, 20*time.Second)
}

func (s *stack) waitRecordedWithin(method string, n int, timeout time.Duration) {
	s.t.Helper()
	testwait.Eventually(s.t, timeout, func() bool { return len(s.methods(method)) >= n },
		fmt.Sprintf("the agent to receive %d × %s", n, method))
}

func (s *stack) methods(name string) []record {
	var out []record
	for _, r := range s.recorded() {
		if r.Method == name {
			out = append(out, r)
		}
	}
	return out
}

func TestMentionGetsThreadedReply(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start(nil)
	m := s.mention(s.ownerSK, "hello agent")
	reply := s.waitReply(m.ID)
	if !strings.Contains(reply.Content, "hello agent") {
		t.Fatalf("reply %q does not answer the mention", reply.Content)
	}
	ref := protocol.ParseThread(reply.Tags)
	if ref.Parent != m.ID || ref.Root != m.ID {
		t.Fatalf("reply is not threaded under the mention: %+v", ref)
	}
	if ch, _ := protocol.ChannelID(reply.Tags); ch != s.channel {
		t.Fatalf("reply in channel %q, want %q", ch, s.channel)
	}
}

// runBuzzACP runs a second buzz-acp with the stack's key and state dir and returns its output
// once it exits (it is expected to refuse to start).
func runBuzzACP(t *testing.T, s *stack) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(s.bin, "buzz-acp"),
		"--agent-command", filepath.Join(s.bin, "testagent"),
		"--relay-url", s.relay.URL, "--state-dir", s.stateDir)
	// Its own lease dir, so the state-dir lock is what stops it (the agent lease has its own test).
	cmd.Env = append(os.Environ(), "BUZZ_PRIVATE_KEY="+s.agentSK, "XDG_STATE_HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("second buzz-acp exited 0; output:\n%s", out)
	}
	return string(out)
}
