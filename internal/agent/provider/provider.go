// Package provider talks to LLM APIs for buzz-agent. It hides the wire
// differences between OpenAI-compatible chat completions and Anthropic's
// Messages API behind one small streaming interface, and adds retries with
// backoff for rate limits and server errors.
//
// Both APIs are spoken directly over net/http with one server-sent-events
// decoder: the agent needs streamed text and tool calls only, and the
// official SDKs that did this before were over half of a cold build of buzz
// (docs/benchmarks.md, "First build").
package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Roles of a Message.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool" // the result of one tool call
)

// Message is one entry of a conversation, in a provider-neutral shape that
// buzz-agent also persists in its session files.
type Message struct {
	Role string `json:"role"`
	Text string `json:"text,omitempty"`
	// ToolCalls are the calls an assistant message asked for.
	ToolCalls []ToolCall `json:"toolCalls,omitempty"`
	// ToolCallID and ToolName identify the call a RoleTool message answers.
	ToolCallID string `json:"toolCallId,omitempty"`
	ToolName   string `json:"toolName,omitempty"`
	// IsError marks a failed tool result.
	IsError bool `json:"isError,omitempty"`
}

// ToolCall is a model's request to run one tool.
type ToolCall struct {
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

// Tool describes a tool offered to the model. Schema is a JSON Schema object.
type Tool struct {
	Name        string
	Description string
	Schema      map[string]any
}

// Request is one model call.
type Request struct {
	System   string
	Messages []Message
	Tools    []Tool
}

// Stop reasons a Response can carry (provider values are mapped onto these).
const (
	StopEndTurn   = "end_turn"
	StopToolUse   = "tool_use"
	StopMaxTokens = "max_tokens"
	StopRefusal   = "refusal"
)

// Response is the assistant message a model call produced.
type Response struct {
	Message    Message
	StopReason string
	Usage      Usage
}

// Usage counts tokens.
type Usage struct {
	InputTokens  int64
	OutputTokens int64
}

// Add returns the sum of two usages.
func (u Usage) Add(o Usage) Usage {
	return Usage{InputTokens: u.InputTokens + o.InputTokens, OutputTokens: u.OutputTokens + o.OutputTokens}
}

// Provider performs one streaming model call. onText receives text deltas as
// they arrive; it is called from the calling goroutine.
type Provider interface {
	Name() string
	Complete(ctx context.Context, req Request, onText func(string)) (Response, error)
}

// APIError is a non-2xx answer from a provider, or an error event in its
// stream, reduced to what callers need.
type APIError struct {
	Provider   string
	Status     int
	Message    string
	RetryAfter time.Duration // from a Retry-After header, 0 if absent
	// Streamed is true when text already reached the caller before the
	// failure, so a retry would duplicate it.
	Streamed bool
	// InStream is true when the error came as an event inside a stream that
	// had begun with 200 OK; Status is then the HTTP status the error's type
	// or code stands for (0 when it names none).
	InStream bool
}

func (e *APIError) Error() string {
	hint := ""
	switch e.Status {
	case 401, 403:
		hint = " (check the API key)"
	case 429:
		hint = " (rate limited)"
	}
	msg := e.Message
	if msg == "" {
		msg = "no error message"
	}
	if e.InStream {
		return fmt.Sprintf("%s: error in the response stream: %s%s", e.Provider, msg, hint)
	}
	return fmt.Sprintf("%s: HTTP %d: %s%s", e.Provider, e.Status, msg, hint)
}

// Retryable reports whether the error is worth another attempt: rate limits
// and server errors, as long as nothing was streamed yet.
func (e *APIError) Retryable() bool {
	if e.Streamed {
		return false
	}
	return e.Status == 429 || e.Status >= 500
}

// IsRetryable reports whether err is a retryable APIError.
func IsRetryable(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Retryable()
}
