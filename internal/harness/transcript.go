package harness

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/buzz-harness/buzz/internal/acp"
)

// What a turn said and did, for the reply safety net (reply.go): the agent's text since its last
// tool call, and its `buzz messages send` calls with how each ended. The session/updates arrive
// on the agents' reader goroutines (activity.onUpdate); transcripts hands each to the turn
// prompting that session, which takes its record when the prompt returns (an agent writes a
// turn's updates before its response).

// transcripts holds the record of every turn prompting now, by session id.
type transcripts struct {
	mu        sync.Mutex
	bySession map[string]*transcript
}

// transcript is one turn's record; transcripts' mutex guards it.
type transcript struct {
	text    strings.Builder // agent_message_chunk text since the last tool call
	clipped bool
	calls   map[string]*callRecord // by tool call id
	order   []*callRecord          // the send calls, in order
}

// callRecord is one of the agent's tool calls, as far as the safety net cares.
type callRecord struct {
	send    bool   // `buzz messages send`, or the buzz MCP server's send_message
	channel string // the channel the call names, if it names one
	status  string // the last status reported (pending, in_progress, completed, failed)
	output  string // what its result said, clipped
	exit    int    // its exit code; -1 when unknown
	denied  bool   // a permission rule, mode or answer refused it
}

// turnReport is a finished turn's record: a copy the loop may keep.
type turnReport struct {
	text  string       // the agent's final text
	sends []callRecord // its send calls, in order
}

// Bounds: text past maxFinalText is cut (the fallback could not carry it: the relay takes 64 KiB
// of content), and a turn's tool calls past maxToolCalls are not followed.
const (
	maxFinalText = 60 << 10
	maxToolCalls = 256
	maxCallText  = 4 << 10
)

// start begins recording sessionID's updates for the turn prompting it.
func (t *transcripts) start(sessionID string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.bySession == nil {
		t.bySession = map[string]*transcript{}
	}
	t.bySession[sessionID] = &transcript{calls: map[string]*callRecord{}}
}

// end stops recording sessionID and returns what its turn said and did.
func (t *transcripts) end(sessionID string) turnReport {
	t.mu.Lock()
	defer t.mu.Unlock()
	tr := t.bySession[sessionID]
	delete(t.bySession, sessionID)
	if tr == nil {
		return turnReport{}
	}
	r := turnReport{text: strings.TrimSpace(tr.text.String())}
	if tr.clipped {
		r.text += "\n\n[…cut: the answer was longer than one message can carry]"
	}
	for _, c := range tr.order {
		r.sends = append(r.sends, *c)
	}
	return r
}

// observe records one session/update for the turn prompting its session, if any.
func (t *transcripts) observe(u acp.SessionUpdate) {
	if u.Replay {
		return
	}
	switch u.Kind {
	case "agent_message_chunk", "tool_call", "tool_call_update":
	default:
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	tr := t.bySession[u.SessionID]
	if tr == nil {
		return
	}
	if u.Kind == "agent_message_chunk" {
		if tr.text.Len()+len(u.Text) > maxFinalText {
			tr.clipped = true
			return
		}
		tr.text.WriteString(u.Text)
		return
	}
	tr.toolUpdate(u)
}

// toolUpdate applies a tool_call or tool_call_update. A new tool call starts the final text
// over: what the agent wrote before it was not its last word.
func (tr *transcript) toolUpdate(u acp.SessionUpdate) {
	c := tr.calls[u.ToolCallID]
	if c == nil {
		if len(tr.calls) >= maxToolCalls {
			return
		}
		c = &callRecord{exit: -1}
		tr.calls[u.ToolCallID] = c
		tr.text.Reset()
		tr.clipped = false
	}
	f := parseToolUpdate(u)
	if !c.send && isSendCall(f.describes) {
		c.send = true
		tr.order = append(tr.order, c)
	}
	if c.channel == "" {
		c.channel = namedChannel(f.describes)
	}
	if f.status != "" {
		c.status = f.status
	}
	if f.output != "" {
		c.output = clipText(c.output+f.output, maxCallText)
	}
	if f.exit >= 0 {
		c.exit = f.exit
	}
	c.denied = c.denied || f.denied
}

// toolFields is what one tool update says.
type toolFields struct {
	describes string // title and raw input: what the call runs
	status    string
	output    string
	exit      int
	denied    bool
}

func parseToolUpdate(u acp.SessionUpdate) toolFields {
	f := toolFields{describes: u.Title, status: u.Status, exit: -1}
	var p struct {
		Update struct {
			RawInput  json.RawMessage `json:"rawInput"`
			RawOutput json.RawMessage `json:"rawOutput"`
			Content   json.RawMessage `json:"content"`
			Meta      struct {
				ClaudeCode struct {
					NonExecutionKind string `json:"nonExecutionKind"`
				} `json:"claudeCode"`
				TerminalExit struct {
					ExitCode *int `json:"exit_code"`
				} `json:"terminal_exit"`
				TerminalOutput struct {
					Data string `json:"data"`
				} `json:"terminal_output"`
			} `json:"_meta"`
		} `json:"update"`
	}
	if json.Unmarshal(u.Raw, &p) != nil {
		return f
	}
	up := p.Update
	f.describes += " " + string(up.RawInput)
	var out []string
	var content []struct {
		Content struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if json.Unmarshal(up.Content, &content) == nil {
		for _, c := range content {
			out = append(out, c.Content.Text)
		}
	}
	out = append(out, up.Meta.TerminalOutput.Data, rawOutputText(up.RawOutput))
	f.output = strings.TrimSpace(strings.Join(out, "\n"))
	if up.Meta.TerminalExit.ExitCode != nil {
		f.exit = *up.Meta.TerminalExit.ExitCode
	} else if m := reExitCode.FindStringSubmatch(f.output); m != nil {
		f.exit, _ = strconv.Atoi(m[1])
	} else if n, ok := rawExitCode(up.RawOutput); ok {
		f.exit = n
	}
	kind := up.Meta.ClaudeCode.NonExecutionKind
	f.denied = kind == "user-rejected" || kind == "permission-rule" || strings.HasPrefix(kind, "automode") ||
		f.status == "failed" && rePermission.MatchString(f.output)
	return f
}

// rawOutputText is the text of a tool call's rawOutput: a string, or the usual output fields of
// an object (codex and others report {stdout, stderr} or a formatted output).
func rawOutputText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var o map[string]json.RawMessage
	if json.Unmarshal(raw, &o) != nil {
		return ""
	}
	var parts []string
	for _, k := range []string{"formatted_output", "output", "stdout", "stderr", "error"} {
		if json.Unmarshal(o[k], &s) == nil && s != "" {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, "\n")
}

func rawExitCode(raw json.RawMessage) (int, bool) {
	var o struct {
		ExitCode  *int `json:"exit_code"`
		ExitCode2 *int `json:"exitCode"`
	}
	if json.Unmarshal(raw, &o) != nil {
		return 0, false
	}
	switch {
	case o.ExitCode != nil:
		return *o.ExitCode, true
	case o.ExitCode2 != nil:
		return *o.ExitCode2, true
	}
	return 0, false
}

var (
	// reSendCall finds a `buzz messages send` command (by any path to the CLI) or the buzz MCP
	// server's send_message tool in a call's title or input.
	reSendCall = regexp.MustCompile(`(?i)(^|[^\w-])buzz(\.exe)?["']?\s+messages\s+send\b|buzz__send_message\b`)
	// reChannel finds the channel a call names: --channel <uuid>, or an MCP "channel" argument.
	reChannel    = regexp.MustCompile(`(?:--channel[= ]["']?|"channel"\s*:\s*")([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})`)
	reExitCode   = regexp.MustCompile(`(?m)^(?:` + "```" + `\w*\n)?Exit code (\d+)`)
	rePermission = regexp.MustCompile(`(?i)permission denied|denied by|not allowed to|doesn't want to proceed|user rejected`)
)

func isSendCall(describes string) bool { return reSendCall.MatchString(describes) }

func namedChannel(describes string) string {
	if m := reChannel.FindStringSubmatch(describes); m != nil {
		return m[1]
	}
	return ""
}

// clipText keeps at most n bytes of s, cut at a rune boundary.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
