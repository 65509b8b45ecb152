// Package agent is buzz-agent: an ACP agent (JSON-RPC over stdio) that
// answers prompts with an LLM provider and three tools (shell, read_file,
// write_file), or — with no model configured — in a deterministic echo mode
// that replies through the real `buzz` CLI. Sessions persist as one JSON
// file each under the state directory, so they survive restarts of the
// agent and of the harness.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/buzz-harness/buzz/internal/acp"
	"github.com/buzz-harness/buzz/internal/agent/provider"
)

// Name is the agentInfo.name buzz-agent reports.
const Name = "buzz-agent"

// Config configures an Agent. Zero values get sensible defaults.
type Config struct {
	// Provider answers prompts; nil selects echo mode.
	Provider provider.Provider
	// StateDir holds sessions/<id>.json. Required.
	StateDir string
	Version  string
	// Log receives diagnostics (stderr in the binary).
	Log io.Writer
	// Env is the environment of tool processes and the buzz CLI; nil means
	// os.Environ().
	Env []string
	// BuzzCommand is the buzz CLI echo mode runs; default "buzz" on PATH.
	BuzzCommand string
	// ShellTimeout bounds one shell tool call (default 120 s).
	ShellTimeout time.Duration
	// MaxOutput caps the bytes of tool output kept (default 16 KiB).
	MaxOutput int
	// MaxToolRounds bounds model↔tool iterations per prompt (default 20).
	MaxToolRounds int
	// Now is the clock for session timestamps (default time.Now).
	Now func() time.Time
}

// Agent serves ACP on one connection. Create it with New.
type Agent struct {
	cfg   Config
	store *store

	connReady chan struct{}
	conn      *acp.Conn

	mu       sync.Mutex
	sessions map[string]*session
	closing  bool           // set once Serve is shutting down; no new turns
	turns    sync.WaitGroup // running prompts
}

// session is a live session; mu guards data, running marks a prompt in
// flight and cancel stops it.
type session struct {
	mu      sync.Mutex
	data    *sessionData
	running bool
	cancel  context.CancelFunc
}

// New returns an Agent; it validates cfg and fills defaults.
func New(cfg Config) (*Agent, error) {
	if cfg.StateDir == "" {
		return nil, errors.New("agent: a state directory is required")
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if cfg.Env == nil {
		cfg.Env = os.Environ()
	}
	if cfg.BuzzCommand == "" {
		cfg.BuzzCommand = "buzz"
	}
	if cfg.ShellTimeout <= 0 {
		cfg.ShellTimeout = 120 * time.Second
	}
	if cfg.MaxOutput <= 0 {
		cfg.MaxOutput = 16 << 10
	}
	if cfg.MaxToolRounds <= 0 {
		cfg.MaxToolRounds = 20
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	return &Agent{
		cfg:       cfg,
		store:     newStore(cfg.StateDir),
		connReady: make(chan struct{}),
		sessions:  map[string]*session{},
	}, nil
}

// Serve speaks ACP on r/w until the input ends or ctx is done, then cancels
// running prompts and waits for them to save their sessions.
func (a *Agent) Serve(ctx context.Context, r io.Reader, w io.Writer) error {
	a.conn = acp.NewConn(r, w, a, nil)
	close(a.connReady)
	select {
	case <-a.conn.Done():
	case <-ctx.Done():
		a.conn.Close()
		<-a.conn.Done()
	}
	a.mu.Lock()
	a.closing = true
	a.mu.Unlock()
	a.cancelAll()
	a.turns.Wait()
	if err := a.conn.Err(); err != nil && !errors.Is(err, io.EOF) && ctx.Err() == nil {
		return fmt.Errorf("acp connection: %w", err)
	}
	return nil
}

func (a *Agent) logf(format string, args ...any) {
	fmt.Fprintf(a.cfg.Log, "buzz-agent: "+format+"\n", args...)
}

func (a *Agent) cancelAll() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, s := range a.sessions {
		s.mu.Lock()
		if s.cancel != nil {
			s.cancel()
		}
		s.mu.Unlock()
	}
}

// HandleRequest implements acp.Handler.
func (a *Agent) HandleRequest(ctx context.Context, method string, params json.RawMessage) (any, error) {
	<-a.connReady
	switch method {
	case "initialize":
		return a.initialize(params)
	case "session/new":
		return a.newSession(params)
	case "session/load":
		return a.loadSession(params, true)
	case "session/resume":
		return a.loadSession(params, false)
	case "session/prompt":
		return a.prompt(ctx, params)
	}
	return nil, acp.MethodNotFound(method)
}

// HandleNotification implements acp.Handler.
func (a *Agent) HandleNotification(method string, params json.RawMessage) {
	if method != "session/cancel" {
		return // unknown notifications are ignored, as the spec asks
	}
	var p acp.SessionIDParams
	if json.Unmarshal(params, &p) != nil {
		return
	}
	a.mu.Lock()
	s := a.sessions[p.SessionID]
	a.mu.Unlock()
	if s == nil {
		return
	}
	s.mu.Lock()
	if s.cancel != nil {
		s.cancel()
	}
	s.mu.Unlock()
}

func invalidParams(format string, args ...any) *acp.RPCError {
	return acp.NewRPCError(acp.CodeInvalidParams, fmt.Sprintf(format, args...), nil)
}

func (a *Agent) initialize(params json.RawMessage) (any, error) {
	var p acp.InitializeParams
	if len(params) > 0 && json.Unmarshal(params, &p) != nil {
		return nil, invalidParams("initialize: params must be an object")
	}
	return map[string]any{
		// We speak v1 whatever the client asked for; v2 is a draft.
		"protocolVersion": acp.ProtocolVersion,
		"agentCapabilities": map[string]any{
			"loadSession": true,
			"promptCapabilities": map[string]any{
				"image": false, "audio": false, "embeddedContext": false,
			},
			"mcpCapabilities": map[string]any{"http": false, "sse": false},
			"sessionCapabilities": map[string]any{
				"systemPrompt": map[string]any{},
				"resume":       map[string]any{},
			},
		},
		"agentInfo":   acp.Implementation{Name: Name, Title: "Buzz Agent", Version: a.cfg.Version},
		"authMethods": []any{},
	}, nil
}

// setupParams is session/new|load|resume; systemPrompt stays raw because it
// may be the spec object or, from older harnesses, a plain string.
type setupParams struct {
	SessionID    string          `json:"sessionId"`
	Cwd          string          `json:"cwd"`
	SystemPrompt json.RawMessage `json:"systemPrompt"`
}

func decodeSetup(method string, params json.RawMessage) (setupParams, error) {
	var p setupParams
	if err := json.Unmarshal(params, &p); err != nil {
		return p, invalidParams("%s: bad params: %v", method, err)
	}
	if p.Cwd != "" && !filepath.IsAbs(p.Cwd) {
		return p, invalidParams("%s: cwd must be an absolute path, got %q", method, p.Cwd)
	}
	return p, nil
}

// parseSystemPrompt accepts the spec object {mode, content:[text blocks]}
// or a plain string. ok is false when the field is absent or null.
func parseSystemPrompt(raw json.RawMessage) (text string, ok bool, err error) {
	raw = json.RawMessage(strings.TrimSpace(string(raw)))
	if len(raw) == 0 || string(raw) == "null" {
		return "", false, nil
	}
	if raw[0] == '"' {
		if err := json.Unmarshal(raw, &text); err != nil {
			return "", false, fmt.Errorf("systemPrompt: %v", err)
		}
		return text, true, nil
	}
	var sp struct {
		Mode    string            `json:"mode"`
		Content []json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(raw, &sp); err != nil {
		return "", false, fmt.Errorf("systemPrompt must be a string or {mode, content}: %v", err)
	}
	switch sp.Mode {
	case "", "append", "override":
		// buzz-agent has no built-in prompt of its own, so both mean "this is the system prompt".
	default:
		return "", false, fmt.Errorf("unsupported systemPrompt mode %q (want append or override)", sp.Mode)
	}
	var parts []string
	for i, c := range sp.Content {
		var b acp.ContentBlock
		if err := json.Unmarshal(c, &b); err != nil || b.Type != "text" {
			return "", false, fmt.Errorf("systemPrompt.content[%d]: only text blocks are supported", i)
		}
		parts = append(parts, b.Text)
	}
	return strings.Join(parts, "\n\n"), true, nil
}

func (a *Agent) newSession(params json.RawMessage) (any, error) {
	p, err := decodeSetup("session/new", params)
	if err != nil {
		return nil, err
	}
	if p.Cwd == "" {
		return nil, invalidParams("session/new: cwd is required")
	}
	sys, _, err := parseSystemPrompt(p.SystemPrompt)
	if err != nil {
		return nil, invalidParams("session/new: %v", err)
	}
	now := a.cfg.Now().UTC()
	d := &sessionData{ID: uuid.NewString(), Cwd: p.Cwd, SystemPrompt: sys, CreatedAt: now, UpdatedAt: now}
	if err := a.store.save(d); err != nil {
		return nil, err
	}
	a.mu.Lock()
	a.sessions[d.ID] = &session{data: d}
	a.mu.Unlock()
	return map[string]any{"sessionId": d.ID}, nil
}

// lookup returns the live session, reading it from disk if this process
// has not seen it yet.
func (a *Agent) lookup(id string) (*session, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if s := a.sessions[id]; s != nil {
		return s, nil
	}
	d, err := a.store.load(id)
	if errors.Is(err, errNoSession) {
		return nil, acp.NewRPCError(acp.CodeResourceNotFound, "Resource not found: session "+id, map[string]string{"sessionId": id})
	}
	if err != nil {
		return nil, err
	}
	s := &session{data: d}
	a.sessions[id] = s
	return s, nil
}

func (a *Agent) loadSession(params json.RawMessage, replay bool) (any, error) {
	method := "session/resume"
	if replay {
		method = "session/load"
	}
	p, err := decodeSetup(method, params)
	if err != nil {
		return nil, err
	}
	if p.SessionID == "" {
		return nil, invalidParams("%s: sessionId is required", method)
	}
	sys, hasSys, err := parseSystemPrompt(p.SystemPrompt)
	if err != nil {
		return nil, invalidParams("%s: %v", method, err)
	}
	s, err := a.lookup(p.SessionID)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.running {
		s.mu.Unlock()
		return nil, acp.NewRPCError(acp.CodeInvalidRequest, method+": a prompt is running in this session", nil)
	}
	changed := false
	if p.Cwd != "" && p.Cwd != s.data.Cwd {
		s.data.Cwd, changed = p.Cwd, true
	}
	// The prompt given at session/new stays unless the client sends one again.
	if hasSys && sys != s.data.SystemPrompt {
		s.data.SystemPrompt, changed = sys, true
	}
	var history []storedMessage
	if replay {
		history = append(history, s.data.Messages...)
	}
	var saveErr error
	if changed {
		s.data.UpdatedAt = a.cfg.Now().UTC()
		saveErr = a.store.save(s.data)
	}
	s.mu.Unlock()
	if saveErr != nil {
		a.logf("%v", saveErr)
	}
	// Replay goes out before the answer, as session/load requires.
	for _, u := range replayUpdates(history) {
		if err := acp.SendUpdate(a.conn, p.SessionID, u); err != nil {
			return nil, err
		}
	}
	return map[string]any{"sessionId": p.SessionID}, nil
}

// replayUpdates turns history into the session/update payloads a client
// would have seen live.
func replayUpdates(history []storedMessage) []map[string]any {
	var out []map[string]any
	for _, m := range history {
		switch m.Role {
		case provider.RoleUser:
			out = append(out, acp.TextChunk(acp.UpdateUserMessageChunk, m.Text))
		case provider.RoleAssistant:
			if m.Text != "" {
				out = append(out, acp.TextChunk(acp.UpdateAgentMessageChunk, m.Text))
			}
			for _, c := range m.ToolCalls {
				title, kind, _, _ := toolMeta(c)
				out = append(out, map[string]any{
					"sessionUpdate": acp.UpdateToolCall, "toolCallId": c.ID, "title": title,
					"kind": kind, "status": "pending", "rawInput": c.Input,
				})
			}
		case provider.RoleTool:
			status := "completed"
			if m.IsError {
				status = "failed"
			}
			out = append(out, map[string]any{
				"sessionUpdate": acp.UpdateToolCallUpdate, "toolCallId": m.ToolCallID, "status": status,
				"content": toolContent(m.Text),
			})
		}
	}
	return out
}

func toolContent(text string) []any {
	return []any{map[string]any{"type": "content", "content": acp.TextBlock(text)}}
}

type promptParams struct {
	SessionID string            `json:"sessionId"`
	Prompt    []json.RawMessage `json:"prompt"`
}

// promptText keeps the text blocks of a prompt, one string per block.
func promptText(blocks []json.RawMessage) []string {
	var out []string
	for _, raw := range blocks {
		var b struct {
			Type string `json:"type"`
			Text string `json:"text"`
			URI  string `json:"uri"`
		}
		if json.Unmarshal(raw, &b) != nil {
			continue
		}
		switch b.Type {
		case "text":
			out = append(out, b.Text)
		case "resource_link":
			out = append(out, "[resource: "+b.URI+"]")
		}
	}
	return out
}

func (a *Agent) prompt(ctx context.Context, params json.RawMessage) (any, error) {
	var p promptParams
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, invalidParams("session/prompt: bad params: %v", err)
	}
	s, err := a.lookup(p.SessionID)
	if err != nil {
		return nil, err
	}
	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// a.mu then s.mu: the same order cancelAll uses.
	a.mu.Lock()
	if a.closing {
		a.mu.Unlock()
		return nil, acp.NewRPCError(acp.CodeInternal, "session/prompt: agent is shutting down", nil)
	}
	s.mu.Lock()
	if s.running {
		s.mu.Unlock()
		a.mu.Unlock()
		return nil, acp.NewRPCError(acp.CodeInvalidRequest, "session/prompt: a prompt is already running in session "+p.SessionID, nil)
	}
	s.running, s.cancel = true, cancel
	a.turns.Add(1)
	s.mu.Unlock()
	a.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.running, s.cancel = false, nil
		s.mu.Unlock()
		a.turns.Done()
	}()

	t := &turn{a: a, s: s, ctx: tctx, id: p.SessionID}
	blocks := promptText(p.Prompt)
	var stop string
	if a.cfg.Provider == nil {
		stop = t.echo(blocks)
	} else {
		stop = t.model(strings.Join(blocks, "\n\n"))
	}
	s.mu.Lock()
	s.data.UpdatedAt = a.cfg.Now().UTC()
	err = a.store.save(s.data)
	s.mu.Unlock()
	if err != nil {
		a.logf("%v", err)
	}
	u := t.usage
	return map[string]any{
		"stopReason": stop,
		"usage": map[string]int64{
			"inputTokens": u.InputTokens, "outputTokens": u.OutputTokens, "totalTokens": u.InputTokens + u.OutputTokens,
		},
	}, nil
}
