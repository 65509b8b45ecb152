package acp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Errors a Prompt (or any call) can end with; the harness respawns the agent on all four.
var (
	ErrIdleTimeout   = errors.New("acp: prompt idle timeout")
	ErrHardTimeout   = errors.New("acp: prompt hard timeout")
	ErrCancelTimeout = errors.New("acp: agent did not answer the prompt after session/cancel")
	ErrAgentExited   = errors.New("acp: agent exited")
)

// Defaults.
const (
	DefaultRequestTimeout = 60 * time.Second
	DefaultCancelGrace    = 5 * time.Second
)

// PermissionPolicy decides how session/request_permission is auto-answered (always by option
// kind, never by id or label).
type PermissionPolicy string

const (
	PermissionAllow PermissionPolicy = "allow" // first allow_once, else allow_always (the default)
	PermissionDeny  PermissionPolicy = "deny"  // first reject_once, else reject_always
)

// ClientConfig configures a Client. The zero value is usable.
type ClientConfig struct {
	OnLine         func(Line)          // raw wire tap (both directions, may be called concurrently); received lines before parsing
	OnUpdate       func(SessionUpdate) // session/update notifications, in order, one goroutine; must not call back into the Client
	Permissions    PermissionPolicy    // "" = PermissionAllow
	RequestTimeout time.Duration       // non-prompt requests; 0 = DefaultRequestTimeout
	ClientVersion  string              // clientInfo.version

	// PermissionFunc, if set, replaces Permissions: it returns the optionId to select. Its ctx is
	// cancelled when the turn is cancelled, and the request is then answered "cancelled".
	PermissionFunc func(ctx context.Context, req PermissionRequest) (optionID string, err error)
}

// Client is the harness side of an ACP connection.
type Client struct {
	cfg  ClientConfig
	conn *Conn

	mu         sync.Mutex
	loading    map[string]int   // sessionId → outstanding session/load calls
	loadIDs    map[int64]string // request id of an outstanding load → sessionId
	perms      map[*pendingPerm]struct{}
	cancelling map[string]int // sessions with a cancel in progress
}

type pendingPerm struct {
	sessionID string
	cancelled atomic.Bool
	cancel    context.CancelFunc
	written   chan struct{} // closed once our answer is on the wire
}

// NewClient runs the client over any stream pair (an agent's stdout and stdin).
func NewClient(r io.Reader, w io.Writer, cfg ClientConfig) *Client {
	if cfg.Permissions == "" {
		cfg.Permissions = PermissionAllow
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	c := &Client{
		cfg:        cfg,
		loading:    map[string]int{},
		loadIDs:    map[int64]string{},
		perms:      map[*pendingPerm]struct{}{},
		cancelling: map[string]int{},
	}
	c.conn = NewConn(r, w, (*clientHandler)(c), cfg.OnLine)
	return c
}

// Conn exposes the underlying connection.
func (c *Client) Conn() *Conn { return c.conn }

// Done is closed when the agent's output ended.
func (c *Client) Done() <-chan struct{} { return c.conn.Done() }

// Close closes the connection (not the process; see Process.Close).
func (c *Client) Close() error { return c.conn.Close() }

func (c *Client) wrap(err error) error {
	if err != nil && errors.Is(err, ErrConnClosed) && !errors.Is(err, ErrAgentExited) {
		return fmt.Errorf("%w: %w", ErrAgentExited, err)
	}
	return err
}

// Call sends any request (e.g. _goose/unstable/session/system-prompt/set) with the request
// timeout applied.
func (c *Client) Call(ctx context.Context, method string, params, result any) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	return c.wrap(c.conn.Call(ctx, method, params, result))
}

// Notify sends a notification.
func (c *Client) Notify(method string, params any) error {
	return c.wrap(c.conn.Notify(method, params))
}

// InitializeResult is what the harness keeps from the agent's initialize answer.
type InitializeResult struct {
	ProtocolVersion     int
	AgentName           string
	AgentVersion        string
	LoadSession         bool
	SessionCapabilities map[string]json.RawMessage
	PromptCapabilities  map[string]json.RawMessage
	AuthMethods         []json.RawMessage
	AgentCapabilities   json.RawMessage            // verbatim
	Meta                map[string]json.RawMessage // result._meta (e.g. steering.supported)
	Raw                 json.RawMessage
}

// HasSessionCapability reports whether sessionCapabilities[name] is present and not null.
func (r *InitializeResult) HasSessionCapability(name string) bool {
	return present(r.SessionCapabilities[name])
}

// PromptCapability reports whether promptCapabilities[name] is true (image, audio,
// embeddedContext): the content the agent accepts in a prompt besides text.
func (r *InitializeResult) PromptCapability(name string) bool {
	return boolean(r.PromptCapabilities[name])
}

// McpCapability reports whether agentCapabilities.mcpCapabilities[name] is true: "http" or
// "sse", the MCP transports the agent takes besides stdio.
func (r *InitializeResult) McpCapability(name string) bool {
	return boolean(object(object(r.AgentCapabilities)["mcpCapabilities"])[name])
}

// clientCapabilities is deliberately conservative: we implement neither fs nor terminal.
var clientCapabilities = json.RawMessage(`{"fs":{"readTextFile":false,"writeTextFile":false},"terminal":false}`)

// Initialize performs the handshake (protocolVersion 1).
func (c *Client) Initialize(ctx context.Context) (*InitializeResult, error) {
	version := c.cfg.ClientVersion
	if version == "" {
		version = "dev"
	}
	var raw json.RawMessage
	err := c.Call(ctx, "initialize", InitializeParams{
		ProtocolVersion:    ProtocolVersion,
		ClientCapabilities: clientCapabilities,
		ClientInfo:         &Implementation{Name: "buzz-acp", Version: version},
	}, &raw)
	if err != nil {
		return nil, err
	}
	return parseInitializeResult(raw)
}

func parseInitializeResult(raw json.RawMessage) (*InitializeResult, error) {
	top := object(raw)
	if top == nil {
		return nil, fmt.Errorf("acp: initialize result is not an object: %.200s", raw)
	}
	r := &InitializeResult{Raw: raw, ProtocolVersion: integer(top["protocolVersion"]), Meta: object(top["_meta"])}
	info := object(top["agentInfo"])
	if info == nil {
		info = object(top["serverInfo"]) // older agents
	}
	r.AgentName, r.AgentVersion = str(info["name"]), str(info["version"])
	caps := object(top["agentCapabilities"])
	r.AgentCapabilities = top["agentCapabilities"]
	r.LoadSession = boolean(caps["loadSession"])
	r.SessionCapabilities = object(caps["sessionCapabilities"])
	r.PromptCapabilities = object(caps["promptCapabilities"])
	// Lenient: anything but an array (or odd entries) is kept as-is or ignored, never fatal.
	_ = json.Unmarshal(top["authMethods"], &r.AuthMethods)
	return r, nil
}

// SessionParams are the inputs of session/new, session/load and session/resume.
type SessionParams struct {
	Cwd          string
	SystemPrompt *SystemPrompt
	Meta         map[string]any // sent as _meta; omitted when empty
	SessionID    string         // load/resume only
	McpServers   []McpServer    // sent as mcpServers; [] when none, never null
}

func (p SessionParams) wire(needID bool) (SessionSetupParams, error) {
	if needID && p.SessionID == "" {
		return SessionSetupParams{}, errors.New("acp: session id is required")
	}
	cwd := p.Cwd
	if cwd == "" {
		cwd = "."
	}
	cwd, err := filepath.Abs(cwd)
	if err != nil {
		return SessionSetupParams{}, fmt.Errorf("acp: cwd: %w", err)
	}
	w := SessionSetupParams{Cwd: cwd, McpServers: make([]json.RawMessage, 0, len(p.McpServers)), SystemPrompt: p.SystemPrompt}
	for _, m := range p.McpServers {
		b, err := json.Marshal(m)
		if err != nil {
			return SessionSetupParams{}, fmt.Errorf("acp: mcp server %q: %w", m.Name, err)
		}
		w.McpServers = append(w.McpServers, b)
	}
	if needID {
		w.SessionID = p.SessionID
	}
	if len(p.Meta) > 0 {
		w.Meta = p.Meta
	}
	return w, nil
}

// LoadSessionState reattaches a session (session/load) and returns its reported settings.
// Updates the agent replays before answering are delivered with Replay set, and all of them
// have been delivered when it returns.
func (c *Client) LoadSessionState(ctx context.Context, p SessionParams) (*SessionState, error) {
	w, err := p.wire(true)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	// The id is reserved first so the reader can close the replay window on exactly this answer.
	id := c.conn.reserveID()
	c.mu.Lock()
	c.loadIDs[id] = p.SessionID
	c.loading[p.SessionID]++
	c.mu.Unlock()
	defer c.responseRead(id) // no-op if the answer already closed the window
	var raw json.RawMessage
	if err := c.wrap(c.conn.call(ctx, id, "session/load", w, &raw)); err != nil {
		return nil, err
	}
	return ParseSessionState(raw), nil
}

// ResumeSessionState reattaches a session without replay (session/resume) and returns its
// reported settings.
func (c *Client) ResumeSessionState(ctx context.Context, p SessionParams) (*SessionState, error) {
	w, err := p.wire(true)
	if err != nil {
		return nil, err
	}
	var raw json.RawMessage
	if err := c.Call(ctx, "session/resume", w, &raw); err != nil {
		return nil, err
	}
	return ParseSessionState(raw), nil
}

// PromptOptions bound a prompt turn. Zero durations disable the idle/hard limits; CancelGrace
// defaults to DefaultCancelGrace.
type PromptOptions struct {
	IdleTimeout time.Duration // reset by any line from the agent
	HardTimeout time.Duration // whole turn
	CancelGrace time.Duration // how long to wait for the answer after session/cancel
}

// PromptResult is the end of a turn.
type PromptResult struct {
	StopReason string // lowercased
	Usage      json.RawMessage
}

type promptOutcome struct {
	res PromptResponse
	err error
}

// Prompt runs one turn. If ctx is cancelled, or the idle/hard limit expires, it cancels with
// cleanup (pending permission requests answered "cancelled", then session/cancel) and waits up
// to CancelGrace for the agent's answer. ctx cancellation returns the agent's answer (normally
// stopReason "cancelled") or ErrCancelTimeout; expiry returns ErrIdleTimeout/ErrHardTimeout.
func (c *Client) Prompt(ctx context.Context, sessionID string, blocks []ContentBlock, opt PromptOptions) (*PromptResult, error) {
	if blocks == nil {
		blocks = []ContentBlock{}
	}
	if opt.CancelGrace <= 0 {
		opt.CancelGrace = DefaultCancelGrace
	}
	// The call itself is not bound to ctx: cancelling a turn is a protocol exchange, not a
	// dropped request. A turn given up on stops waiting for it, and returns once it has.
	callCtx, stop := context.WithCancel(context.Background())
	var call sync.WaitGroup
	defer call.Wait()
	defer stop()
	start := time.Now()
	done := make(chan promptOutcome, 1)
	call.Go(func() {
		var out promptOutcome
		out.err = c.conn.Call(callCtx, "session/prompt", PromptParams{SessionID: sessionID, Prompt: blocks}, &out.res)
		done <- out
	})

	var idleC, hardC <-chan time.Time
	var idle *time.Timer
	if opt.IdleTimeout > 0 {
		idle = time.NewTimer(opt.IdleTimeout)
		defer idle.Stop()
		idleC = idle.C
	}
	if opt.HardTimeout > 0 {
		hard := time.NewTimer(opt.HardTimeout)
		defer hard.Stop()
		hardC = hard.C
	}
	for {
		select {
		case out := <-done:
			return c.finishPrompt(out)
		case <-ctx.Done():
			return c.cancelAndDrain(sessionID, done, opt.CancelGrace)
		case <-hardC:
			return c.expire(sessionID, done, opt, ErrHardTimeout, opt.HardTimeout)
		case <-idleC:
			// The timer is only a wake-up: the real idle clock is the last agent line.
			last := c.conn.LastActivity()
			if last.Before(start) {
				last = start
			}
			if rem := time.Until(last.Add(opt.IdleTimeout)); rem > 0 {
				idle.Reset(rem)
				continue
			}
			return c.expire(sessionID, done, opt, ErrIdleTimeout, opt.IdleTimeout)
		}
	}
}

func (c *Client) expire(sessionID string, done chan promptOutcome, opt PromptOptions, kind error, limit time.Duration) (*PromptResult, error) {
	if _, err := c.cancelAndDrain(sessionID, done, opt.CancelGrace); err != nil {
		return nil, fmt.Errorf("%w (%s); cancel: %v", kind, limit, err)
	}
	return nil, fmt.Errorf("%w (%s)", kind, limit)
}

func (c *Client) finishPrompt(out promptOutcome) (*PromptResult, error) {
	if out.err != nil {
		return nil, c.wrap(out.err)
	}
	if out.res.StopReason == "" {
		return nil, errors.New("acp: session/prompt result has no stopReason")
	}
	r := &PromptResult{StopReason: strings.ToLower(out.res.StopReason)}
	if present(out.res.Usage) {
		r.Usage = out.res.Usage
	}
	return r, nil
}

// cancelAndDrain is cancel-with-cleanup: answer this session's pending permission requests with
// "cancelled" (and any that arrive meanwhile), then send session/cancel, then wait for the answer.
func (c *Client) cancelAndDrain(sessionID string, done chan promptOutcome, grace time.Duration) (*PromptResult, error) {
	c.mu.Lock()
	c.cancelling[sessionID]++
	var waiting []*pendingPerm
	for p := range c.perms {
		if p.sessionID == sessionID {
			p.cancelled.Store(true)
			p.cancel()
			waiting = append(waiting, p)
		}
	}
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		if c.cancelling[sessionID]--; c.cancelling[sessionID] <= 0 {
			delete(c.cancelling, sessionID)
		}
		c.mu.Unlock()
	}()
	t := time.NewTimer(grace)
	defer t.Stop()
	for _, p := range waiting {
		select {
		case <-p.written:
		case <-c.conn.Done():
		case <-t.C:
			return nil, ErrCancelTimeout
		}
	}
	if err := c.Notify("session/cancel", SessionIDParams{SessionID: sessionID}); err != nil {
		return nil, err
	}
	select {
	case out := <-done:
		return c.finishPrompt(out)
	case <-t.C:
		return nil, fmt.Errorf("%w within %s", ErrCancelTimeout, grace)
	}
}

// clientHandler is the Client seen as the connection's Handler (kept off Client's method set).
type clientHandler Client

func (h *clientHandler) HandleRequest(ctx context.Context, method string, params json.RawMessage) (any, error) {
	c := (*Client)(h)
	switch method {
	case "session/request_permission":
		return c.answerPermission(ctx, params)
	default:
		// fs/* and terminal/* are not advertised; everything else is unknown.
		return nil, MethodNotFound(method)
	}
}

func (h *clientHandler) HandleNotification(method string, params json.RawMessage) {
	h.handleTaggedNotification(method, params, nil)
}

func (h *clientHandler) tagNotification(method string, params json.RawMessage) any {
	if method != "session/update" {
		return nil
	}
	sid := str(object(params)["sessionId"])
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.loading[sid] > 0
}

func (h *clientHandler) handleTaggedNotification(method string, params json.RawMessage, tag any) {
	if method != "session/update" || h.cfg.OnUpdate == nil {
		return // unknown notifications (e.g. _auth/status_update) are ignored
	}
	u := ParseSessionUpdate(params)
	u.Replay, _ = tag.(bool)
	h.cfg.OnUpdate(u)
}

func (h *clientHandler) responseRead(id int64) { (*Client)(h).responseRead(id) }

func (c *Client) responseRead(id int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sid, ok := c.loadIDs[id]
	if !ok {
		return
	}
	delete(c.loadIDs, id)
	if c.loading[sid]--; c.loading[sid] <= 0 {
		delete(c.loading, sid)
	}
}

var cancelledOutcome = PermissionResponse{Outcome: PermissionOutcome{Outcome: "cancelled"}}

func (c *Client) answerPermission(ctx context.Context, params json.RawMessage) (any, error) {
	var req PermissionRequest
	if err := json.Unmarshal(params, &req); err != nil {
		return nil, NewRPCError(CodeInvalidParams, "bad session/request_permission params: "+err.Error(), nil)
	}
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p := &pendingPerm{sessionID: req.SessionID, cancel: cancel, written: make(chan struct{})}
	onAnswerWritten(ctx, func() { close(p.written) })
	c.mu.Lock()
	if c.cancelling[req.SessionID] > 0 {
		c.mu.Unlock()
		return cancelledOutcome, nil
	}
	c.perms[p] = struct{}{}
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.perms, p)
		c.mu.Unlock()
	}()

	var optionID string
	var err error
	if c.cfg.PermissionFunc != nil {
		optionID, err = c.cfg.PermissionFunc(pctx, req)
	} else {
		optionID = pickOption(req.Options, c.cfg.Permissions)
	}
	if p.cancelled.Load() || err != nil || optionID == "" {
		return cancelledOutcome, nil
	}
	return PermissionResponse{Outcome: PermissionOutcome{Outcome: "selected", OptionID: optionID}}, nil
}

// pickOption chooses by kind in preference order; "" when nothing fits (answered "cancelled").
func pickOption(opts []PermissionOption, policy PermissionPolicy) string {
	prefs := []string{KindAllowOnce, KindAllowAlways, KindRejectOnce, KindRejectAlways}
	if policy == PermissionDeny {
		prefs = []string{KindRejectOnce, KindRejectAlways}
	}
	for _, kind := range prefs {
		for _, o := range opts {
			if o.Kind == kind && o.OptionID != "" {
				return o.OptionID
			}
		}
	}
	return ""
}
