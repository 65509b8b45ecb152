package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// AnthropicConfig configures the Anthropic Messages API provider.
type AnthropicConfig struct {
	APIKey    string
	BaseURL   string // empty = https://api.anthropic.com (without /v1, as the SDKs take it)
	Model     string
	MaxTokens int64 // per model call; 0 means 8192
	// HTTPClient is optional (tests, proxies).
	HTTPClient *http.Client
}

// DefaultAnthropicModel is used when no model is configured.
const DefaultAnthropicModel = "claude-sonnet-4-5"

const (
	defaultAnthropicBaseURL = "https://api.anthropic.com"
	// anthropicVersion is the Messages API version whose stream events the
	// client below decodes.
	anthropicVersion = "2023-06-01"
)

type anthropicProvider struct {
	cfg    AnthropicConfig
	url    string
	urlErr error
}

// NewAnthropic returns a Provider for Anthropic's Messages API with tool use,
// streamed. It makes one attempt per call: Retrying does the retries.
func NewAnthropic(cfg AnthropicConfig) Provider {
	if cfg.Model == "" {
		cfg.Model = DefaultAnthropicModel
	}
	if cfg.MaxTokens <= 0 {
		cfg.MaxTokens = 8192
	}
	base := cfg.BaseURL
	if base == "" {
		base = defaultAnthropicBaseURL
	}
	p := &anthropicProvider{cfg: cfg}
	p.url, p.urlErr = endpoint(base, "v1/messages")
	return p
}

func (p *anthropicProvider) Name() string { return "anthropic" }

// The Messages request, as much of it as the agent uses.
type (
	messagesRequest struct {
		Model     string             `json:"model"`
		MaxTokens int64              `json:"max_tokens"`
		System    string             `json:"system,omitempty"`
		Messages  []anthropicMessage `json:"messages"`
		Tools     []anthropicTool    `json:"tools,omitempty"`
		Stream    bool               `json:"stream"`
	}
	anthropicMessage struct {
		Role    string           `json:"role"`
		Content []anthropicBlock `json:"content"`
	}
	// anthropicBlock is a text, tool_use or tool_result block.
	anthropicBlock struct {
		Type      string          `json:"type"`
		Text      string          `json:"text,omitempty"`
		ID        string          `json:"id,omitempty"`
		Name      string          `json:"name,omitempty"`
		Input     json.RawMessage `json:"input,omitempty"`
		ToolUseID string          `json:"tool_use_id,omitempty"`
		Content   string          `json:"content,omitempty"`
		IsError   bool            `json:"is_error,omitempty"`
	}
	anthropicTool struct {
		Name        string         `json:"name"`
		Description string         `json:"description"`
		InputSchema map[string]any `json:"input_schema"`
	}
)

// anthropicEvent is one stream event; which fields are set depends on Type.
type anthropicEvent struct {
	Type    string `json:"type"`
	Index   int    `json:"index"`
	Message struct {
		Usage anthropicUsage `json:"usage"`
	} `json:"message"` // message_start
	ContentBlock struct {
		Type string `json:"type"`
		ID   string `json:"id"`
		Name string `json:"name"`
		Text string `json:"text"`
	} `json:"content_block"` // content_block_start
	Delta struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		PartialJSON string `json:"partial_json"`
		StopReason  string `json:"stop_reason"`
	} `json:"delta"` // content_block_delta, message_delta
	Usage anthropicUsage  `json:"usage"` // message_delta
	Error json.RawMessage `json:"error"` // error
}

type anthropicUsage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
}

func (p *anthropicProvider) Complete(ctx context.Context, req Request, onText func(string)) (Response, error) {
	if p.urlErr != nil {
		return Response{}, fmt.Errorf("anthropic: %w", p.urlErr)
	}
	body := messagesRequest{
		Model: p.cfg.Model, MaxTokens: p.cfg.MaxTokens, System: req.System,
		Messages: anthropicMessages(req.Messages), Stream: true,
	}
	for _, t := range req.Tools {
		schema := t.Schema
		if schema == nil {
			schema = map[string]any{"type": "object"}
		}
		body.Tools = append(body.Tools, anthropicTool{Name: t.Name, Description: t.Description, InputSchema: schema})
	}
	header := http.Header{}
	if p.cfg.APIKey != "" {
		header.Set("X-Api-Key", p.cfg.APIKey)
	}
	header.Set("Anthropic-Version", anthropicVersion)
	resp, err := post(ctx, p.cfg.HTTPClient, "anthropic", p.url, header, body)
	if err != nil {
		return Response{}, err
	}
	defer resp.Body.Close()

	type block struct {
		kind  string
		call  ToolCall
		input strings.Builder
	}
	var (
		text     strings.Builder
		blocks   = map[int]*block{}
		order    []int
		stop     string
		usage    Usage
		streamed bool
		done     bool
	)
	say := func(d string) {
		if d == "" {
			return
		}
		text.WriteString(d)
		streamed = true
		if onText != nil {
			onText(d)
		}
	}
	events := newSSEReader(resp.Body)
	for !done {
		sse, err := events.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Response{}, readErr(ctx, "anthropic", err)
		}
		var ev anthropicEvent
		if err := decodeEvent(sse.Data, &ev); err != nil {
			return Response{}, fmt.Errorf("anthropic: %w", err)
		}
		if ev.Type == "" {
			ev.Type = sse.Name
		}
		switch ev.Type {
		case "error":
			return Response{}, anthropicStreamError(ev.Error, streamed)
		case "message_start":
			usage.InputTokens = ev.Message.Usage.InputTokens
			usage.OutputTokens = ev.Message.Usage.OutputTokens
		case "content_block_start":
			b := &block{kind: ev.ContentBlock.Type}
			if b.kind == "tool_use" {
				b.call = ToolCall{ID: ev.ContentBlock.ID, Name: ev.ContentBlock.Name}
			}
			if b.kind == "text" {
				say(ev.ContentBlock.Text)
			}
			if _, seen := blocks[ev.Index]; !seen {
				order = append(order, ev.Index)
			}
			blocks[ev.Index] = b
		case "content_block_delta":
			switch ev.Delta.Type {
			case "text_delta":
				say(ev.Delta.Text)
			case "input_json_delta":
				if b := blocks[ev.Index]; b != nil {
					b.input.WriteString(ev.Delta.PartialJSON)
				}
			}
		case "message_delta":
			if ev.Delta.StopReason != "" {
				stop = ev.Delta.StopReason
			}
			if ev.Usage.OutputTokens > 0 {
				usage.OutputTokens = ev.Usage.OutputTokens
			}
			if ev.Usage.InputTokens > 0 {
				usage.InputTokens = ev.Usage.InputTokens
			}
		case "message_stop":
			done = true
		}
		// ping, content_block_stop and event types added later need nothing.
	}
	// Without message_stop or a stop reason the stream was cut off.
	if !done && stop == "" {
		if ctx.Err() != nil {
			return Response{}, ctx.Err()
		}
		return Response{}, errors.New("anthropic: the response stream ended before the answer was complete")
	}

	msg := Message{Role: RoleAssistant, Text: text.String()}
	for _, i := range order {
		if b := blocks[i]; b.kind == "tool_use" {
			b.call.Input = normalizeArgs(b.input.String())
			msg.ToolCalls = append(msg.ToolCalls, b.call)
		}
	}
	reason := StopEndTurn
	switch {
	case len(msg.ToolCalls) > 0:
		reason = StopToolUse
	case stop == "max_tokens":
		reason = StopMaxTokens
	case stop == "refusal":
		reason = StopRefusal
	}
	return Response{Message: msg, StopReason: reason, Usage: usage}, nil
}

// anthropicMessages maps the neutral history onto Messages API turns: tool
// results become tool_result blocks in a user turn, and consecutive turns of
// the same role are merged so roles alternate.
func anthropicMessages(msgs []Message) []anthropicMessage {
	var out []anthropicMessage
	add := func(role string, b ...anthropicBlock) {
		if len(b) == 0 {
			return
		}
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Content = append(out[n-1].Content, b...)
			return
		}
		out = append(out, anthropicMessage{Role: role, Content: b})
	}
	for _, m := range msgs {
		switch m.Role {
		case RoleUser:
			if m.Text != "" {
				add(RoleUser, anthropicBlock{Type: "text", Text: m.Text})
			}
		case RoleTool:
			content := m.Text
			if content == "" {
				content = "(no output)"
			}
			add(RoleUser, anthropicBlock{Type: "tool_result", ToolUseID: m.ToolCallID, Content: content, IsError: m.IsError})
		case RoleAssistant:
			var b []anthropicBlock
			if m.Text != "" {
				b = append(b, anthropicBlock{Type: "text", Text: m.Text})
			}
			for _, c := range m.ToolCalls {
				b = append(b, anthropicBlock{Type: "tool_use", ID: c.ID, Name: c.Name, Input: normalizeArgs(string(c.Input))})
			}
			add(RoleAssistant, b...)
		}
	}
	return out
}

// anthropicErrorStatus is the HTTP status each documented error type stands
// for, so an error event mid-stream (overloaded_error, most often) is
// retried exactly like the same error as a status would be.
var anthropicErrorStatus = map[string]int{
	"invalid_request_error": 400,
	"authentication_error":  401,
	"billing_error":         402,
	"permission_error":      403,
	"not_found_error":       404,
	"request_too_large":     413,
	"rate_limit_error":      429,
	"api_error":             500,
	"timeout_error":         504,
	"overloaded_error":      529,
}

func anthropicStreamError(raw json.RawMessage, streamed bool) error {
	var e struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(raw, &e)
	return streamError("anthropic", raw, anthropicErrorStatus[e.Type], streamed)
}
