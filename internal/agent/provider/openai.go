package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
)

// OpenAIConfig configures an OpenAI-compatible chat-completions provider.
type OpenAIConfig struct {
	APIKey  string
	BaseURL string // e.g. http://127.0.0.1:11434/v1 for Ollama; empty = https://api.openai.com/v1
	Model   string
	// Organization and Project, when set, are sent as the OpenAI-Organization
	// and OpenAI-Project headers (OPENAI_ORG_ID, OPENAI_PROJECT_ID).
	Organization, Project string
	// HTTPClient is optional (tests, proxies).
	HTTPClient *http.Client
}

// DefaultOpenAIModel is used when no model is configured.
const DefaultOpenAIModel = "gpt-4.1-mini"

const defaultOpenAIBaseURL = "https://api.openai.com/v1"

type openAIProvider struct {
	cfg    OpenAIConfig
	url    string
	urlErr error
}

// NewOpenAI returns a Provider for OpenAI chat completions with tool calling,
// streamed. It makes one attempt per call: Retrying does the retries.
func NewOpenAI(cfg OpenAIConfig) Provider {
	if cfg.Model == "" {
		cfg.Model = DefaultOpenAIModel
	}
	base := cfg.BaseURL
	if base == "" {
		base = defaultOpenAIBaseURL
	}
	p := &openAIProvider{cfg: cfg}
	p.url, p.urlErr = endpoint(base, "chat/completions")
	return p
}

func (p *openAIProvider) Name() string { return "openai" }

// The chat-completions request, as much of it as the agent uses.
type (
	chatRequest struct {
		Model         string        `json:"model"`
		Messages      []chatMessage `json:"messages"`
		Tools         []chatTool    `json:"tools,omitempty"`
		Stream        bool          `json:"stream"`
		StreamOptions struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	chatMessage struct {
		Role       string         `json:"role"`
		Content    *string        `json:"content,omitempty"` // absent on an assistant turn that only calls tools
		ToolCalls  []chatToolCall `json:"tool_calls,omitempty"`
		ToolCallID string         `json:"tool_call_id,omitempty"`
	}
	chatToolCall struct {
		ID       string `json:"id"`
		Type     string `json:"type"` // "function"
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"` // JSON text, as the API wants it
		} `json:"function"`
	}
	chatTool struct {
		Type     string `json:"type"` // "function"
		Function struct {
			Name        string         `json:"name"`
			Description string         `json:"description"`
			Parameters  map[string]any `json:"parameters,omitempty"`
		} `json:"function"`
	}
)

// chatChunk is one streamed chat.completion.chunk (or an error event).
type chatChunk struct {
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Content   string `json:"content"`
			ToolCalls []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
		TotalTokens      int64 `json:"total_tokens"`
	} `json:"usage"`
	Error json.RawMessage `json:"error"`
}

func (p *openAIProvider) Complete(ctx context.Context, req Request, onText func(string)) (Response, error) {
	if p.urlErr != nil {
		return Response{}, fmt.Errorf("openai: %w", p.urlErr)
	}
	body := chatRequest{Model: p.cfg.Model, Messages: openAIMessages(req), Stream: true}
	body.StreamOptions.IncludeUsage = true
	for _, t := range req.Tools {
		var ct chatTool
		ct.Type = "function"
		ct.Function.Name, ct.Function.Description, ct.Function.Parameters = t.Name, t.Description, t.Schema
		body.Tools = append(body.Tools, ct)
	}
	header := http.Header{}
	// Local servers (Ollama, llama.cpp) take no key; send none rather than a made-up one.
	if p.cfg.APIKey != "" {
		header.Set("Authorization", "Bearer "+p.cfg.APIKey)
	}
	if p.cfg.Organization != "" {
		header.Set("OpenAI-Organization", p.cfg.Organization)
	}
	if p.cfg.Project != "" {
		header.Set("OpenAI-Project", p.cfg.Project)
	}
	resp, err := post(ctx, p.cfg.HTTPClient, "openai", p.url, header, body)
	if err != nil {
		return Response{}, err
	}
	defer resp.Body.Close()

	var (
		text     strings.Builder
		calls    = map[int]*ToolCall{}
		args     = map[int]*strings.Builder{}
		finish   string
		usage    Usage
		streamed bool
		done     bool
	)
	events := newSSEReader(resp.Body)
	for !done {
		ev, err := events.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Response{}, readErr(ctx, "openai", err)
		}
		if strings.TrimSpace(ev.Data) == "[DONE]" {
			done = true
			break
		}
		var chunk chatChunk
		if err := decodeEvent(ev.Data, &chunk); err != nil {
			return Response{}, fmt.Errorf("openai: %w", err)
		}
		if len(chunk.Error) > 0 && string(chunk.Error) != "null" {
			return Response{}, openAIStreamError(chunk.Error, streamed)
		}
		if u := chunk.Usage; u != nil && (u.TotalTokens > 0 || u.PromptTokens > 0) {
			usage = Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens}
		}
		for _, ch := range chunk.Choices {
			if ch.Index != 0 {
				continue
			}
			if d := ch.Delta.Content; d != "" {
				text.WriteString(d)
				streamed = true
				if onText != nil {
					onText(d)
				}
			}
			for _, tc := range ch.Delta.ToolCalls {
				c, ok := calls[tc.Index]
				if !ok {
					c = &ToolCall{}
					calls[tc.Index] = c
					args[tc.Index] = &strings.Builder{}
				}
				if tc.ID != "" {
					c.ID = tc.ID
				}
				if tc.Function.Name != "" {
					c.Name = tc.Function.Name
				}
				args[tc.Index].WriteString(tc.Function.Arguments)
			}
			if ch.FinishReason != "" {
				finish = ch.FinishReason
			}
		}
	}
	// A stream that stops with neither [DONE] nor a finish reason was cut off:
	// what arrived may be half an answer or half a tool call.
	if !done && finish == "" {
		if ctx.Err() != nil {
			return Response{}, ctx.Err()
		}
		return Response{}, errors.New("openai: the response stream ended before the answer was complete")
	}

	msg := Message{Role: RoleAssistant, Text: text.String()}
	idx := make([]int, 0, len(calls))
	for i := range calls {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	for n, i := range idx {
		c := calls[i]
		c.Input = normalizeArgs(args[i].String())
		if c.ID == "" {
			c.ID = "call_" + strconv.Itoa(n)
		}
		msg.ToolCalls = append(msg.ToolCalls, *c)
	}
	stop := StopEndTurn
	switch {
	case len(msg.ToolCalls) > 0:
		stop = StopToolUse
	case finish == "length":
		stop = StopMaxTokens
	case finish == "content_filter":
		stop = StopRefusal
	}
	return Response{Message: msg, StopReason: stop, Usage: usage}, nil
}

// normalizeArgs keeps tool arguments valid JSON so the history can be
// re-sent; a model that produced garbage gets an empty object instead.
func normalizeArgs(s string) json.RawMessage {
	s = strings.TrimSpace(s)
	if s == "" || !json.Valid([]byte(s)) {
		return json.RawMessage("{}")
	}
	return json.RawMessage(s)
}

func openAIMessages(req Request) []chatMessage {
	var out []chatMessage
	if req.System != "" {
		out = append(out, chatMessage{Role: "system", Content: &req.System})
	}
	for _, m := range req.Messages {
		text := m.Text
		switch m.Role {
		case RoleUser:
			out = append(out, chatMessage{Role: "user", Content: &text})
		case RoleTool:
			out = append(out, chatMessage{Role: "tool", Content: &text, ToolCallID: m.ToolCallID})
		case RoleAssistant:
			a := chatMessage{Role: "assistant"}
			if text != "" || len(m.ToolCalls) == 0 {
				a.Content = &text
			}
			for _, c := range m.ToolCalls {
				tc := chatToolCall{ID: c.ID, Type: "function"}
				tc.Function.Name, tc.Function.Arguments = c.Name, string(c.Input)
				a.ToolCalls = append(a.ToolCalls, tc)
			}
			out = append(out, a)
		}
	}
	return out
}

// openAIStreamError turns an error event inside a 200 stream (vLLM, Ollama,
// proxies send these) into an APIError. Its status is the error's numeric
// code when it has one, 500 for a server_error, else 0 (not retried).
func openAIStreamError(raw json.RawMessage, streamed bool) error {
	var e struct {
		Type string          `json:"type"`
		Code json.RawMessage `json:"code"`
	}
	_ = json.Unmarshal(raw, &e)
	status := 0
	if n, err := strconv.Atoi(string(e.Code)); err == nil && n >= 400 && n <= 599 {
		status = n
	} else if e.Type == "server_error" {
		status = http.StatusInternalServerError
	}
	return streamError("openai", raw, status, streamed)
}
