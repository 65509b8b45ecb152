package provider

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
)

// AnthropicConfig configures the Anthropic Messages API provider.
type AnthropicConfig struct {
	APIKey    string
	BaseURL   string // empty = api.anthropic.com
	Model     string
	MaxTokens int64 // per model call; 0 means 8192
	// HTTPClient is optional (tests, proxies).
	HTTPClient *http.Client
}

// DefaultAnthropicModel is used when no model is configured.
const DefaultAnthropicModel = "claude-sonnet-4-5"

type anthropicProvider struct {
	client    anthropic.Client
	model     string
	maxTokens int64
}

// NewAnthropic returns a Provider for Anthropic's Messages API with tool use.
// Environment defaults of the SDK are off: the caller resolved the key and
// base URL already, and Retrying owns retries.
func NewAnthropic(cfg AnthropicConfig) Provider {
	opts := []option.RequestOption{
		option.WithoutEnvironmentDefaults(),
		option.WithMaxRetries(0),
		option.WithAPIKey(cfg.APIKey),
	}
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
	}
	model := cfg.Model
	if model == "" {
		model = DefaultAnthropicModel
	}
	maxTokens := cfg.MaxTokens
	if maxTokens <= 0 {
		maxTokens = 8192
	}
	return &anthropicProvider{client: anthropic.NewClient(opts...), model: model, maxTokens: maxTokens}
}

func (p *anthropicProvider) Name() string { return "anthropic" }

func (p *anthropicProvider) Complete(ctx context.Context, req Request, onText func(string)) (Response, error) {
	params := anthropic.MessageNewParams{
		Model:     anthropic.Model(p.model),
		MaxTokens: p.maxTokens,
		Messages:  anthropicMessages(req.Messages),
	}
	if req.System != "" {
		params.System = []anthropic.TextBlockParam{{Text: req.System}}
	}
	for _, t := range req.Tools {
		schema := anthropic.ToolInputSchemaParam{Properties: t.Schema["properties"]}
		if req, ok := t.Schema["required"].([]string); ok {
			schema.Required = req
		}
		params.Tools = append(params.Tools, anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{
			Name:        t.Name,
			Description: anthropic.String(t.Description),
			InputSchema: schema,
		}})
	}

	stream := p.client.Messages.NewStreaming(ctx, params)
	defer stream.Close()

	type block struct {
		kind  string
		call  ToolCall
		input strings.Builder
	}
	var (
		text     strings.Builder
		blocks   = map[int64]*block{}
		order    []int64
		stop     string
		usage    Usage
		streamed bool
	)
	for stream.Next() {
		ev := stream.Current()
		switch ev.Type {
		case "message_start":
			usage.InputTokens = ev.Message.Usage.InputTokens
			usage.OutputTokens = ev.Message.Usage.OutputTokens
		case "content_block_start":
			b := &block{kind: ev.ContentBlock.Type}
			if b.kind == "tool_use" {
				b.call = ToolCall{ID: ev.ContentBlock.ID, Name: ev.ContentBlock.Name}
			}
			if b.kind == "text" && ev.ContentBlock.Text != "" {
				text.WriteString(ev.ContentBlock.Text)
				streamed = true
				if onText != nil {
					onText(ev.ContentBlock.Text)
				}
			}
			blocks[ev.Index] = b
			order = append(order, ev.Index)
		case "content_block_delta":
			b := blocks[ev.Index]
			switch ev.Delta.Type {
			case "text_delta":
				text.WriteString(ev.Delta.Text)
				streamed = true
				if onText != nil && ev.Delta.Text != "" {
					onText(ev.Delta.Text)
				}
			case "input_json_delta":
				if b != nil {
					b.input.WriteString(ev.Delta.PartialJSON)
				}
			}
		case "message_delta":
			if ev.Delta.StopReason != "" {
				stop = string(ev.Delta.StopReason)
			}
			if ev.Usage.OutputTokens > 0 {
				usage.OutputTokens = ev.Usage.OutputTokens
			}
			if ev.Usage.InputTokens > 0 {
				usage.InputTokens = ev.Usage.InputTokens
			}
		}
	}
	if err := stream.Err(); err != nil {
		return Response{}, anthropicError(err, streamed)
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
	case stop == string(anthropic.StopReasonMaxTokens):
		reason = StopMaxTokens
	case stop == string(anthropic.StopReasonRefusal):
		reason = StopRefusal
	}
	return Response{Message: msg, StopReason: reason, Usage: usage}, nil
}

// anthropicMessages maps the neutral history onto Messages API turns: tool
// results become tool_result blocks in a user turn, and consecutive turns of
// the same role are merged so roles alternate.
func anthropicMessages(msgs []Message) []anthropic.MessageParam {
	type turn struct {
		role   string
		blocks []anthropic.ContentBlockParamUnion
	}
	var turns []turn
	add := func(role string, b ...anthropic.ContentBlockParamUnion) {
		if len(b) == 0 {
			return
		}
		if n := len(turns); n > 0 && turns[n-1].role == role {
			turns[n-1].blocks = append(turns[n-1].blocks, b...)
			return
		}
		turns = append(turns, turn{role: role, blocks: b})
	}
	for _, m := range msgs {
		switch m.Role {
		case RoleUser:
			if m.Text != "" {
				add(RoleUser, anthropic.NewTextBlock(m.Text))
			}
		case RoleTool:
			content := m.Text
			if content == "" {
				content = "(no output)"
			}
			add(RoleUser, anthropic.NewToolResultBlock(m.ToolCallID, content, m.IsError))
		case RoleAssistant:
			var b []anthropic.ContentBlockParamUnion
			if m.Text != "" {
				b = append(b, anthropic.NewTextBlock(m.Text))
			}
			for _, c := range m.ToolCalls {
				b = append(b, anthropic.NewToolUseBlock(c.ID, c.Input, c.Name))
			}
			add(RoleAssistant, b...)
		}
	}
	out := make([]anthropic.MessageParam, 0, len(turns))
	for _, t := range turns {
		if t.role == RoleUser {
			out = append(out, anthropic.NewUserMessage(t.blocks...))
		} else {
			out = append(out, anthropic.NewAssistantMessage(t.blocks...))
		}
	}
	return out
}

func anthropicError(err error, streamed bool) error {
	var ae *anthropic.Error
	if !errors.As(err, &ae) {
		return err
	}
	out := &APIError{Provider: "anthropic", Status: ae.StatusCode, Message: rawErrorMessage(ae.RawJSON()), Streamed: streamed}
	if ae.Response != nil {
		out.RetryAfter = parseRetryAfter(ae.Response.Header.Get("Retry-After"))
	}
	return out
}
