package provider

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
)

// OpenAIConfig configures an OpenAI-compatible chat-completions provider.
type OpenAIConfig struct {
	APIKey  string
	BaseURL string // e.g. http://127.0.0.1:11434/v1 for Ollama; empty = api.openai.com
	Model   string
	// HTTPClient is optional (tests, proxies).
	HTTPClient *http.Client
}

// DefaultOpenAIModel is used when no model is configured.
const DefaultOpenAIModel = "gpt-4.1-mini"

type openAIProvider struct {
	client openai.Client
	model  string
}

// NewOpenAI returns a Provider for OpenAI chat completions with tool calling.
// The SDK's own retries are off: Retrying does that with an injectable clock.
func NewOpenAI(cfg OpenAIConfig) Provider {
	opts := []option.RequestOption{option.WithMaxRetries(0)}
	// Ollama and friends accept any key, but the SDK insists on one.
	key := cfg.APIKey
	if key == "" {
		key = "none"
	}
	opts = append(opts, option.WithAPIKey(key))
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
	}
	model := cfg.Model
	if model == "" {
		model = DefaultOpenAIModel
	}
	return &openAIProvider{client: openai.NewClient(opts...), model: model}
}

func (p *openAIProvider) Name() string { return "openai" }

func (p *openAIProvider) Complete(ctx context.Context, req Request, onText func(string)) (Response, error) {
	params := openai.ChatCompletionNewParams{
		Model:         shared.ChatModel(p.model),
		Messages:      openAIMessages(req),
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	}
	for _, t := range req.Tools {
		params.Tools = append(params.Tools, openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name:        t.Name,
			Description: openai.String(t.Description),
			Parameters:  shared.FunctionParameters(t.Schema),
		}))
	}

	stream := p.client.Chat.Completions.NewStreaming(ctx, params)
	defer stream.Close()

	var (
		text     strings.Builder
		calls    = map[int64]*ToolCall{}
		args     = map[int64]*strings.Builder{}
		finish   string
		usage    Usage
		streamed bool
	)
	for stream.Next() {
		chunk := stream.Current()
		if chunk.Usage.TotalTokens > 0 || chunk.Usage.PromptTokens > 0 {
			usage = Usage{InputTokens: chunk.Usage.PromptTokens, OutputTokens: chunk.Usage.CompletionTokens}
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
	if err := stream.Err(); err != nil {
		return Response{}, openAIError(err, streamed)
	}

	msg := Message{Role: RoleAssistant, Text: text.String()}
	idx := make([]int64, 0, len(calls))
	for i := range calls {
		idx = append(idx, i)
	}
	sort.Slice(idx, func(a, b int) bool { return idx[a] < idx[b] })
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

func openAIMessages(req Request) []openai.ChatCompletionMessageParamUnion {
	var out []openai.ChatCompletionMessageParamUnion
	if req.System != "" {
		out = append(out, openai.SystemMessage(req.System))
	}
	for _, m := range req.Messages {
		switch m.Role {
		case RoleUser:
			out = append(out, openai.UserMessage(m.Text))
		case RoleTool:
			out = append(out, openai.ToolMessage(m.Text, m.ToolCallID))
		case RoleAssistant:
			a := openai.ChatCompletionAssistantMessageParam{}
			if m.Text != "" {
				a.Content.OfString = openai.String(m.Text)
			}
			for _, c := range m.ToolCalls {
				a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
						ID: c.ID,
						Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{
							Name:      c.Name,
							Arguments: string(c.Input),
						},
					},
				})
			}
			out = append(out, openai.ChatCompletionMessageParamUnion{OfAssistant: &a})
		}
	}
	return out
}

func openAIError(err error, streamed bool) error {
	var oe *openai.Error
	if !errors.As(err, &oe) {
		return err
	}
	ae := &APIError{Provider: "openai", Status: oe.StatusCode, Message: oe.Message, Streamed: streamed}
	if ae.Message == "" {
		ae.Message = rawErrorMessage(oe.RawJSON())
	}
	if oe.Response != nil {
		ae.RetryAfter = parseRetryAfter(oe.Response.Header.Get("Retry-After"))
	}
	return ae
}

// rawErrorMessage digs the human message out of an error body of either
// provider ({"error":{"message":…}} or {"message":…}).
func rawErrorMessage(raw string) string {
	var body struct {
		Message string `json:"message"`
		Error   struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(raw), &body) != nil {
		return strings.TrimSpace(raw)
	}
	if body.Error.Message != "" {
		return body.Error.Message
	}
	return body.Message
}

func parseRetryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil && secs >= 0 {
		return time.Duration(secs * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}
