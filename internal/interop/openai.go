package interop

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
)

// OpenAI is a fake OpenAI Responses API on 127.0.0.1 for codex-acp (a custom model_provider with
// base_url URL+"/v1"). A request whose newest input item is a user message naming a Buzz channel
// and event gets a shell function call running `buzz messages send`; once the call's output comes
// back it ends the turn with short text. Anything else gets plain text.
type OpenAI struct {
	recorder
	loopback
	Reply ReplyFunc // content of the channel reply; default "pong"
	ids   atomic.Int64
}

// StartOpenAI listens on a loopback port; Close stops it.
func StartOpenAI() (*OpenAI, error) {
	o := &OpenAI{}
	if err := o.listen(o.serve); err != nil {
		return nil, err
	}
	return o, nil
}

// ParseResponsesRequest decodes the parts of a Responses request the fake and the tests use.
// Messages keep input order; tool outputs become role "tool" messages with HasToolResult.
func ParseResponsesRequest(path string, body []byte) (Request, error) {
	var in struct {
		Instructions string `json:"instructions"`
		Stream       bool   `json:"stream"`
		Input        []struct {
			Type    string          `json:"type"`
			Role    string          `json:"role"`
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
	req := Request{Path: path, Stream: in.Stream, System: in.Instructions, Body: body}
	for _, it := range in.Input {
		switch {
		case it.Type == "message" || (it.Type == "" && it.Role != ""):
			req.Messages = append(req.Messages, Message{Role: it.Role, Text: responsesText(it.Content)})
		case strings.HasSuffix(it.Type, "_output"): // function_call_output, custom_tool_call_output, …
			req.Messages = append(req.Messages, Message{Role: "tool", Text: responsesText(it.Output), HasToolResult: true})
		}
	}
	for _, t := range in.Tools {
		name := t.Name
		if name == "" {
			name = t.Type // e.g. local_shell, web_search
		}
		req.ToolNames = append(req.ToolNames, name)
	}
	return req, nil
}

func responsesText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
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

// shellCall builds the function call that makes codex run command, in the argument shape of
// whichever shell tool the request offered.
func shellCall(req Request, id int64, command string) (map[string]any, bool) {
	var args any
	name := ""
	switch {
	case req.HasTool("shell"):
		name, args = "shell", map[string]any{"command": []string{"bash", "-lc", command}}
	case req.HasTool("shell_command"):
		name, args = "shell_command", map[string]any{"command": command}
	case req.HasTool("exec_command"):
		// Ask to run outside codex's sandbox: the sandbox blocks the network `buzz` needs (and
		// needs bubblewrap, which CI machines may lack). Escalation makes codex ask the client.
		// login=false: a login shell re-reads /etc/profile, which resets PATH and loses the
		// buzz CLI directory buzz-acp put first on it.
		name, args = "exec_command", map[string]any{"cmd": command, "login": false,
			"sandbox_permissions": "require_escalated", "justification": "post the reply to the Buzz relay"}
	default:
		return nil, false
	}
	b, _ := json.Marshal(args)
	return map[string]any{"type": "function_call", "id": fmt.Sprintf("fc_%02d", id), "call_id": fmt.Sprintf("call_%02d", id),
		"name": name, "arguments": string(b), "status": "completed"}, true
}

func (o *OpenAI) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if r.Method != http.MethodPost || r.URL.Path != "/v1/responses" {
		http.NotFound(w, r)
		return
	}
	req, err := ParseResponsesRequest(r.URL.Path, body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	o.add(req)
	n := o.ids.Add(1)
	var item map[string]any
	text := "ok"
	var newest Message
	if len(req.Messages) > 0 {
		newest = req.Messages[len(req.Messages)-1]
	}
	if ch, ev, ok := ReplyTarget(newest.Text); ok && newest.Role == "user" {
		reply := "pong"
		if o.Reply != nil {
			reply = o.Reply(req)
		}
		item, _ = shellCall(req, n, SendCommand(ch, ev, reply))
	} else if newest.HasToolResult {
		text = "Replied."
	}
	if item == nil {
		item = map[string]any{"type": "message", "role": "assistant", "id": fmt.Sprintf("msg_%02d", n), "status": "completed",
			"content": []map[string]any{{"type": "output_text", "text": text, "annotations": []any{}}}}
	}
	respID := fmt.Sprintf("resp_%02d", n)
	w.Header().Set("Content-Type", "text/event-stream")
	seq := 0
	ev := func(name string, v map[string]any) {
		v["type"] = name
		v["sequence_number"] = seq
		seq++
		b, _ := json.Marshal(v)
		writeSSE(w, name, b)
	}
	ev("response.created", map[string]any{"response": map[string]any{"id": respID, "status": "in_progress", "output": []any{}}})
	ev("response.output_item.added", map[string]any{"output_index": 0, "item": item})
	if item["type"] == "message" {
		ev("response.content_part.added", map[string]any{"output_index": 0, "item_id": item["id"], "content_index": 0,
			"part": map[string]any{"type": "output_text", "text": ""}})
		ev("response.output_text.delta", map[string]any{"output_index": 0, "item_id": item["id"], "content_index": 0, "delta": text})
		ev("response.output_text.done", map[string]any{"output_index": 0, "item_id": item["id"], "content_index": 0, "text": text})
	}
	ev("response.output_item.done", map[string]any{"output_index": 0, "item": item})
	ev("response.completed", map[string]any{"response": map[string]any{"id": respID, "status": "completed", "output": []any{item},
		"usage": map[string]any{"input_tokens": 100, "input_tokens_details": map[string]any{"cached_tokens": 0},
			"output_tokens": 10, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": 110}}})
}
