package fakemodel

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

func openAIError(rep Reply) any {
	return map[string]any{"error": map[string]any{"message": rep.ErrorMessage, "type": "error", "code": nil}}
}

// NewOpenAI starts a fake OpenAI chat-completions server (POST /v1/chat/completions).
func NewOpenAI(t testing.TB, script Script) *Server {
	return newServer(t, script, "/v1", map[string]handler{"POST /v1/chat/completions": (*Server).serveChat})
}

func (s *Server) serveChat(w http.ResponseWriter, r *http.Request) {
	_, req, rep, ok := s.receive(w, r, ParseChatRequest, openAIError)
	if !ok {
		return
	}
	send := sse(w)
	// Comments keep idle connections open on some servers and proxies.
	fmt.Fprint(w, ": keep-alive\n\n")
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
	if rep.StreamError != "" {
		send("", map[string]any{"error": map[string]any{"message": rep.StreamError, "type": "server_error", "code": nil}})
		return
	}
	if rep.Truncate {
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
}

// ParseChatRequest decodes a chat-completions request body; system and developer messages become
// Request.System.
func ParseChatRequest(path string, body []byte) (Request, error) {
	var in struct {
		Model    string `json:"model"`
		Stream   bool   `json:"stream"`
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
	if err := json.Unmarshal(body, &in); err != nil {
		return Request{}, fmt.Errorf("chat request is not JSON: %w", err)
	}
	req := Request{Path: path, Model: in.Model, Stream: in.Stream, Body: body}
	for _, m := range in.Messages {
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
	for _, t := range in.Tools {
		req.Tools = append(req.Tools, t.Function.Name)
	}
	return req, nil
}

// NewResponses starts a fake OpenAI Responses API (POST /v1/responses), always streaming, as
// codex uses it. Text becomes one output message, each call a function_call item.
func NewResponses(t testing.TB, script Script) *Server {
	return newServer(t, script, "/v1", map[string]handler{"POST /v1/responses": (*Server).serveResponses})
}

func (s *Server) serveResponses(w http.ResponseWriter, r *http.Request) {
	n, _, rep, ok := s.receive(w, r, ParseResponsesRequest, openAIError)
	if !ok {
		return
	}
	send := sse(w)
	seq := 0
	ev := func(name string, v map[string]any) {
		v["type"] = name
		v["sequence_number"] = seq
		seq++
		send(name, v)
	}
	respID := fmt.Sprintf("resp_%02d", n+1)
	ev("response.created", map[string]any{"response": map[string]any{"id": respID, "status": "in_progress", "output": []any{}}})
	var items []any
	if len(rep.Text) > 0 || len(rep.Calls) == 0 {
		text := strings.Join(rep.Text, "")
		id := fmt.Sprintf("msg_%02d", n+1)
		item := map[string]any{"type": "message", "role": "assistant", "id": id, "status": "completed",
			"content": []map[string]any{{"type": "output_text", "text": text, "annotations": []any{}}}}
		ev("response.output_item.added", map[string]any{"output_index": 0, "item": item})
		ev("response.content_part.added", map[string]any{"output_index": 0, "item_id": id, "content_index": 0,
			"part": map[string]any{"type": "output_text", "text": ""}})
		for _, txt := range rep.Text {
			ev("response.output_text.delta", map[string]any{"output_index": 0, "item_id": id, "content_index": 0, "delta": txt})
		}
		if rep.Hang {
			<-r.Context().Done()
			return
		}
		ev("response.output_text.done", map[string]any{"output_index": 0, "item_id": id, "content_index": 0, "text": text})
		ev("response.output_item.done", map[string]any{"output_index": 0, "item": item})
		items = append(items, item)
	}
	for i, c := range rep.Calls {
		item := map[string]any{"type": "function_call", "id": fmt.Sprintf("fc_%02d_%d", n+1, i), "call_id": c.ID,
			"name": c.Name, "arguments": c.Args, "status": "completed"}
		ev("response.output_item.added", map[string]any{"output_index": len(items), "item": item})
		ev("response.output_item.done", map[string]any{"output_index": len(items), "item": item})
		items = append(items, item)
	}
	ev("response.completed", map[string]any{"response": map[string]any{"id": respID, "status": "completed", "output": items,
		"usage": map[string]any{"input_tokens": rep.InputTokens, "input_tokens_details": map[string]any{"cached_tokens": 0},
			"output_tokens": rep.OutputTokens, "output_tokens_details": map[string]any{"reasoning_tokens": 0},
			"total_tokens": rep.InputTokens + rep.OutputTokens}}})
}

// ParseResponsesRequest decodes a Responses request body. Messages keep input order; function
// calls become assistant messages and their outputs "tool" messages.
func ParseResponsesRequest(path string, body []byte) (Request, error) {
	var in struct {
		Model        string `json:"model"`
		Instructions string `json:"instructions"`
		Stream       bool   `json:"stream"`
		Input        []struct {
			Type    string          `json:"type"`
			Role    string          `json:"role"`
			Name    string          `json:"name"`
			CallID  string          `json:"call_id"`
			Content json.RawMessage `json:"content"`
			Output  json.RawMessage `json:"output"`
		} `json:"input"`
		Tools []struct {
			Type string `json:"type"`
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return Request{}, fmt.Errorf("responses request is not JSON: %w", err)
	}
	req := Request{Path: path, Model: in.Model, Stream: in.Stream, System: in.Instructions, Body: body}
	for _, it := range in.Input {
		switch {
		case it.Type == "message" || (it.Type == "" && it.Role != ""):
			req.Messages = append(req.Messages, Msg{Role: it.Role, Text: contentText(it.Content)})
		case strings.HasSuffix(it.Type, "_output"): // function_call_output, custom_tool_call_output, …
			req.Messages = append(req.Messages, Msg{Role: "tool", Text: contentText(it.Output), ToolCallID: it.CallID})
		case strings.HasSuffix(it.Type, "_call"): // function_call, custom_tool_call, local_shell_call, …
			req.Messages = append(req.Messages, Msg{Role: "assistant", ToolCalls: []string{it.Name}})
		}
	}
	for _, t := range in.Tools {
		name := t.Name
		if name == "" {
			name = t.Type // e.g. local_shell, web_search
		}
		req.Tools = append(req.Tools, name)
	}
	return req, nil
}
