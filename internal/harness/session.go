package harness

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/buzz-harness/buzz/internal/acp"
	"github.com/buzz-harness/buzz/internal/clock"
	"github.com/buzz-harness/buzz/internal/observer"
	"github.com/buzz-harness/buzz/internal/prompt"
	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/sessionstore"
)

const gooseSystemPromptMethod = "_goose/unstable/session/system-prompt/set"

// convSession is one ACP session of a conversation, with what has been delivered to it.
type convSession struct {
	ID           string
	Route        Route
	StandingSent bool
	Delivered    map[string]bool
	Turns        int
	Resumed      bool
	lastUsed     time.Time // when its last turn ended: the LRU and idle-TTL bounds read it
	// opening is the standing context fetched when the session was opened, kept for its first
	// briefing on the user-message route so the relay is not asked twice.
	opening *prompt.Standing
	usage   sessionUsage // turn-metric bookkeeping (metrics.go)
	// state is what the agent reported about the session's settings when it was opened (config
	// options, modes, models): --model, --permission-mode and the owner's !model / !mode resolve
	// against it.
	state *acp.SessionState
}

// errResumeLost: resuming the remembered session failed indeterminately (timeout, agent exit).
// The loop respawns the agent and tries once more before falling back to a new session.
var errResumeLost = errors.New("session resume lost")

// errResumeRefused: the agent definitely refused the remembered session; a new one is opened in
// the same turn.
var errResumeRefused = errors.New("session resume refused")

// sessionFeed is where session opening reports what it did.
type sessionFeed interface {
	emitSession(in turnInput, sess *convSession, p observer.Payload)
	emitSystemPrompt(in turnInput, sess *convSession, standing prompt.Standing, blocks []string)
}

// sessionOpener opens a conversation's ACP session on an agent: it resumes the remembered one
// when the agent can (session/resume, else session/load) and otherwise creates one (then runs
// goose's system-prompt probe and --initial-message). It runs on turn goroutines.
type sessionOpener struct {
	cfg     *Config
	store   *sessionstore.Store
	relay   *relayClient
	feed    sessionFeed
	replays *replayWatch
	log     *slog.Logger
	clock   clock.Clock
	metrics *opsMetrics
	mcpHTTP []acp.McpServer // the MCP servers over HTTP (mcpbridge.go); nil until Run starts the bridge
}

// sessionSpec is what decides a session's parameters.
type sessionSpec struct {
	channel *channel // nil: a heartbeat session, which has no channel identity
	conv    convKey  // the conversation the session serves
	route   Route
	system  string // standing context text, for the routes that carry it in the parameters
	fresh   bool   // the owner rotated: _meta.freshSession
	mcpHTTP bool   // the agent takes HTTP MCP servers: the bridged entries, not the stdio ones
}

// params builds the parameters of session/new, session/load and session/resume — the one place
// that decides what a session is opened with: cwd, the spec system prompt, and _meta (title,
// channel identity, buzz.conversationId, freshSession, claude-agent-acp's system prompt) and MCP
// servers (the same list for every session, built by Config.Validate). Model, mode and effort are
// not parameters in ACP: applyOnOpen sets them once the session exists.
func (o *sessionOpener) params(spec sessionSpec) acp.SessionParams {
	p := acp.SessionParams{Cwd: o.cfg.AgentCwd, Meta: map[string]any{}, McpServers: o.cfg.mcp}
	if spec.mcpHTTP && o.mcpHTTP != nil {
		p.McpServers = o.mcpHTTP
	}
	if ch := spec.channel; ch != nil {
		if t := o.sessionTitle(*ch); t != "" {
			p.Meta["sessionTitle"] = t
		}
		p.Meta["channelId"] = ch.ID
		if ch.Type != protocol.ChannelUnknown && ch.Type != "" {
			p.Meta["channelType"] = string(ch.Type)
		}
		k := spec.conv
		if k.Channel == "" {
			k = protocol.ChannelConversation(ch.ID)
		}
		p.Meta["buzz"] = map[string]any{"conversationId": k.ID()}
	}
	if spec.fresh {
		p.Meta["freshSession"] = true
	}
	if spec.system == "" {
		return p
	}
	switch spec.route {
	case RouteSpecSystemPrompt:
		p.SystemPrompt = &acp.SystemPrompt{Mode: "append", Content: []acp.ContentBlock{{Type: "text", Text: spec.system}}}
	case RouteClaudeMeta:
		p.Meta["systemPrompt"] = map[string]any{"append": spec.system}
	}
	return p
}

// sessionTitle is "<agent> · #<channel>" (bare agent name for DMs and unnamed channels), ≤80 chars.
func (o *sessionOpener) sessionTitle(ch channel) string {
	name := strings.TrimSpace(o.cfg.SessionTitle)
	if name == "" {
		name = "buzz-acp"
	}
	t := name
	if ch.Type != protocol.ChannelDM && ch.Name != "" && ch.Name != "unknown" {
		t = name + " · #" + ch.Name
	}
	if r := []rune(t); len(r) > 80 {
		t = string(r[:80])
	}
	return t
}

// open returns the turn's session and what goose's probe found, if it ran. A definite refusal
// of the remembered session forgets it and opens a new one in the same turn; an indeterminate
// failure returns errResumeLost.
func (o *sessionOpener) open(ctx context.Context, in turnInput) (*convSession, ProbeState, error) {
	route := DecideRoute(in.ident)
	standing := o.relay.standing(ctx, in.channel, true)
	spec := sessionSpec{channel: &in.channel, conv: in.conv, route: route, system: standing.SystemPrompt(o.cfg.AgentCwd), fresh: in.fresh, mcpHTTP: in.ident.MCPHTTP}
	if rec, ok := o.store.Get(in.conv, o.cfg.sessionOrigin()); ok && !in.fresh && !in.noResume && (in.ident.Resume || in.ident.LoadSession) {
		sess, err := o.resume(ctx, in, spec, rec, standing)
		if !errors.Is(err, errResumeRefused) {
			return sess, ProbeUnknown, err
		}
	}
	return o.create(ctx, in, spec, standing)
}

// resume asks the agent for the remembered session. errResumeRefused means open a new one.
//
// Whether the session already holds the standing context (user-message route) survives the
// restart: after session/resume, which replays nothing, the record's mark says so; after
// session/load the replayed history is the evidence, whatever the record says (an agent that
// lost or compacted the history gets the standing context again).
func (o *sessionOpener) resume(ctx context.Context, in turnInput, spec sessionSpec, rec sessionstore.Record, standing prompt.Standing) (*convSession, error) {
	ch, id := in.channel, rec.SessionID
	params := o.params(spec)
	params.SessionID = id
	method := "session/load"
	var err error
	var state *acp.SessionState
	briefed := rec.StandingDelivered
	if in.ident.Resume {
		method = "session/resume"
		state, err = in.proc.ResumeSessionState(ctx, params)
	} else {
		o.replays.begin(id)
		state, err = in.proc.LoadSessionState(ctx, params)
		briefed = o.replays.end(id)
	}
	var rpc *acp.RPCError
	switch {
	case err == nil:
		o.metrics.resumed(resumeOutcome(method))
		o.store.Touch(in.conv, o.clock.Now())
		sess := &convSession{ID: id, Route: spec.route, Delivered: map[string]bool{}, Resumed: true, opening: &standing, state: state}
		if spec.route == RouteUserMessage && briefed {
			sess.StandingSent = true
			o.store.MarkStandingDelivered(in.conv, id) // a record from before the mark existed
			o.log.Info("resumed session already holds the standing context; not sending it again",
				"conversation", in.conv.String(), "session", id, "method", method)
		}
		o.feed.emitSession(in, sess, observer.SessionResumed{SessionID: id, Method: method})
		if err := o.applyOnOpen(ctx, in.proc, in.want, sess); err != nil {
			return nil, err // the agent stopped answering: the loop respawns it
		}
		if spec.route.SystemRole() && spec.route != RouteGoose && spec.system != "" {
			o.feed.emitSystemPrompt(in, sess, standing, nil)
		}
		return sess, nil
	case errors.As(err, &rpc):
		o.log.Info("resume refused; starting a new session", "channel", ch.ID, "conversation", in.conv.String(), "session", id, "err", err)
		o.store.Remove(in.conv)
		o.metrics.resumed(ResumeFellBack)
		o.feed.emitSession(in, nil, observer.SessionResumeFailed{SessionID: id, Reason: err.Error()})
		return nil, errResumeRefused
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case !in.retried:
		o.feed.emitSession(in, nil, observer.SessionResumeFailed{SessionID: id, Reason: err.Error(), Retry: true})
		return nil, fmt.Errorf("%w: %w", errResumeLost, err)
	default:
		o.log.Warn("resume failed twice; starting a new session", "channel", ch.ID, "conversation", in.conv.String(), "err", err)
		o.store.Remove(in.conv)
		o.metrics.resumed(ResumeFellBack)
		o.feed.emitSession(in, nil, observer.SessionResumeFailed{SessionID: id, Reason: err.Error()})
		return nil, err // the agent is gone; the loop respawns and the retry opens a new session
	}
}

// create opens a new session, remembers it, and briefs it by its route.
func (o *sessionOpener) create(ctx context.Context, in turnInput, spec sessionSpec, standing prompt.Standing) (*convSession, ProbeState, error) {
	id, state, err := in.proc.NewSessionState(ctx, o.params(spec))
	if err != nil {
		return nil, ProbeUnknown, err
	}
	sess := &convSession{ID: id, Route: spec.route, Delivered: map[string]bool{}, opening: &standing, state: state}
	if err := o.applyOnOpen(ctx, in.proc, in.want, sess); err != nil {
		return nil, ProbeUnknown, err // the agent stopped answering: the loop respawns it
	}
	probe := ProbeUnknown
	if spec.route == RouteGoose && spec.system != "" {
		if probe, err = probeGoose(ctx, in.proc, id, spec.system); err != nil {
			return nil, probe, err // an agent error: keep the agent
		}
		if probe == ProbeUnsupported {
			sess.Route = RouteUserMessage
		}
	}
	now := o.clock.Now()
	if err := o.store.Put(in.conv, sessionstore.Record{
		SessionID: id, RelayURL: o.cfg.primaryRelay(), AgentCommand: o.cfg.commandLine(), CreatedAt: now, LastUsedAt: now,
	}); err != nil {
		o.log.Warn("session store", "err", err)
	}
	o.awaitStored(ctx, in.conv)
	o.feed.emitSession(in, sess, observer.SessionResolved{SessionID: id, IsNewSession: true})
	if sess.Route.SystemRole() && spec.system != "" {
		o.feed.emitSystemPrompt(in, sess, standing, nil)
	}
	if o.cfg.InitialMessage != "" {
		if err := o.initialMessage(ctx, in, sess, standing); err != nil {
			return nil, probe, err
		}
	}
	return sess, probe, nil
}

// storeWait bounds how long a new session's first prompt waits for its record to reach the disk.
const storeWait = time.Second

// awaitStored lets the store's writer put a new session's record on disk before the session's
// first prompt, so a crash during that turn still finds the session to load (the write takes
// milliseconds). It waits on this turn's goroutine, never the loop's, and at most storeWait: a
// disk that does not answer delays the first prompt by that much, not forever.
func (o *sessionOpener) awaitStored(ctx context.Context, conv protocol.Conversation) {
	ctx, cancel := context.WithTimeout(ctx, storeWait)
	defer cancel()
	if err := o.store.Flush(ctx); err != nil && ctx.Err() == nil {
		o.log.Warn("session store", "err", err)
	} else if err != nil {
		o.log.Debug("session record not yet on disk; prompting anyway", "conversation", conv.String())
	}
}

// probeGoose hands goose the system prompt through its custom method. Method-not-found means
// this goose lacks it; any other error fails the session.
func probeGoose(ctx context.Context, proc *acp.Process, sessionID, text string) (ProbeState, error) {
	err := proc.Call(ctx, gooseSystemPromptMethod, map[string]any{
		"sessionId": sessionID, "mode": "append", "key": "buzz", "text": text}, nil)
	var rpc *acp.RPCError
	switch {
	case err == nil:
		return ProbeSupported, nil
	case errors.As(err, &rpc) && rpc.Code == acp.CodeMethodNotFound:
		return ProbeUnsupported, nil
	default:
		return ProbeUnknown, fmt.Errorf("goose system prompt: %w", err)
	}
}

// initialMessage sends --initial-message as its own first prompt of a new session, with the
// standing sections in front for user-message agents (which then count as briefed).
func (o *sessionOpener) initialMessage(ctx context.Context, in turnInput, sess *convSession, standing prompt.Standing) error {
	body := o.cfg.InitialMessage
	if !sess.Route.SystemRole() {
		body = prompt.PrependStanding(standing, body)
	}
	blocks := []acp.ContentBlock{{Type: "text", Text: body}}
	if !sess.Route.SystemRole() {
		o.feed.emitSystemPrompt(in, sess, standing, nil)
	}
	_, err := in.proc.Prompt(ctx, sess.ID, blocks, o.cfg.promptOptions())
	if err == nil && !sess.Route.SystemRole() {
		sess.StandingSent = true
		o.store.MarkStandingDelivered(in.conv, sess.ID)
	}
	return err
}

// replayWatch reads the history agents replay on session/load (updates marked Replay, all
// delivered before the load returns) for one fact: does a replayed user message open with a
// standing section, i.e. was the session briefed before the restart.
type replayWatch struct {
	mu      sync.Mutex
	loading map[string]*replayScan // by session id, while its session/load runs
}

// replayScan is one loading session's scan; replayWatch's mutex guards it.
type replayScan struct {
	head    strings.Builder // the start of the user message being replayed
	inUser  bool
	briefed bool
}

// replayHead bounds what is kept of each replayed user message: only its first line matters.
const replayHead = 256

func (w *replayWatch) begin(sessionID string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.loading == nil {
		w.loading = map[string]*replayScan{}
	}
	w.loading[sessionID] = &replayScan{}
}

// end stops watching the session and reports whether its replay showed the standing context.
func (w *replayWatch) end(sessionID string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	sc := w.loading[sessionID]
	delete(w.loading, sessionID)
	if sc == nil {
		return false
	}
	sc.endMessage()
	return sc.briefed
}

func (w *replayWatch) observe(u acp.SessionUpdate) {
	if !u.Replay {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	sc := w.loading[u.SessionID]
	if sc == nil {
		return
	}
	if u.Kind != acp.UpdateUserMessageChunk {
		sc.endMessage()
		return
	}
	if !sc.inUser {
		sc.head.Reset()
		sc.inUser = true
	}
	if room := replayHead - sc.head.Len(); room > 0 {
		sc.head.WriteString(u.Text[:min(room, len(u.Text))])
	}
}

// endMessage judges the user message replayed so far (its chunks may split a header).
func (sc *replayScan) endMessage() {
	if sc.inUser && len(prompt.ParseStandingSections(sc.head.String())) > 0 {
		sc.briefed = true
	}
	sc.inUser = false
}

// commandLine is the agent command as remembered with its sessions.
func (c *Config) commandLine() string {
	return strings.Join(append([]string{c.AgentCommand}, c.AgentArgs...), " ")
}

// sessionOrigin is what a remembered session must match to be resumed: the same relay and agent.
func (c *Config) sessionOrigin() sessionstore.Origin {
	return sessionstore.Origin{RelayURL: c.primaryRelay(), AgentCommand: c.commandLine()}
}

// promptOptions are the timeouts of every session/prompt.
func (c *Config) promptOptions() acp.PromptOptions {
	return acp.PromptOptions{IdleTimeout: c.IdleTimeout, HardTimeout: c.MaxTurnDuration, CancelGrace: c.CancelGrace}
}
