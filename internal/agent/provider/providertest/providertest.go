// Package providertest runs fake OpenAI chat-completions and Anthropic
// Messages servers on 127.0.0.1 for tests. A script decides each answer
// from the decoded request, the way a real model would react to a
// conversation: stream text, call tools, fail with an HTTP status, or hang
// mid-stream until the client goes away.
package providertest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// Msg is one message of a recorded request, reduced to what tests check.
type Msg struct {
	Role       string // user | assistant | tool
	Text       string
	ToolCallID string   // for tool results
	ToolCalls  []string // names, for assistant messages
}

// Request is a decoded model call.
type Request struct {
	Key      string // API key presented
	Model    string
	System   string
	Messages []Msg
	Tools    []string // tool names offered
}

// Last returns the last message (zero Msg if none).
func (r Request) Last() Msg {
	if len(r.Messages) == 0 {
		return Msg{}
	}
	return r.Messages[len(r.Messages)-1]
}

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

func (s *Server) record(r Request) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, r)
	return len(s.reqs) - 1
}

func start(t testing.TB, path string, h http.HandlerFunc) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc(path, h)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func sse(w http.ResponseWriter) func(event string, data any) {
	w.Header().Set("Content-Type", "text/event-stream")
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

func writeError(w http.ResponseWriter, rep Reply, body any) {
	w.Header().Set("Content-Type", "application/json")
	if rep.RetryAfter != "" {
		w.Header().Set("Retry-After", rep.RetryAfter)
	}
	w.WriteHeader(rep.Status)
	_ = json.NewEncoder(w).Encode(body)
}

// NewOpenAI starts a fake OpenAI chat-completions server.
func NewOpenAI(t testing.TB, script Script) *Server {
	s := &Server{script: script}
	s.Server = start(t, "POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		req, err := decodeOpenAI(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rep := s.script(s.record(req), req)
		if rep.Status != 0 && rep.Status != http.StatusOK {
			writeError(w, rep, map[string]any{"error": map[string]any{"message": rep.ErrorMessage, "type": "error", "code": nil}})
			return
		}
		send := sse(w)
		chunk := func(delta map[string]any, finish any) map[string]any {
			return map[string]any{
				"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": req.Model,
				"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}},
			}
		}
		send("", chunk(map[string]any{"role": "assistant", "content": ""}, nil))
		for _, txt := range rep.Text {
			send("", chunk(map[string]any{"content": txt}, nil))
		}
		if rep.Hang {
			<-r.Context().Done()
			return
		}
		for i, c := range rep.Calls {
			// Name first, arguments split in two, as real servers stream them.
			half := len(c.Args) / 2
			send("", chunk(map[string]any{"tool_calls": []any{map[string]any{
				"index": i, "id": c.ID, "type": "function", "function": map[string]any{"name": c.Name, "arguments": c.Args[:half]},
			}}}, nil))
			send("", chunk(map[string]any{"tool_calls": []any{map[string]any{
				"index": i, "function": map[string]any{"arguments": c.Args[half:]},
			}}}, nil))
		}
		finish := "stop"
		if len(rep.Calls) > 0 {
			finish = "tool_calls"
		}
		send("", chunk(map[string]any{}, finish))
		send("", map[string]any{
			"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": req.Model, "choices": []any{},
			"usage": map[string]any{"prompt_tokens": rep.InputTokens, "completion_tokens": rep.OutputTokens, "total_tokens": rep.InputTokens + rep.OutputTokens},
		})
		fmt.Fprint(w, "data: [DONE]\n\n")
	})
	s.BaseURL = s.URL + "/v1"
	return s
}

func decodeOpenAI(r *http.Request) (Request, error) {
	var body struct {
		Model    string `json:"model"`
		Messages []struct {
			Role       string          `json:"role"`
			Content    json.RawMessage `json:"content"`
			ToolCallID string          `json:"tool_call_id"`
			ToolCalls  []struct {
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"messages"`
		Tools []struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tools"`
	}
	raw, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(raw, &body); err != nil {
		return Request{}, fmt.Errorf("fake openai: bad body: %v", err)
	}
	req := Request{Key: strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "), Model: body.Model}
	for _, m := range body.Messages {
		text := contentText(m.Content)
		if m.Role == "system" || m.Role == "developer" {
			req.System += text
			continue
		}
		msg := Msg{Role: m.Role, Text: text, ToolCallID: m.ToolCallID}
		for _, c := range m.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, c.Function.Name)
		}
		req.Messages = append(req.Messages, msg)
	}
	for _, t := range body.Tools {
		req.Tools = append(req.Tools, t.Function.Name)
	}
	return req, nil
}

// contentText flattens a string or an array of text parts.
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type    string          `json:"type"`
		Text    string          `json:"text"`
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// NewAnthropic starts a fake Anthropic Messages server.
func NewAnthropic(t testing.TB, script Script) *Server {
	s := &Server{script: script}
	s.Server = start(t, "POST /v1/messages", func(w http.ResponseWriter, r *http.Request) {
		req, err := decodeAnthropic(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rep := s.script(s.record(req), req)
		if rep.Status != 0 && rep.Status != http.StatusOK {
			typ := "api_error"
			switch rep.Status {
			case 401:
				typ = "authentication_error"
			case 429:
				typ = "rate_limit_error"
			}
			writeError(w, rep, map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": rep.ErrorMessage}})
			return
		}
		send := sse(w)
		send("message_start", map[string]any{"type": "message_start", "message": map[string]any{
			"id": "msg_1", "type": "message", "role": "assistant", "model": req.Model, "content": []any{},
			"stop_reason": nil, "stop_sequence": nil, "usage": map[string]any{"input_tokens": rep.InputTokens, "output_tokens": 1},
		}})
		idx := 0
		if len(rep.Text) > 0 {
			send("content_block_start", map[string]any{"type": "content_block_start", "index": idx, "content_block": map[string]any{"type": "text", "text": ""}})
			for _, txt := range rep.Text {
				send("content_block_delta", map[string]any{"type": "content_block_delta", "index": idx, "delta": map[string]any{"type": "text_delta", "text": txt}})
			}
			if rep.Hang {
				<-r.Context().Done()
				return
			}
			send("content_block_stop", map[string]any{"type": "content_block_stop", "index": idx})
			idx++
		}
		for _, c := range rep.Calls {
			send("content_block_start", map[string]any{"type": "content_block_start", "index": idx, "content_block": map[string]any{"type": "tool_use", "id": c.ID, "name": c.Name, "input": map[string]any{}}})
			half := len(c.Args) / 2
			for _, part := range []string{c.Args[:half], c.Args[half:]} {
				send("content_block_delta", map[string]any{"type": "content_block_delta", "index": idx, "delta": map[string]any{"type": "input_json_delta", "partial_json": part}})
			}
			send("content_block_stop", map[string]any{"type": "content_block_stop", "index": idx})
			idx++
		}
		stop := "end_turn"
		if len(rep.Calls) > 0 {
			stop = "tool_use"
		}
		send("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": rep.OutputTokens}})
		send("message_stop", map[string]any{"type": "message_stop"})
	})
	s.BaseURL = s.URL
	return s
}

func decodeAnthropic(r *http.Request) (Request, error) {
	var body struct {
		Model    string          `json:"model"`
		System   json.RawMessage `json:"system"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	raw, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(raw, &body); err != nil {
		return Request{}, fmt.Errorf("fake anthropic: bad body: %v", err)
	}
	// The v2 SDK sends the key as a bearer token; older clients use x-api-key.
	key := r.Header.Get("X-Api-Key")
	if key == "" {
		key = strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	}
	req := Request{Key: key, Model: body.Model, System: contentText(body.System)}
	for _, m := range body.Messages {
		var s string
		if json.Unmarshal(m.Content, &s) == nil {
			req.Messages = append(req.Messages, Msg{Role: m.Role, Text: s})
			continue
		}
		var blocks []struct {
			Type      string          `json:"type"`
			Text      string          `json:"text"`
			Name      string          `json:"name"`
			ToolUseID string          `json:"tool_use_id"`
			Content   json.RawMessage `json:"content"`
		}
		if err := json.Unmarshal(m.Content, &blocks); err != nil {
			return Request{}, fmt.Errorf("fake anthropic: bad content: %v", err)
		}
		// Tool results become their own "tool" messages so both fakes look alike.
		msg := Msg{Role: m.Role}
		for _, b := range blocks {
			switch b.Type {
			case "text":
				msg.Text += b.Text
			case "tool_use":
				msg.ToolCalls = append(msg.ToolCalls, b.Name)
			case "tool_result":
				req.Messages = append(req.Messages, Msg{Role: "tool", ToolCallID: b.ToolUseID, Text: contentText(b.Content)})
			}
		}
		if msg.Text != "" || len(msg.ToolCalls) > 0 {
			req.Messages = append(req.Messages, msg)
		}
	}
	for _, t := range body.Tools {
		req.Tools = append(req.Tools, t.Name)
	}
	return req, nil
}
