// Package fakemodel runs fake LLM APIs on 127.0.0.1 for tests: OpenAI chat completions (what
// buzz-agent's OpenAI-compatible provider speaks), the OpenAI Responses API (what codex speaks),
// Anthropic Messages (buzz-agent's Anthropic provider, Claude Code) and Gemini (gemini-cli). A
// script decides each answer from the decoded request, the way a real model reacts to a
// conversation: stream text, call tools, fail with an HTTP status, or hang mid-stream until the
// client goes away. Every request is recorded, so tests can check what reached the model.
package fakemodel

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Msg is one conversation message of a recorded request, reduced to what tests check. Tool
// results are messages of their own (role "tool") whatever the API, so all fakes look alike.
type Msg struct {
	Role       string   // user | assistant | tool (and developer, for the Responses API)
	Text       string   // all text parts, joined by "\n"
	ToolCallID string   // for tool results
	ToolCalls  []string // names, for assistant messages
}

// Request is a decoded model call.
type Request struct {
	Path     string
	Key      string // API key presented
	Model    string
	Stream   bool
	System   string // system/developer messages (chat), instructions (Responses), system (Anthropic)
	Messages []Msg
	Tools    []string    // tool names offered
	Body     []byte      // the raw request body
	Header   http.Header // the request headers
}

// Last returns the last message (zero Msg if none).
func (r Request) Last() Msg {
	if len(r.Messages) == 0 {
		return Msg{}
	}
	return r.Messages[len(r.Messages)-1]
}

// LastUser returns the newest user message (zero Msg if none).
func (r Request) LastUser() Msg {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "user" {
			return r.Messages[i]
		}
	}
	return Msg{}
}

// UserTexts is the text of every user message that has some, oldest first.
func (r Request) UserTexts() []string {
	var out []string
	for _, m := range r.Messages {
		if m.Role == "user" && m.Text != "" {
			out = append(out, m.Text)
		}
	}
	return out
}

// HasTool reports whether the request offered the model a tool of that name.
func (r Request) HasTool(name string) bool { return slices.Contains(r.Tools, name) }

// Call is a tool call the fake model makes.
type Call struct {
	ID, Name, Args string // Args is JSON
}

// Reply is what the fake model answers.
type Reply struct {
	Status       int    // non-200: an error answer
	ErrorMessage string // for errors
	RetryAfter   string // Retry-After header for errors
	Text         []string
	Calls        []Call
	InputTokens  int64
	OutputTokens int64
	// Hang streams Text, then blocks until the client disconnects.
	Hang bool
	// StreamError, if set, is sent as the API's error event after Text (an
	// overload, which real servers report this way once a stream has begun),
	// ending the stream.
	StreamError string
	// Truncate ends the stream right after Text, as a dropped connection
	// would: no finish reason, no end event.
	Truncate bool
}

// Script chooses the reply to the n-th request (0-based).
type Script func(n int, r Request) Reply

// Server is a running fake.
type Server struct {
	*httptest.Server
	// BaseURL is what to configure as the provider base URL.
	BaseURL string

	script Script
	mu     sync.Mutex
	reqs   []Request
}

// Requests returns the requests seen so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// receive decodes one request with parse, records it and asks the script for the reply. ok is
// false when the answer is already written: a 400 for an undecodable body, or the scripted
// error in the API's errBody shape.
func (s *Server) receive(w http.ResponseWriter, r *http.Request, parse func(path string, body []byte) (Request, error), errBody func(Reply) any) (n int, req Request, rep Reply, ok bool) {
	body, _ := io.ReadAll(r.Body)
	req, err := parse(r.URL.Path, body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return 0, req, rep, false
	}
	req.Header = r.Header.Clone()
	// OpenAI clients and Anthropic's v2 SDK send the key as a bearer token; older Anthropic
	// clients (and buzz-agent) use x-api-key.
	req.Key = r.Header.Get("X-Api-Key")
	if req.Key == "" {
		req.Key = strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	}
	if req.Key == "" {
		req.Key = r.Header.Get("X-Goog-Api-Key") // Gemini
	}
	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	n = len(s.reqs) - 1
	s.mu.Unlock()
	rep = s.script(n, req)
	if rep.Status == 0 || rep.Status == http.StatusOK {
		return n, req, rep, true
	}
	w.Header().Set("Content-Type", "application/json")
	if rep.RetryAfter != "" {
		w.Header().Set("Retry-After", rep.RetryAfter)
	}
	w.WriteHeader(rep.Status)
	_ = json.NewEncoder(w).Encode(errBody(rep))
	return n, req, rep, false
}

type handler func(s *Server, w http.ResponseWriter, r *http.Request)

// newServer serves the routes (pattern → handler) on a loopback port until the test ends;
// BaseURL is the server's URL plus basePath.
func newServer(t testing.TB, script Script, basePath string, routes map[string]handler) *Server {
	s := &Server{script: script}
	mux := http.NewServeMux()
	for pattern, h := range routes {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) { h(s, w, r) })
	}
	s.Server = httptest.NewServer(mux)
	t.Cleanup(s.Close)
	s.BaseURL = s.URL + basePath
	return s
}

func sse(w http.ResponseWriter) func(event string, data any) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	return func(event string, data any) {
		b, _ := json.Marshal(data)
		if event != "" {
			fmt.Fprintf(w, "event: %s\n", event)
		}
		fmt.Fprintf(w, "data: %s\n\n", b)
		if fl != nil {
			fl.Flush()
		}
	}
}

// contentText flattens a string or an array of text parts, joined by "\n".
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	var out []string
	for _, p := range parts {
		if p.Text != "" {
			out = append(out, p.Text)
		}
	}
	return strings.Join(out, "\n")
}
