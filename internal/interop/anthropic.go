package interop

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
)

// Anthropic is a fake Anthropic Messages API on 127.0.0.1 for claude-agent-acp (set
// ANTHROPIC_BASE_URL to URL). A request that offers the Bash tool and whose newest user message
// has no tool result gets a Bash tool_use running `buzz messages send` to the channel and event
// named in that message; once the tool result comes back it ends the turn with short text. Other
// requests (Claude Code's side calls: titles, classifiers) get plain text.
type Anthropic struct {
	recorder
	loopback
	Reply ReplyFunc // content of the channel reply; default "pong"
	ids   atomic.Int64
}

// StartAnthropic listens on a loopback port; Close stops it.
func StartAnthropic() (*Anthropic, error) {
	a := &Anthropic{}
	if err := a.listen(a.serve); err != nil {
		return nil, err
	}
	return a, nil
}

type anthropicBlock struct {
	Type    string          `json:"type"`
	Text    string          `json:"text"`
	Name    string          `json:"name"`
	Content json.RawMessage `json:"content"` // tool_result: string or blocks
}

// anthropicText flattens a string-or-blocks value; tool results count as text too, so tests can
// see what a command printed.
func anthropicText(raw json.RawMessage) (text string, toolResult bool) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, false
	}
	var blocks []anthropicBlock
	_ = json.Unmarshal(raw, &blocks)
	var parts []string
	for _, b := range blocks {
		switch b.Type {
		case "text":
			parts = append(parts, b.Text)
		case "tool_result":
			toolResult = true
			t, _ := anthropicText(b.Content)
			parts = append(parts, t)
		}
	}
	return strings.Join(parts, "\n"), toolResult
}

// ParseAnthropicRequest decodes the parts of a Messages request the fake and the tests use.
func ParseAnthropicRequest(path string, body []byte) (Request, error) {
	var in struct {
		System   json.RawMessage `json:"system"`
		Stream   bool            `json:"stream"`
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
	req := Request{Path: path, Stream: in.Stream, Body: body}
	if len(in.System) > 0 {
		req.System, _ = anthropicText(in.System)
	}
	for _, m := range in.Messages {
		text, tr := anthropicText(m.Content)
		req.Messages = append(req.Messages, Message{Role: m.Role, Text: text, HasToolResult: tr})
	}
	for _, t := range in.Tools {
		req.ToolNames = append(req.ToolNames, t.Name)
	}
	return req, nil
}

func (a *Anthropic) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages/count_tokens":
		_, _ = w.Write([]byte(`{"input_tokens":100}`))
		return
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages":
	default:
		http.NotFound(w, r)
		return
	}
	req, err := ParseAnthropicRequest(r.URL.Path, body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	a.add(req)
	n := a.ids.Add(1)
	var content []map[string]any
	stop := "end_turn"
	last := req.LastUser()
	switch ch, ev, ok := ReplyTarget(last.Text); {
	case req.HasTool("Bash") && !last.HasToolResult && ok:
		reply := "pong"
		if a.Reply != nil {
			reply = a.Reply(req)
		}
		stop = "tool_use"
		content = []map[string]any{{"type": "tool_use", "id": fmt.Sprintf("toolu_%02d", n), "name": "Bash",
			"input": map[string]any{"command": SendCommand(ch, ev, reply), "description": "Reply in Buzz"}}}
	case req.HasTool("Bash") && last.HasToolResult:
		content = []map[string]any{{"type": "text", "text": "Replied."}}
	default:
		content = []map[string]any{{"type": "text", "text": "ok"}}
	}
	msgID := fmt.Sprintf("msg_%02d", n)
	usage := map[string]any{"input_tokens": 100, "output_tokens": 10, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
	if !req.Stream {
		_ = json.NewEncoder(w).Encode(map[string]any{"id": msgID, "type": "message", "role": "assistant",
			"model": "claude-fake", "content": content, "stop_reason": stop, "stop_sequence": nil, "usage": usage})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	ev := func(name string, v map[string]any) {
		v["type"] = name
		b, _ := json.Marshal(v)
		writeSSE(w, name, b)
	}
	ev("message_start", map[string]any{"message": map[string]any{"id": msgID, "type": "message", "role": "assistant",
		"model": "claude-fake", "content": []any{}, "stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": 100, "output_tokens": 1}}})
	for i, b := range content {
		if b["type"] == "tool_use" {
			input, _ := json.Marshal(b["input"])
			ev("content_block_start", map[string]any{"index": i, "content_block": map[string]any{
				"type": "tool_use", "id": b["id"], "name": b["name"], "input": map[string]any{}}})
			ev("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(input)}})
		} else {
			ev("content_block_start", map[string]any{"index": i, "content_block": map[string]any{"type": "text", "text": ""}})
			ev("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "text_delta", "text": b["text"]}})
		}
		ev("content_block_stop", map[string]any{"index": i})
	}
	ev("message_delta", map[string]any{"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": 10}})
	ev("message_stop", map[string]any{})
}
