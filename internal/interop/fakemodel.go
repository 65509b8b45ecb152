package interop

import (
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
)

// Message is one conversation message as a fake model server received it, flattened to text.
type Message struct {
	Role          string
	Text          string // all text parts, joined by "\n"
	HasToolResult bool   // carries a tool_result / function_call_output
}

// Request is one model request a fake server received.
type Request struct {
	Path      string
	Stream    bool
	System    string    // Anthropic `system` / OpenAI `instructions`, flattened
	Messages  []Message // in order; for OpenAI, developer/user/assistant messages and tool outputs
	ToolNames []string
	Body      []byte
}

// HasTool reports whether the request offered the model a tool of that name.
func (r Request) HasTool(name string) bool {
	for _, n := range r.ToolNames {
		if n == name {
			return true
		}
	}
	return false
}

// LastUser is the newest user message (zero Message if none).
func (r Request) LastUser() Message {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "user" {
			return r.Messages[i]
		}
	}
	return Message{}
}

// UserTexts is the text of every user message, oldest first.
func (r Request) UserTexts() []string {
	var out []string
	for _, m := range r.Messages {
		if m.Role == "user" && m.Text != "" {
			out = append(out, m.Text)
		}
	}
	return out
}

// ReplyFunc decides the content the fake model has the agent post, given the model request that
// starts a turn (it sees the whole conversation the adapter sent).
type ReplyFunc func(Request) string

// recorder keeps every request in arrival order; safe for concurrent handlers.
type recorder struct {
	mu   sync.Mutex
	reqs []Request
	hook func(Request)
}

func (r *recorder) add(req Request) {
	r.mu.Lock()
	r.reqs = append(r.reqs, req)
	r.mu.Unlock()
}

// Requests returns a copy of everything received so far.
func (r *recorder) Requests() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Request(nil), r.reqs...)
}

var (
	replyToRE = regexp.MustCompile(`--reply-to ([0-9a-f]{64})`)
	channelRE = regexp.MustCompile(`\(#([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\)`)
)

// ReplyTarget extracts the channel UUID and the event to reply to from a buzz-acp prompt: the
// channel from "Channel: name (#uuid)", the event from the [Context] block's instruction
// "buzz messages send --reply-to <id>" (the last one, so quoted history cannot win).
func ReplyTarget(prompt string) (channel, eventID string, ok bool) {
	ch := channelRE.FindStringSubmatch(prompt)
	ids := replyToRE.FindAllStringSubmatch(prompt, -1)
	if ch == nil || len(ids) == 0 {
		return "", "", false
	}
	return ch[1], ids[len(ids)-1][1], true
}

// SendCommand is the shell command the fake model asks the agent to run to answer in Buzz.
func SendCommand(channel, eventID, content string) string {
	return "buzz messages send --channel " + channel + " --reply-to " + eventID + " --content " + shellQuote(content)
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func writeSSE(w http.ResponseWriter, event string, data []byte) {
	_, _ = w.Write([]byte("event: " + event + "\ndata: "))
	_, _ = w.Write(data)
	_, _ = w.Write([]byte("\n\n"))
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// loopback is the HTTP server half of a fake model: it listens on 127.0.0.1 and serves one handler.
type loopback struct {
	URL string
	srv *http.Server
}

func (l *loopback) listen(h http.HandlerFunc) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	l.URL = "http://" + ln.Addr().String()
	l.srv = &http.Server{Handler: h}
	go func() { _ = l.srv.Serve(ln) }()
	return nil
}

// Close stops the server and its open connections.
func (l *loopback) Close() { _ = l.srv.Close() }
