package fakemodel

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

func anthropicError(rep Reply) any {
	typ := "api_error"
	switch rep.Status {
	case http.StatusUnauthorized:
		typ = "authentication_error"
	case http.StatusTooManyRequests:
		typ = "rate_limit_error"
	}
	return map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": rep.ErrorMessage}}
}

// NewAnthropic starts a fake Anthropic Messages server: POST /v1/messages, streamed or not as
// the request asks, and /v1/messages/count_tokens. Like the real API it refuses a request
// without an anthropic-version header.
func NewAnthropic(t testing.TB, script Script) *Server {
	return newServer(t, script, "", map[string]handler{
		"POST /v1/messages": (*Server).serveAnthropic,
		"POST /v1/messages/count_tokens": func(_ *Server, w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte(`{"input_tokens":100}`))
		},
	})
}

func (s *Server) serveAnthropic(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Anthropic-Version") == "" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]any{"type": "error", "error": map[string]any{
			"type": "invalid_request_error", "message": "anthropic-version: header is required"}})
		return
	}
	n, req, rep, ok := s.receive(w, r, ParseAnthropicRequest, anthropicError)
	if !ok {
		return
	}
	msgID := fmt.Sprintf("msg_%02d", n+1)
	stop := "end_turn"
	if len(rep.Calls) > 0 {
		stop = "tool_use"
	}
	if !req.Stream {
		var content []map[string]any
		if len(rep.Text) > 0 {
			content = append(content, map[string]any{"type": "text", "text": strings.Join(rep.Text, "")})
		}
		for _, c := range rep.Calls {
			input := json.RawMessage(c.Args)
			if !json.Valid(input) {
				input = json.RawMessage("{}")
			}
			content = append(content, map[string]any{"type": "tool_use", "id": c.ID, "name": c.Name, "input": input})
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"id": msgID, "type": "message", "role": "assistant",
			"model": req.Model, "content": content, "stop_reason": stop, "stop_sequence": nil,
			"usage": map[string]any{"input_tokens": rep.InputTokens, "output_tokens": rep.OutputTokens,
				"cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}})
		return
	}
	send := sse(w)
	ev := func(name string, v map[string]any) {
		v["type"] = name
		send(name, v)
	}
	ev("message_start", map[string]any{"message": map[string]any{
		"id": msgID, "type": "message", "role": "assistant", "model": req.Model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": map[string]any{"input_tokens": rep.InputTokens, "output_tokens": 1},
	}})
	ev("ping", map[string]any{})
	// cut ends the stream early if the reply says so.
	cut := func() bool {
		if rep.StreamError != "" {
			ev("error", map[string]any{"error": map[string]any{"type": "overloaded_error", "message": rep.StreamError}})
		}
		return rep.StreamError != "" || rep.Truncate
	}
	idx := 0
	if len(rep.Text) == 0 && cut() {
		return
	}
	if len(rep.Text) > 0 {
		ev("content_block_start", map[string]any{"index": idx, "content_block": map[string]any{"type": "text", "text": ""}})
		for _, txt := range rep.Text {
			ev("content_block_delta", map[string]any{"index": idx, "delta": map[string]any{"type": "text_delta", "text": txt}})
		}
		if rep.Hang {
			<-r.Context().Done()
			return
		}
		if cut() {
			return
		}
		ev("content_block_stop", map[string]any{"index": idx})
		idx++
	}
	for _, c := range rep.Calls {
		ev("content_block_start", map[string]any{"index": idx, "content_block": map[string]any{"type": "tool_use", "id": c.ID, "name": c.Name, "input": map[string]any{}}})
		// The input arrives in two pieces, as real servers stream it.
		half := len(c.Args) / 2
		for _, part := range []string{c.Args[:half], c.Args[half:]} {
			ev("content_block_delta", map[string]any{"index": idx, "delta": map[string]any{"type": "input_json_delta", "partial_json": part}})
		}
		ev("content_block_stop", map[string]any{"index": idx})
		idx++
	}
	ev("message_delta", map[string]any{"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": rep.OutputTokens}})
	ev("message_stop", map[string]any{})
}

// ParseAnthropicRequest decodes a Messages request body. A user message's tool_result blocks
// become "tool" messages of their own, ahead of any text the message also carries.
func ParseAnthropicRequest(path string, body []byte) (Request, error) {
	var in struct {
		Model    string          `json:"model"`
		Stream   bool            `json:"stream"`
		System   json.RawMessage `json:"system"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return Request{}, fmt.Errorf("messages request is not JSON: %w", err)
	}
	req := Request{Path: path, Model: in.Model, Stream: in.Stream, System: contentText(in.System), Body: body}
	for _, m := range in.Messages {
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
			return Request{}, fmt.Errorf("messages request: bad content: %w", err)
		}
		msg := Msg{Role: m.Role}
		var texts []string
		for _, b := range blocks {
			switch b.Type {
			case "text":
				texts = append(texts, b.Text)
			case "tool_use":
				msg.ToolCalls = append(msg.ToolCalls, b.Name)
			case "tool_result":
				req.Messages = append(req.Messages, Msg{Role: "tool", ToolCallID: b.ToolUseID, Text: contentText(b.Content)})
			}
		}
		msg.Text = strings.Join(texts, "\n")
		if msg.Text != "" || len(msg.ToolCalls) > 0 {
			req.Messages = append(req.Messages, msg)
		}
	}
	for _, t := range in.Tools {
		req.Tools = append(req.Tools, t.Name)
	}
	return req, nil
}
