package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/acp"
	"github.com/buzz-harness/buzz/internal/relay/relaytest"
	"github.com/buzz-harness/buzz/internal/testbin"
)

// binDir holds buzz-agent and buzz, built once in TestMain.
var binDir string

func TestMain(m *testing.M) {
	dir, err := testbin.Build("cmd/buzz-agent", "cmd/buzz")
	if err != nil {
		fmt.Fprintln(os.Stderr, "building buzz-agent and buzz:", err)
		os.Exit(1)
	}
	binDir = dir
	os.Exit(testbin.Run(m))
}

// baseEnv is the test process env minus anything that would pick a provider
// or an identity, with binDir first on PATH.
func baseEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "OPENAI_") || strings.HasPrefix(k, "ANTHROPIC_") || strings.HasPrefix(k, "BUZZ_") || k == "PATH" {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "PATH="+binDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	return append(env, extra...)
}

// client is the test's ACP client: it records session/updates and answers
// permission requests with answer.
type client struct {
	t    *testing.T
	conn *acp.Conn

	mu       sync.Mutex
	updates  []acp.SessionUpdate
	perms    []acp.PermissionRequest
	answer   func(acp.PermissionRequest) acp.PermissionResponse
	updateCh chan acp.SessionUpdate
}

func newClient(t *testing.T) *client {
	return &client{t: t, updateCh: make(chan acp.SessionUpdate, 1024), answer: pick(acp.KindAllowOnce)}
}

// pick answers a permission request with the first option of kind.
func pick(kind string) func(acp.PermissionRequest) acp.PermissionResponse {
	return func(r acp.PermissionRequest) acp.PermissionResponse {
		for _, o := range r.Options {
			if o.Kind == kind {
				return acp.PermissionResponse{Outcome: acp.PermissionOutcome{Outcome: "selected", OptionID: o.OptionID}}
			}
		}
		return acp.PermissionResponse{Outcome: acp.PermissionOutcome{Outcome: "cancelled"}}
	}
}

func (c *client) HandleRequest(ctx context.Context, method string, params json.RawMessage) (any, error) {
	if method != "session/request_permission" {
		return nil, acp.MethodNotFound(method)
	}
	var r acp.PermissionRequest
	if err := json.Unmarshal(params, &r); err != nil {
		return nil, acp.NewRPCError(acp.CodeInvalidParams, err.Error(), nil)
	}
	c.mu.Lock()
	c.perms = append(c.perms, r)
	answer := c.answer
	c.mu.Unlock()
	return answer(r), nil
}

func (c *client) HandleNotification(method string, params json.RawMessage) {
	if method != "session/update" {
		return
	}
	u := acp.ParseSessionUpdate(params)
	c.mu.Lock()
	c.updates = append(c.updates, u)
	c.mu.Unlock()
	select {
	case c.updateCh <- u:
	default:
	}
}

func (c *client) setAnswer(f func(acp.PermissionRequest) acp.PermissionResponse) {
	c.mu.Lock()
	c.answer = f
	c.mu.Unlock()
}

func (c *client) permissions() []acp.PermissionRequest {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]acp.PermissionRequest(nil), c.perms...)
}

// sessionUpdates returns the updates seen for sid, optionally only kind.
func (c *client) sessionUpdates(sid, kind string) []acp.SessionUpdate {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []acp.SessionUpdate
	for _, u := range c.updates {
		if u.SessionID == sid && (kind == "" || u.Kind == kind) {
			out = append(out, u)
		}
	}
	return out
}

// agentText joins the agent_message_chunks of sid.
func (c *client) agentText(sid string) string {
	var b strings.Builder
	for _, u := range c.sessionUpdates(sid, acp.UpdateAgentMessageChunk) {
		b.WriteString(u.Text)
	}
	return b.String()
}

func (c *client) call(method string, params, result any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return c.conn.Call(ctx, method, params, result)
}

func (c *client) mustCall(method string, params, result any) {
	c.t.Helper()
	if err := c.call(method, params, result); err != nil {
		c.t.Fatalf("%s: %v", method, err)
	}
}

func (c *client) initialize() map[string]any {
	c.t.Helper()
	var res map[string]any
	c.mustCall("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}, "clientInfo": map[string]any{"name": "test", "version": "0"}}, &res)
	return res
}

// newSession creates a session in cwd (a temp dir) with systemPrompt (nil = none).
func (c *client) newSession(systemPrompt any) string {
	c.t.Helper()
	params := map[string]any{"cwd": c.t.TempDir(), "mcpServers": []any{}}
	if systemPrompt != nil {
		params["systemPrompt"] = systemPrompt
	}
	var res struct {
		SessionID string `json:"sessionId"`
	}
	c.mustCall("session/new", params, &res)
	if res.SessionID == "" {
		c.t.Fatal("session/new returned no sessionId")
	}
	return res.SessionID
}

type promptResult struct {
	StopReason string `json:"stopReason"`
	Usage      struct {
		InputTokens  int64 `json:"inputTokens"`
		OutputTokens int64 `json:"outputTokens"`
		TotalTokens  int64 `json:"totalTokens"`
	} `json:"usage"`
}

func textBlocks(blocks ...string) []acp.ContentBlock {
	out := make([]acp.ContentBlock, len(blocks))
	for i, b := range blocks {
		out[i] = acp.TextBlock(b)
	}
	return out
}

func (c *client) prompt(sid string, blocks ...string) promptResult {
	c.t.Helper()
	var res promptResult
	c.mustCall("session/prompt", acp.PromptParams{SessionID: sid, Prompt: textBlocks(blocks...)}, &res)
	return res
}

// specPrompt is the spec systemPrompt object with one text block.
func specPrompt(text string) map[string]any {
	return map[string]any{"mode": "append", "content": []any{acp.TextBlock(text)}}
}

// startInProcess serves an Agent over in-memory pipes.
func startInProcess(t *testing.T, cfg Config) *client {
	t.Helper()
	if cfg.StateDir == "" {
		cfg.StateDir = t.TempDir()
	}
	if cfg.Env == nil {
		cfg.Env = baseEnv()
	}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c2aR, c2aW := io.Pipe()
	a2cR, a2cW := io.Pipe()
	served := make(chan error, 1)
	go func() {
		served <- a.Serve(context.Background(), c2aR, a2cW)
		a2cW.Close()
	}()
	c := newClient(t)
	c.conn = acp.NewConn(a2cR, c2aW, c, nil)
	t.Cleanup(func() {
		c2aW.Close()
		select {
		case err := <-served:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Error("Serve did not return after stdin closed")
		}
	})
	return c
}

// agentProc is a running buzz-agent binary.
type agentProc struct {
	*client
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *testbin.Output
	exited chan struct{}
}

// startBinary runs the real buzz-agent with env and args over pipes.
func startBinary(t *testing.T, env []string, args ...string) *agentProc {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "buzz-agent"), args...)
	cmd.Env = env
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &agentProc{client: newClient(t), cmd: cmd, stdin: stdin, stderr: &testbin.Output{}, exited: make(chan struct{})}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.conn = acp.NewConn(stdout, stdin, p.client, nil)
	go func() {
		<-p.conn.Done()
		_ = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() { p.stop(t) })
	return p
}

// stop closes stdin (the polite shutdown) and waits for the exit.
func (p *agentProc) stop(t *testing.T) {
	_ = p.stdin.Close()
	select {
	case <-p.exited:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
		t.Errorf("buzz-agent did not exit after stdin closed; stderr:\n%s", p.stderr.String())
	}
}

// relayFixture is a real relay with a channel the agent may post in.
type relayFixture struct {
	srv     *relaytest.Server
	ownerSK string
	agentSK string
	agentPK string
	channel string
	env     []string // BUZZ_RELAY_URL, BUZZ_PRIVATE_KEY for the agent
}

func startRelay(t *testing.T) *relayFixture {
	t.Helper()
	f := &relayFixture{srv: relaytest.Start(t), ownerSK: nostr.GeneratePrivateKey(), agentSK: nostr.GeneratePrivateKey()}
	f.agentPK, _ = nostr.GetPublicKey(f.agentSK)
	f.channel = f.srv.CreateChannel(t, f.ownerSK, "general", false)
	f.srv.AddMember(t, f.ownerSK, f.channel, f.agentPK, "member")
	f.env = []string{"BUZZ_RELAY_URL=" + f.srv.URL, "BUZZ_PRIVATE_KEY=" + f.agentSK}
	return f
}

// post publishes a kind-9 message from the owner and returns its id.
func (f *relayFixture) post(t *testing.T, content string) string {
	t.Helper()
	ev := nostr.Event{Kind: 9, Content: content, Tags: nostr.Tags{{"h", f.channel}}}
	f.srv.Publish(t, f.ownerSK, ev)
	got := f.srv.Query(t, f.ownerSK, nostr.Filter{Kinds: []int{9}, Authors: []string{mustPK(f.ownerSK)}, Tags: nostr.TagMap{"h": {f.channel}}, Limit: 1})
	if len(got) == 0 {
		t.Fatal("posted message not found")
	}
	return got[0].ID
}

// agentMessages returns the kind-9 events the agent authored in the channel.
func (f *relayFixture) agentMessages(t *testing.T) []nostr.Event {
	t.Helper()
	return f.srv.Query(t, f.ownerSK, nostr.Filter{Kinds: []int{9}, Authors: []string{f.agentPK}, Tags: nostr.TagMap{"h": {f.channel}}})
}

func mustPK(sk string) string {
	pk, err := nostr.GetPublicKey(sk)
	if err != nil {
		panic(err)
	}
	return pk
}

// harnessPrompt renders blocks the way buzz-acp does (spec §6): a
// [Context] block (with a reply instruction when anchor is set) and one
// event block.
func harnessPrompt(channel, anchor, eventID, content string) []string {
	ctx := "[Context]\nScope: channel\nChannel: general (#" + channel + ")\n" +
		"Hint: Use `buzz messages get --channel " + channel + "` for recent messages if needed."
	if anchor != "" {
		ctx = "[Context]\nScope: thread\nChannel: general (#" + channel + ")\nThread root: " + anchor +
			"\nUse `buzz messages thread --channel " + channel + " --event " + anchor + "` to fetch thread context." +
			"\nIMPORTANT: for ordinary replies in this turn use `--reply-to " + anchor + "` on `buzz messages send`."
	}
	ev := "[Buzz event: mention]\nEvent ID: " + eventID + "\nChannel: general (#" + channel + ")\nKind: 9\n" +
		"From: npub1xyz (hex: " + strings.Repeat("a", 64) + ")\nTime: 2026-11-30T10:00:00Z\nContent: " + content +
		"\nTags: [[\"h\",\"" + channel + "\"]]"
	return []string{ctx, ev}
}
