// Command testagent is a small scriptable ACP agent (stdio, protocol v1) for end-to-end tests of
// the harness. Build it with `go build -o X ./internal/testagent`. Behaviour is set by env vars:
//
// Identity and capabilities
//
//	TESTAGENT_NAME, TESTAGENT_VERSION  agentInfo (default "buzz-testagent" "0.0.0"); e.g.
//	                                   "@agentclientprotocol/claude-agent-acp" "0.101.0", "goose", "codex-acp"
//	TESTAGENT_LOAD_SESSION=0           advertise loadSession false (default true)
//	TESTAGENT_CAPS=resume,systemPrompt sessionCapabilities to advertise as {}; "systemPrompt=override"
//	                                   advertises {"mode":{"override":{}}}
//	                                   ("close" also answers session/close: the live session is dropped)
//	TESTAGENT_SESSION_STATE=json       a JSON object whose fields (configOptions, modes, models) are added
//	                                   to every session/new, session/load and session/resume result; the
//	                                   set_* methods (session/set_config_option, set_model, set_mode)
//	                                   answer {} (set_config_option: {"configOptions": [...]})
//	TESTAGENT_SET_ERROR=m1,m2          answer these set_* methods with -32603 instead
//	TESTAGENT_AUTH_METHODS=json        initialize's authMethods array (default [])
//	TESTAGENT_IMAGE=1                  advertise promptCapabilities.image (image blocks in prompts)
//	TESTAGENT_MCP_HTTP=1               advertise mcpCapabilities.http (HTTP MCP servers in mcpServers)
//	TESTAGENT_GOOSE_SYSTEM_PROMPT=1    implement _goose/unstable/session/system-prompt/set (else -32601);
//	                                   "error" answers it with -32603
//
// Recording and state
//
//	TESTAGENT_RECORD=path     append every received request/notification, and every answer the
//	                          client gave to our requests, as a JSON line {"type","method","params"|"result"|"error"}
//	TESTAGENT_RECORD_ANSWERS=1  also append {"type":"answered","method":"session/prompt answered"} as
//	                          each session/prompt is answered (the benchmarks wait for it between samples)
//	TESTAGENT_STATE_DIR=dir   sessions (sessions/<id>.json: history and codeword) and the prompt
//	                          counter live here, so session/load works across restarts (default: a temp dir)
//	TESTAGENT_NO_REPLAY=1     session/load reattaches the session but replays none of its history
//
// Turn behaviour (session/prompt)
//
//	The prompt text is searched for "Event ID: <64hex>" lines, the [Context] block's channel uuid, an
//	instruction "--reply-to <id>" and "Content: ..." lines. The agent then runs
//	`buzz messages send --channel <uuid> [--reply-to <instruction id, else last event id>] --content <reply>`
//	(BUZZ_RELAY_URL / BUZZ_PRIVATE_KEY come from the environment), streams the reply as
//	agent_message_chunk and ends the turn. "codeword=X" in a content line is remembered in the
//	session; content containing "codeword?" is answered "codeword: X".
//
//	TESTAGENT_REPLY=tmpl        reply text; {content} {codeword} {session} {count} are substituted, and
//	                            {events}: the prompt's event ids, comma-separated; {images}: the image
//	                            blocks received, "<mimeType>:<sha256 of the decoded data>" comma-separated
//	                            ("none" without any)
//	                            (default "echo: {content}", content = first line of the last event)
//	TESTAGENT_BUZZ=path         buzz CLI to run (default "buzz" on PATH); TESTAGENT_NO_CLI=1 skips it
//	TESTAGENT_STREAM=N          split the reply into N agent_message_chunk updates (default 1)
//	TESTAGENT_BIG_CHUNK=bytes   also send one agent_message_chunk of that many 'x' bytes
//	TESTAGENT_PERMISSION=1      ask session/request_permission first (options listed reject-first with
//	                            opaque ids); a reject skips the reply, "cancelled" ends the turn cancelled
//	TESTAGENT_UNKNOWN_REQUEST=1 send a `_testagent/probe` request to the client each turn (answer recorded)
//	TESTAGENT_STOP_REASON=s     stopReason to answer with (default "end_turn")
//
//	The CLI run is reported as a tool call (tool_call "execute" with the command as title and
//	rawInput, then tool_call_update completed or failed with its output), as real adapters do.
//
// Replies that go wrong (for the harness's reply safety net)
//
//	TESTAGENT_FINAL_TEXT=tmpl   stream this instead of the reply after the CLI run ({reply} is the
//	                            reply; set but empty: no text at all)
//	TESTAGENT_SEND_FAILS=continue  a failed CLI run does not fail the turn: it ends normally
//	TESTAGENT_DROP_KEY=1        run the CLI without BUZZ_PRIVATE_KEY (it exits 3), as a shell that
//	                            strips it would
//	TESTAGENT_SEND_CHANNEL=uuid send to this channel instead of the prompt's (top level)
//	TESTAGENT_DENY_SEND=1       report the send as refused by a permission rule and never run it
//	TESTAGENT_REPLY_LATE=ms     end the turn first (streaming the reply), then send it this long after
//	TESTAGENT_SKIP_FOLLOWED=1   a prompt that only thread follow brought ("Followed: nobody
//	                            mentioned you") is ended with no text and no send
//	TESTAGENT_RELAY_URL=url     the CLI's BUZZ_RELAY_URL (default: the agent's own)
//
//	One run can mix them: "[silent:text]" in the last event's content answers in text only,
//	"[silent:nokey]" sends without the key, "[silent:denied]" has the send denied (and says so in
//	text), "[silent:refused=<channel uuid>]" sends there; none of these fails the turn.
//
// Faults
//
//	TESTAGENT_CRASH_ON=N     os.Exit(3) mid-turn on the Nth prompt (counted across restarts in the state
//	                         dir, so a respawned agent does not crash again)
//	TESTAGENT_HANG_ON=N|all  on that prompt write nothing until session/cancel, then answer "cancelled"
//	                         (N may be a comma-separated list of prompt numbers)
//	TESTAGENT_HANG_AFTER_REPLY=N  on that prompt (a list, like HANG_ON) post the reply, then hang until
//	                         session/cancel and answer "cancelled"
//	TESTAGENT_STEERING=1     advertise initialize _meta.steering.supported and answer _session/steering:
//	                         a hanging turn of that session takes the text in, stops hanging and replies
//	                         (outcome "injected"); with no turn running the outcome is "noActiveTurn"
//	TESTAGENT_GOOSE_STEER=1  announce a run id per turn (session_info_update _meta.goose.activeRunId,
//	                         cleared at its end) and answer _goose/unstable/session/steer like the above,
//	                         refusing a wrong expectedRunId
//	TESTAGENT_IGNORE_CANCEL=1  while hanging, ignore session/cancel too
//	TESTAGENT_NO_INIT=1      never answer initialize
//	TESTAGENT_CRASH_ON_LOAD=1  exit during the first session/load (once per state dir)
//	TESTAGENT_FAIL_LOADED=1  a session reopened by session/load answers every prompt with -32603,
//	                         as gemini-cli 0.61 does once its model refuses the history it reloaded
//	TESTAGENT_GARBAGE=1      print garbage lines (non-JSON, blank, unknown notification) at start and each turn
//	TESTAGENT_SPAWN_CHILD=f  start a `sleep` child in the agent's process group and write its pid to f
//
// Every startup writes "testagent: started pid N" to stderr.
package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/buzz-harness/buzz/internal/acp"
)

type config struct {
	name, version    string
	loadSession      bool
	caps             map[string]any
	gooseSysPrompt   string
	record           string
	recordAnswers    bool // also record when a session/prompt is answered (the benchmarks' pacing)
	stateDir         string
	reply            string
	buzz             string
	stream           int
	bigChunk         int
	permission       bool
	unknownRequest   bool
	stopReason       string
	crashOn          int
	hangOn           string
	ignoreCancel     bool
	noInit           bool
	garbage          bool
	spawnChildPIDOut string
	steering         bool
	gooseSteer       bool
	hangAfterReply   string
	costPerTurn      float64 // > 0: a usage_update with the session's running cost (USD) ends each turn
	noUsage          bool    // the prompt response carries no usage
	sessionState     map[string]json.RawMessage
	setError         map[string]bool
	authMethods      json.RawMessage
	image            bool // promptCapabilities.image
	mcpHTTP          bool // mcpCapabilities.http
	noReplay         bool // session/load replays no history
	replyKnobs
	replyLate    time.Duration
	skipFollowed bool
	cliRelayURL  string
}

func loadConfig() (config, error) {
	c := config{
		name:             envOr("TESTAGENT_NAME", "buzz-testagent"),
		version:          envOr("TESTAGENT_VERSION", "0.0.0"),
		loadSession:      os.Getenv("TESTAGENT_LOAD_SESSION") != "0",
		caps:             map[string]any{},
		gooseSysPrompt:   os.Getenv("TESTAGENT_GOOSE_SYSTEM_PROMPT"),
		record:           os.Getenv("TESTAGENT_RECORD"),
		stateDir:         os.Getenv("TESTAGENT_STATE_DIR"),
		reply:            envOr("TESTAGENT_REPLY", "echo: {content}"),
		buzz:             envOr("TESTAGENT_BUZZ", "buzz"),
		permission:       os.Getenv("TESTAGENT_PERMISSION") == "1",
		unknownRequest:   os.Getenv("TESTAGENT_UNKNOWN_REQUEST") == "1",
		stopReason:       envOr("TESTAGENT_STOP_REASON", "end_turn"),
		hangOn:           os.Getenv("TESTAGENT_HANG_ON"),
		ignoreCancel:     os.Getenv("TESTAGENT_IGNORE_CANCEL") == "1",
		noInit:           os.Getenv("TESTAGENT_NO_INIT") == "1",
		garbage:          os.Getenv("TESTAGENT_GARBAGE") == "1",
		spawnChildPIDOut: os.Getenv("TESTAGENT_SPAWN_CHILD"),
		steering:         os.Getenv("TESTAGENT_STEERING") == "1",
		gooseSteer:       os.Getenv("TESTAGENT_GOOSE_STEER") == "1",
		hangAfterReply:   os.Getenv("TESTAGENT_HANG_AFTER_REPLY"),
		noUsage:          os.Getenv("TESTAGENT_NO_USAGE") == "1",
		image:            os.Getenv("TESTAGENT_IMAGE") == "1",
		mcpHTTP:          os.Getenv("TESTAGENT_MCP_HTTP") == "1",
		noReplay:         os.Getenv("TESTAGENT_NO_REPLAY") == "1",
		recordAnswers:    os.Getenv("TESTAGENT_RECORD_ANSWERS") == "1",
		replyKnobs: replyKnobs{
			noCLI:       os.Getenv("TESTAGENT_NO_CLI") == "1",
			sendFailsOK: os.Getenv("TESTAGENT_SEND_FAILS") == "continue",
			dropKey:     os.Getenv("TESTAGENT_DROP_KEY") == "1",
			sendChannel: os.Getenv("TESTAGENT_SEND_CHANNEL"),
			denySend:    os.Getenv("TESTAGENT_DENY_SEND") == "1",
		},
		skipFollowed: os.Getenv("TESTAGENT_SKIP_FOLLOWED") == "1",
		cliRelayURL:  os.Getenv("TESTAGENT_RELAY_URL"),
	}
	if v, ok := os.LookupEnv("TESTAGENT_FINAL_TEXT"); ok {
		c.finalText = &v
	}
	if v := os.Getenv("TESTAGENT_REPLY_LATE"); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil || ms < 0 {
			return c, fmt.Errorf("TESTAGENT_REPLY_LATE=%q is not a number of milliseconds", v)
		}
		c.replyLate = time.Duration(ms) * time.Millisecond
	}
	if v := os.Getenv("TESTAGENT_COST_PER_TURN"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 {
			return c, fmt.Errorf("TESTAGENT_COST_PER_TURN=%q is not a non-negative number", v)
		}
		c.costPerTurn = f
	}
	if v := os.Getenv("TESTAGENT_SESSION_STATE"); v != "" {
		if err := json.Unmarshal([]byte(v), &c.sessionState); err != nil {
			return c, fmt.Errorf("TESTAGENT_SESSION_STATE: %w", err)
		}
	}
	c.setError = map[string]bool{}
	for _, m := range strings.Split(os.Getenv("TESTAGENT_SET_ERROR"), ",") {
		c.setError[strings.TrimSpace(m)] = true
	}
	c.authMethods = json.RawMessage(envOr("TESTAGENT_AUTH_METHODS", "[]"))
	if !json.Valid(c.authMethods) {
		return c, fmt.Errorf("TESTAGENT_AUTH_METHODS is not JSON")
	}
	for _, name := range strings.Split(os.Getenv("TESTAGENT_CAPS"), ",") {
		switch name = strings.TrimSpace(name); name {
		case "":
		case "systemPrompt=override":
			c.caps["systemPrompt"] = map[string]any{"mode": map[string]any{"override": map[string]any{}}}
		default:
			c.caps[name] = map[string]any{}
		}
	}
	var err error
	for _, n := range []struct {
		env string
		dst *int
		def int
	}{{"TESTAGENT_STREAM", &c.stream, 1}, {"TESTAGENT_BIG_CHUNK", &c.bigChunk, 0}, {"TESTAGENT_CRASH_ON", &c.crashOn, 0}} {
		*n.dst = n.def
		if v := os.Getenv(n.env); v != "" {
			if *n.dst, err = strconv.Atoi(v); err != nil {
				return c, fmt.Errorf("%s=%q is not a number", n.env, v)
			}
		}
	}
	if c.stateDir == "" {
		if c.stateDir, err = os.MkdirTemp("", "testagent-state-"); err != nil {
			return c, err
		}
	}
	return c, os.MkdirAll(filepath.Join(c.stateDir, "sessions"), 0o755)
}

// replyKnobs say how a turn's reply goes wrong (if it does).
type replyKnobs struct {
	noCLI       bool
	finalText   *string // TESTAGENT_FINAL_TEXT; nil: the reply
	sendFailsOK bool
	dropKey     bool
	sendChannel string
	denySend    bool
}

// knobsFor is the reply knobs for a turn whose last event says content: the configured ones, or
// those a "[silent:…]" directive in it names.
func (c config) knobsFor(content string) replyKnobs {
	none, denied := "", "I was not allowed to post my answer."
	switch m := reRefused.FindStringSubmatch(content); {
	case strings.Contains(content, "[silent:text]"):
		return replyKnobs{noCLI: true}
	case strings.Contains(content, "[silent:nokey]"):
		return replyKnobs{dropKey: true, sendFailsOK: true, finalText: &none}
	case strings.Contains(content, "[silent:denied]"):
		return replyKnobs{denySend: true, sendFailsOK: true, finalText: &denied}
	case m != nil:
		return replyKnobs{sendChannel: m[1], sendFailsOK: true, finalText: &none}
	}
	return c.replyKnobs
}

var reRefused = regexp.MustCompile(`\[silent:refused=([0-9a-f-]{36})\]`)

func envOr(k, def string) string {
	if v, ok := os.LookupEnv(k); ok {
		return v
	}
	return def
}

func main() {
	cfg, err := loadConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testagent:", err)
		os.Exit(2)
	}
	fmt.Fprintf(os.Stderr, "testagent: started pid %d\n", os.Getpid())
	if cfg.spawnChildPIDOut != "" {
		child := exec.Command("sleep", "300") // inherits our process group
		if err := child.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "testagent: spawn child:", err)
			os.Exit(2)
		}
		_ = os.WriteFile(cfg.spawnChildPIDOut, []byte(strconv.Itoa(child.Process.Pid)), 0o644)
	}
	a := newAgent(cfg)
	a.out = &lockedWriter{f: os.Stdout}
	if cfg.garbage {
		a.writeGarbage()
	}
	conn := acp.NewConn(os.Stdin, a.out, a, nil)
	a.conn = conn
	close(a.ready)
	conn.Wait()
}

type lockedWriter struct {
	mu sync.Mutex
	f  *os.File
}

func (w *lockedWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.f.Write(b)
}

// session is what is persisted per session id.
type session struct {
	ID       string `json:"id"`
	Cwd      string `json:"cwd"`
	Codeword string `json:"codeword,omitempty"`
	History  []turn `json:"history"`
}

type turn struct {
	User  string `json:"user"`
	Agent string `json:"agent"`
}

type agent struct {
	cfg   config
	conn  *acp.Conn
	out   *lockedWriter
	ready chan struct{}

	mu       sync.Mutex
	sessions map[string]*session
	running  map[string]context.CancelFunc
	steers   map[string]chan string // a running turn's inbox for steered text
	runs     map[string]string      // a running turn's goose run id
	broken   map[string]bool        // TESTAGENT_FAIL_LOADED: sessions whose prompts fail
	recMu    sync.Mutex
}

func newAgent(cfg config) *agent {
	return &agent{cfg: cfg, ready: make(chan struct{}), sessions: map[string]*session{}, running: map[string]context.CancelFunc{}, steers: map[string]chan string{}, runs: map[string]string{}, broken: map[string]bool{}}
}

func (a *agent) writeGarbage() {
	for _, l := range []string{"this is not json", "", "[1,2,3]", `{"jsonrpc":"2.0","method":"_testagent/unknown_notification","params":{}}`} {
		_, _ = a.out.Write([]byte(l + "\n"))
	}
}

func (a *agent) record(v map[string]any) {
	if a.cfg.record == "" {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	a.recMu.Lock()
	defer a.recMu.Unlock()
	f, err := os.OpenFile(a.cfg.record, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testagent: record:", err)
		return
	}
	defer f.Close()
	_, _ = f.Write(append(b, '\n'))
}

func (a *agent) HandleNotification(method string, params json.RawMessage) {
	<-a.ready
	a.record(map[string]any{"type": "notification", "method": method, "params": params})
	if method == "session/cancel" {
		var p acp.SessionIDParams
		_ = json.Unmarshal(params, &p)
		a.mu.Lock()
		cancel := a.running[p.SessionID]
		a.mu.Unlock()
		if cancel != nil {
			cancel()
		}
	}
}

func (a *agent) HandleRequest(ctx context.Context, method string, params json.RawMessage) (any, error) {
	<-a.ready
	a.record(map[string]any{"type": "request", "method": method, "params": params})
	switch method {
	case "initialize":
		if a.cfg.noInit {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return a.initialize(), nil
	case "authenticate":
		return map[string]any{}, nil
	case "session/new":
		return a.newSession(params)
	case "session/load":
		if !a.cfg.loadSession {
			return nil, acp.MethodNotFound(method)
		}
		if os.Getenv("TESTAGENT_CRASH_ON_LOAD") == "1" {
			// Once per state dir: die in the middle of the first session/load.
			marker := filepath.Join(a.cfg.stateDir, "crashed-on-load")
			if _, err := os.Stat(marker); err != nil {
				_ = os.WriteFile(marker, nil, 0o600)
				os.Exit(3)
			}
		}
		res, err := a.loadSession(params, !a.cfg.noReplay)
		if err == nil && os.Getenv("TESTAGENT_FAIL_LOADED") == "1" {
			var p acp.SessionIDParams
			_ = json.Unmarshal(params, &p)
			a.mu.Lock()
			a.broken[p.SessionID] = true
			a.mu.Unlock()
		}
		return res, err
	case "session/resume":
		if _, ok := a.cfg.caps["resume"]; !ok {
			return nil, acp.MethodNotFound(method)
		}
		return a.loadSession(params, false)
	case "session/prompt":
		var p acp.SessionIDParams
		_ = json.Unmarshal(params, &p)
		a.mu.Lock()
		broken := a.broken[p.SessionID]
		a.mu.Unlock()
		if broken {
			return nil, acp.NewRPCError(acp.CodeInternal, "the model refused the reloaded history", nil)
		}
		res, err := a.prompt(ctx, params)
		if a.cfg.recordAnswers {
			a.record(map[string]any{"type": "answered", "method": "session/prompt answered"})
		}
		return res, err
	case "session/set_config_option", "session/set_model", "session/set_mode":
		if a.cfg.sessionState == nil {
			return nil, acp.MethodNotFound(method)
		}
		if a.cfg.setError[method] {
			return nil, acp.NewRPCError(acp.CodeInternal, "cannot change that now", nil)
		}
		if method == "session/set_config_option" {
			opts := a.cfg.sessionState["configOptions"]
			if opts == nil {
				opts = json.RawMessage("[]")
			}
			return map[string]any{"configOptions": opts}, nil
		}
		return map[string]any{}, nil
	case "session/close":
		// With TESTAGENT_CAPS=close: forget the live session (its saved state stays loadable).
		if _, ok := a.cfg.caps["close"]; !ok {
			return nil, acp.MethodNotFound(method)
		}
		var p acp.SessionSetupParams
		_ = json.Unmarshal(params, &p)
		a.mu.Lock()
		delete(a.sessions, p.SessionID)
		a.mu.Unlock()
		return map[string]any{}, nil
	case "_session/steering":
		if !a.cfg.steering {
			return nil, acp.MethodNotFound(method)
		}
		return a.steer(params, false)
	case "_goose/unstable/session/steer":
		if !a.cfg.gooseSteer {
			return nil, acp.MethodNotFound(method)
		}
		return a.steer(params, true)
	case "_goose/unstable/session/system-prompt/set":
		switch a.cfg.gooseSysPrompt {
		case "1":
			return map[string]any{}, nil
		case "error":
			return nil, acp.NewRPCError(acp.CodeInternal, "system prompt store unavailable", nil)
		}
		return nil, acp.MethodNotFound(method)
	default:
		return nil, acp.MethodNotFound(method)
	}
}

// steer hands steered text to the session's running turn.
func (a *agent) steer(params json.RawMessage, goose bool) (any, error) {
	var p struct {
		SessionID     string             `json:"sessionId"`
		ExpectedRunID string             `json:"expectedRunId"`
		Prompt        []acp.ContentBlock `json:"prompt"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, acp.NewRPCError(acp.CodeInvalidParams, err.Error(), nil)
	}
	var texts []string
	for _, b := range p.Prompt {
		texts = append(texts, b.Text)
	}
	a.mu.Lock()
	inbox, run := a.steers[p.SessionID], a.runs[p.SessionID]
	a.mu.Unlock()
	if goose && (run == "" || p.ExpectedRunID != run) {
		return nil, acp.NewRPCError(acp.CodeInvalidParams, "expectedRunId does not name the active run", nil)
	}
	if inbox == nil {
		return map[string]any{"outcome": "noActiveTurn"}, nil
	}
	select {
	case inbox <- strings.Join(texts, "\n\n"):
	default:
		return nil, acp.NewRPCError(acp.CodeInternal, "steer inbox full", nil)
	}
	if goose {
		return map[string]any{}, nil
	}
	return map[string]any{"outcome": "injected"}, nil
}

func (a *agent) initialize() map[string]any {
	meta := map[string]any{}
	if a.cfg.steering {
		meta["steering"] = map[string]any{"supported": true}
	}
	return map[string]any{
		"_meta":           meta,
		"protocolVersion": acp.ProtocolVersion,
		"agentInfo":       map[string]any{"name": a.cfg.name, "title": "Buzz Test Agent", "version": a.cfg.version},
		"agentCapabilities": map[string]any{
			"loadSession":         a.cfg.loadSession,
			"promptCapabilities":  map[string]any{"image": a.cfg.image, "audio": false, "embeddedContext": false},
			"sessionCapabilities": a.cfg.caps,
			"mcpCapabilities":     map[string]any{"http": a.cfg.mcpHTTP, "sse": false},
		},
		"authMethods": a.cfg.authMethods,
	}
}

func (a *agent) sessionPath(id string) string {
	return filepath.Join(a.cfg.stateDir, "sessions", hex.EncodeToString([]byte(id))+".json")
}

// save persists a session; callers hold a.mu.
func (a *agent) save(s *session) {
	b, _ := json.MarshalIndent(s, "", "  ")
	tmp := a.sessionPath(s.ID) + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err == nil {
		_ = os.Rename(tmp, a.sessionPath(s.ID))
	}
}

func (a *agent) newSession(params json.RawMessage) (any, error) {
	var p acp.SessionSetupParams
	if err := json.Unmarshal(params, &p); err != nil || !filepath.IsAbs(p.Cwd) || p.McpServers == nil {
		return nil, acp.NewRPCError(acp.CodeInvalidParams, "session/new needs an absolute cwd and an mcpServers array", nil)
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	s := &session{ID: "sess_" + hex.EncodeToString(b[:]), Cwd: p.Cwd, History: []turn{}}
	a.mu.Lock()
	a.sessions[s.ID] = s
	a.save(s)
	a.mu.Unlock()
	return a.withState(map[string]any{"sessionId": s.ID}), nil
}

// withState adds TESTAGENT_SESSION_STATE's fields to a session result.
func (a *agent) withState(res map[string]any) map[string]any {
	for k, v := range a.cfg.sessionState {
		res[k] = v
	}
	return res
}

func (a *agent) loadSession(params json.RawMessage, replay bool) (any, error) {
	var p acp.SessionSetupParams
	if err := json.Unmarshal(params, &p); err != nil || p.SessionID == "" {
		return nil, acp.NewRPCError(acp.CodeInvalidParams, "sessionId is required", nil)
	}
	b, err := os.ReadFile(a.sessionPath(p.SessionID))
	var s session
	if err != nil || json.Unmarshal(b, &s) != nil {
		return nil, acp.NewRPCError(acp.CodeResourceNotFound, "Resource not found", map[string]string{"sessionId": p.SessionID})
	}
	a.mu.Lock()
	a.sessions[s.ID] = &s
	a.mu.Unlock()
	if replay {
		// The history goes out as ordinary updates before the answer, like real adapters.
		for _, t := range s.History {
			_ = acp.SendUpdate(a.conn, s.ID, acp.TextChunk(acp.UpdateUserMessageChunk, t.User))
			_ = acp.SendUpdate(a.conn, s.ID, acp.TextChunk(acp.UpdateAgentMessageChunk, t.Agent))
		}
	}
	return a.withState(map[string]any{}), nil
}

// bumpCounter increments the prompt counter persisted in the state dir.
func (a *agent) bumpCounter() int {
	path := filepath.Join(a.cfg.stateDir, "prompt-count")
	b, _ := os.ReadFile(path)
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	n++
	_ = os.WriteFile(path, []byte(strconv.Itoa(n)), 0o644)
	return n
}

var cancelled = acp.PromptResponse{StopReason: "cancelled"}

func (a *agent) prompt(ctx context.Context, params json.RawMessage) (any, error) {
	var p acp.PromptParams
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, acp.NewRPCError(acp.CodeInvalidParams, err.Error(), nil)
	}
	a.mu.Lock()
	s := a.sessions[p.SessionID]
	count := a.bumpCounter()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	inbox := make(chan string, 8)
	if s != nil {
		a.running[s.ID] = cancel
		a.steers[s.ID] = inbox
		if a.cfg.gooseSteer {
			a.runs[s.ID] = "run-" + strconv.Itoa(count)
		}
	}
	a.mu.Unlock()
	if s == nil {
		return nil, acp.NewRPCError(acp.CodeResourceNotFound, "Session not found", map[string]string{"sessionId": p.SessionID})
	}
	if a.cfg.gooseSteer {
		a.announceRun(s.ID, "run-"+strconv.Itoa(count))
	}
	defer func() {
		a.mu.Lock()
		delete(a.running, s.ID)
		delete(a.steers, s.ID)
		delete(a.runs, s.ID)
		a.mu.Unlock()
		if a.cfg.gooseSteer {
			a.announceRun(s.ID, "")
		}
	}()

	var texts, images []string
	for _, b := range p.Prompt {
		switch b.Type {
		case "text":
			texts = append(texts, b.Text)
		case "image":
			images = append(images, imageID(b))
		}
	}
	text := strings.Join(texts, "\n\n")

	if a.cfg.garbage {
		a.writeGarbage()
	}
	if a.cfg.crashOn == count {
		_ = acp.SendUpdate(a.conn, s.ID, acp.TextChunk(acp.UpdateAgentMessageChunk, "about to crash"))
		fmt.Fprintf(os.Stderr, "testagent: crashing on prompt %d\n", count)
		os.Exit(3)
	}
	if a.hangs(count) {
		fmt.Fprintf(os.Stderr, "testagent: hanging on prompt %d\n", count)
		select {
		case <-ctx.Done():
			if a.cfg.ignoreCancel {
				<-a.conn.Done()
			}
			return cancelled, nil
		case steered := <-inbox:
			text += "\n\n" + steered // a steer ends the hang: the turn answers everything
		}
	}

	info := parsePrompt(text)
	a.mu.Lock()
	if code := info.learnCodeword(); code != "" {
		s.Codeword = code
	}
	codeword := s.Codeword
	a.mu.Unlock()
	reply := strings.ReplaceAll(a.replyText(info, s.ID, codeword, count), "{images}", imageList(images))

	send := true
	if a.cfg.skipFollowed && strings.Contains(text, "Followed: nobody mentioned you") {
		return a.finish(s, text, ""), nil
	}
	if a.cfg.permission {
		kind, err := a.askPermission(ctx, s.ID)
		switch {
		case err != nil || kind == "cancelled" || ctx.Err() != nil:
			return cancelled, nil
		case strings.HasPrefix(kind, "reject"):
			reply, send = "permission denied", false
		}
	}
	if a.cfg.unknownRequest {
		var res json.RawMessage
		err := a.conn.Call(ctx, "_testagent/probe", map[string]any{"sessionId": s.ID}, &res)
		a.recordAnswer("_testagent/probe", res, err)
	}
	if a.cfg.bigChunk > 0 {
		_ = acp.SendUpdate(a.conn, s.ID, acp.TextChunk(acp.UpdateAgentMessageChunk, strings.Repeat("x", a.cfg.bigChunk)))
	}
	k := a.cfg.knobsFor(info.LastContent())
	late := send && !k.noCLI && a.cfg.replyLate > 0
	if send && !k.noCLI && !late {
		if err := a.send(k, s.ID, info, reply); err != nil && !k.sendFailsOK {
			// Like a careful agent: a reply that could not be posted fails the turn.
			return nil, acp.NewRPCError(acp.CodeInternal, "could not post the reply: "+err.Error(), nil)
		}
	}
	final := reply
	if k.finalText != nil {
		final = strings.ReplaceAll(*k.finalText, "{reply}", reply)
	}
	if final != "" {
		for _, part := range split(final, a.cfg.stream) {
			_ = acp.SendUpdate(a.conn, s.ID, acp.TextChunk(acp.UpdateAgentMessageChunk, part))
		}
	}
	if late {
		// After the turn's response is on its way: the reply lands once the turn is over.
		time.AfterFunc(a.cfg.replyLate, func() { _, _ = a.runCLI(k, info, reply) })
	}
	if hangs(a.cfg.hangAfterReply, count) {
		<-ctx.Done()
		return cancelled, nil
	}
	if ctx.Err() != nil {
		return cancelled, nil
	}
	return a.finish(s, text, reply), nil
}

// finish records the turn in the session and answers the prompt.
func (a *agent) finish(s *session, text, reply string) acp.PromptResponse {
	a.mu.Lock()
	s.History = append(s.History, turn{User: text, Agent: reply})
	turns := len(s.History)
	a.save(s)
	a.mu.Unlock()
	if a.cfg.costPerTurn > 0 {
		_ = acp.SendUpdate(a.conn, s.ID, map[string]any{"sessionUpdate": "usage_update", "used": len(text), "size": 200000,
			"cost": map[string]any{"amount": a.cfg.costPerTurn * float64(turns), "currency": "USD"}})
	}
	if a.cfg.noUsage {
		return acp.PromptResponse{StopReason: a.cfg.stopReason}
	}
	usage, _ := json.Marshal(map[string]int{"inputTokens": len(text), "outputTokens": len(reply), "totalTokens": len(text) + len(reply)})
	return acp.PromptResponse{StopReason: a.cfg.stopReason, Usage: usage}
}

// hangs reports whether prompt number count hangs (TESTAGENT_HANG_ON: "all" or a list).
func (a *agent) hangs(count int) bool { return hangs(a.cfg.hangOn, count) }

func hangs(list string, count int) bool {
	for _, n := range strings.Split(list, ",") {
		if n == "" {
			continue
		}
		if n = strings.TrimSpace(n); n == "all" || n == strconv.Itoa(count) {
			return true
		}
	}
	return false
}

// announceRun sends goose's session_info_update naming the active run ("" clears it).
func (a *agent) announceRun(sessionID, run string) {
	var id any
	if run != "" {
		id = run
	}
	_ = acp.SendUpdate(a.conn, sessionID, map[string]any{
		"sessionUpdate": "session_info_update",
		"_meta":         map[string]any{"goose": map[string]any{"activeRunId": id}},
	})
}

func (a *agent) replyText(info promptInfo, sessionID, codeword string, count int) string {
	content := info.LastContent()
	if strings.Contains(content, "codeword?") {
		if codeword == "" {
			return "codeword: unknown"
		}
		return "codeword: " + codeword
	}
	return strings.NewReplacer("{content}", content, "{codeword}", codeword, "{session}", sessionID,
		"{count}", strconv.Itoa(count), "{events}", strings.Join(info.EventIDs, ",")).Replace(a.cfg.reply)
}

// imageID names an image block by its type and the SHA-256 of its decoded data ("bad-base64"
// when it does not decode).
func imageID(b acp.ContentBlock) string {
	data, err := base64.StdEncoding.DecodeString(b.Data)
	if err != nil {
		return b.MimeType + ":bad-base64"
	}
	sum := sha256.Sum256(data)
	return b.MimeType + ":" + hex.EncodeToString(sum[:])
}

func imageList(ids []string) string {
	if len(ids) == 0 {
		return "none"
	}
	return strings.Join(ids, ",")
}

func (a *agent) recordAnswer(method string, result json.RawMessage, err error) {
	rec := map[string]any{"type": "response", "method": method}
	var re *acp.RPCError
	switch {
	case errors.As(err, &re):
		rec["error"] = re
	case err != nil:
		rec["error"] = map[string]string{"message": err.Error()}
	default:
		rec["result"] = result
	}
	a.record(rec)
}

// askPermission offers reject first and uses opaque ids, so a client choosing by position or
// label instead of kind is caught. It returns the chosen kind or "cancelled".
func (a *agent) askPermission(ctx context.Context, sessionID string) (string, error) {
	opts := []acp.PermissionOption{
		{OptionID: "opt-3f9", Name: "Reject", Kind: acp.KindRejectOnce},
		{OptionID: "opt-a71", Name: "Always allow", Kind: acp.KindAllowAlways},
		{OptionID: "opt-c42", Name: "Allow", Kind: acp.KindAllowOnce},
		{OptionID: "opt-d08", Name: "Never", Kind: acp.KindRejectAlways},
	}
	var res acp.PermissionResponse
	err := a.conn.Call(ctx, "session/request_permission", acp.PermissionRequest{
		SessionID: sessionID,
		ToolCall:  json.RawMessage(`{"toolCallId":"call_1","title":"buzz messages send","kind":"execute"}`),
		Options:   opts,
	}, &res)
	raw, _ := json.Marshal(res)
	a.recordAnswer("session/request_permission", raw, err)
	if err != nil {
		return "", err
	}
	if res.Outcome.Outcome != "selected" {
		return "cancelled", nil
	}
	for _, o := range opts {
		if o.OptionID == res.Outcome.OptionID {
			return o.Kind, nil
		}
	}
	return "", fmt.Errorf("unknown option %q", res.Outcome.OptionID)
}

// send runs the CLI as a reported tool call: tool_call first, then tool_call_update with its
// output and status, as real adapters report a shell command. With TESTAGENT_DENY_SEND the call
// is refused and never runs.
func (a *agent) send(k replyKnobs, sessionID string, info promptInfo, reply string) error {
	args := sendArgs(k, info, reply)
	id := fmt.Sprintf("call_%d", time.Now().UnixNano())
	command := "buzz " + strings.Join(args, " ")
	_ = acp.SendUpdate(a.conn, sessionID, map[string]any{"sessionUpdate": "tool_call", "toolCallId": id,
		"title": command, "kind": "execute", "status": "pending", "rawInput": map[string]any{"command": command}})
	update := func(status, output string) {
		_ = acp.SendUpdate(a.conn, sessionID, map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": id, "status": status,
			"content": []any{map[string]any{"type": "content", "content": map[string]any{"type": "text", "text": output}}}})
	}
	if k.denySend {
		update("failed", "Permission denied: this permission mode does not allow running `buzz`")
		return errors.New("permission denied")
	}
	out, err := a.runCLI(k, info, reply)
	if err != nil {
		code := -1
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		update("failed", fmt.Sprintf("Exit code %d\n%s", code, out))
		return err
	}
	update("completed", out)
	return nil
}

func sendArgs(k replyKnobs, info promptInfo, reply string) []string {
	if k.sendChannel != "" { // a top-level post there: the prompt's events are not in it
		return []string{"messages", "send", "--channel", k.sendChannel, "--content", reply}
	}
	args := []string{"messages", "send", "--channel", info.ChannelID}
	if to := info.replyTarget(); to != "" {
		args = append(args, "--reply-to", to)
	}
	return append(args, "--content", reply)
}

// runCLI posts the reply with the buzz CLI, trying three times (the CLI retries transient
// errors itself; this covers a relay that is restarting). It returns the last run's stdout and
// stderr.
func (a *agent) runCLI(k replyKnobs, info promptInfo, reply string) (string, error) {
	if info.ChannelID == "" {
		fmt.Fprintln(os.Stderr, "testagent: no channel in prompt; not replying via CLI")
		return "", nil
	}
	args := sendArgs(k, info, reply)
	var err error
	var out []byte
	for attempt := range 3 {
		if attempt > 0 {
			time.Sleep(time.Duration(attempt) * 500 * time.Millisecond)
		}
		cmd := exec.Command(a.cfg.buzz, args...)
		cmd.Env = a.cliEnv(k)
		var stderr strings.Builder
		cmd.Stderr = io.MultiWriter(os.Stderr, &stderr)
		out, err = cmd.Output()
		fmt.Fprintf(os.Stderr, "testagent: %s %s -> err=%v out=%s\n", a.cfg.buzz, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		if err == nil {
			return string(out), nil
		}
		out = append(out, stderr.String()...)
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() == 3 {
			break // no key, or one the relay refuses: trying again cannot help
		}
	}
	return string(out), err
}

// cliEnv is the CLI's environment: ours, less the key with TESTAGENT_DROP_KEY, with
// TESTAGENT_RELAY_URL as its relay.
func (a *agent) cliEnv(kn replyKnobs) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case kn.dropKey && (k == "BUZZ_PRIVATE_KEY" || k == "BUZZ_ACP_PRIVATE_KEY"):
		case a.cfg.cliRelayURL != "" && k == "BUZZ_RELAY_URL":
		default:
			env = append(env, kv)
		}
	}
	if a.cfg.cliRelayURL != "" {
		env = append(env, "BUZZ_RELAY_URL="+a.cfg.cliRelayURL)
	}
	return env
}

// split cuts s into n roughly equal parts (at least one).
func split(s string, n int) []string {
	r := []rune(s)
	if n <= 1 || len(r) < n {
		return []string{s}
	}
	var parts []string
	size := (len(r) + n - 1) / n
	for len(r) > 0 {
		k := min(size, len(r))
		parts = append(parts, string(r[:k]))
		r = r[k:]
	}
	return parts
}
