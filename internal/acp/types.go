package acp

import (
	"encoding/base64"
	"encoding/json"
	"strings"
)

// Wire shapes shared by both sides. Optional and open-ended parts stay json.RawMessage so
// nothing the peer sent is lost or rewritten.

// ProtocolVersion is the ACP version we speak (v2 is a draft with a different shape).
const ProtocolVersion = 1

// ContentBlock is a content block of a prompt: text, or an image (base64 Data and its
// MimeType) for an agent that advertises promptCapabilities.image.
type ContentBlock struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Data     string `json:"data,omitempty"`
	MimeType string `json:"mimeType,omitempty"`
}

// MarshalJSON writes each kind of block with exactly its own fields: a text block always has
// its text (even empty), an image block has none.
func (b ContentBlock) MarshalJSON() ([]byte, error) {
	if b.Type == "image" {
		return json.Marshal(struct {
			Type     string `json:"type"`
			Data     string `json:"data"`
			MimeType string `json:"mimeType"`
		}{b.Type, b.Data, b.MimeType})
	}
	return json.Marshal(struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}{b.Type, b.Text})
}

// TextBlock is a convenience constructor.
func TextBlock(text string) ContentBlock { return ContentBlock{Type: "text", Text: text} }

// ImageBlock is an image content block of data (raw bytes, base64-encoded here).
func ImageBlock(mimeType string, data []byte) ContentBlock {
	return ContentBlock{Type: "image", MimeType: mimeType, Data: base64.StdEncoding.EncodeToString(data)}
}

// SystemPrompt is the (unstable) spec systemPrompt object for session/new|load|resume.
type SystemPrompt struct {
	Mode    string         `json:"mode"`
	Content []ContentBlock `json:"content"`
}

// Implementation names a client or agent (clientInfo / agentInfo).
type Implementation struct {
	Name    string `json:"name"`
	Title   string `json:"title,omitempty"`
	Version string `json:"version"`
}

// InitializeParams is what a client sends in initialize.
type InitializeParams struct {
	ProtocolVersion    int             `json:"protocolVersion"`
	ClientCapabilities json.RawMessage `json:"clientCapabilities,omitempty"`
	ClientInfo         *Implementation `json:"clientInfo,omitempty"`
	Meta               map[string]any  `json:"_meta,omitempty"`
}

// McpServer is an MCP server entry of session/new, session/load and session/resume: stdio
// (Command, Args, Env) unless URL is set, then HTTP (URL, Headers). ACP's stdio shape has no
// "type" and requires args and env even when empty; the HTTP one is
// {type:"http", name, url, headers}. Env and headers are lists of {name, value} pairs.
type McpServer struct {
	Name    string
	Command string
	Args    []string
	Env     []EnvVariable
	URL     string
	Headers []EnvVariable // the same {name, value} shape as env (ACP's HttpHeader)
}

// MarshalJSON writes the entry in its transport's ACP shape.
func (m McpServer) MarshalJSON() ([]byte, error) {
	if m.URL != "" {
		headers := m.Headers
		if headers == nil {
			headers = []EnvVariable{}
		}
		return json.Marshal(struct {
			Type    string        `json:"type"`
			Name    string        `json:"name"`
			URL     string        `json:"url"`
			Headers []EnvVariable `json:"headers"`
		}{"http", m.Name, m.URL, headers})
	}
	args, env := m.Args, m.Env
	if args == nil {
		args = []string{}
	}
	if env == nil {
		env = []EnvVariable{}
	}
	return json.Marshal(struct {
		Name    string        `json:"name"`
		Command string        `json:"command"`
		Args    []string      `json:"args"`
		Env     []EnvVariable `json:"env"`
	}{m.Name, m.Command, args, env})
}

// EnvVariable is one {name, value} pair of an McpServer's env.
type EnvVariable struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// SessionSetupParams covers session/new (no SessionID), session/load and session/resume.
type SessionSetupParams struct {
	SessionID    string            `json:"sessionId,omitempty"`
	Cwd          string            `json:"cwd"`
	McpServers   []json.RawMessage `json:"mcpServers"`
	SystemPrompt *SystemPrompt     `json:"systemPrompt,omitempty"`
	Meta         map[string]any    `json:"_meta,omitempty"`
}

// PromptParams is session/prompt's params.
type PromptParams struct {
	SessionID string         `json:"sessionId"`
	Prompt    []ContentBlock `json:"prompt"`
	Meta      map[string]any `json:"_meta,omitempty"`
}

// PromptResponse is session/prompt's result.
type PromptResponse struct {
	StopReason string          `json:"stopReason"`
	Usage      json.RawMessage `json:"usage,omitempty"`
}

// SessionIDParams is {sessionId} (session/cancel, session/close).
type SessionIDParams struct {
	SessionID string `json:"sessionId"`
}

// Permission option kinds.
const (
	KindAllowOnce    = "allow_once"
	KindAllowAlways  = "allow_always"
	KindRejectOnce   = "reject_once"
	KindRejectAlways = "reject_always"
)

// PermissionOption is one choice offered in session/request_permission.
type PermissionOption struct {
	OptionID string `json:"optionId"`
	Name     string `json:"name"`
	Kind     string `json:"kind"`
}

// PermissionRequest is session/request_permission's params.
type PermissionRequest struct {
	SessionID string             `json:"sessionId"`
	ToolCall  json.RawMessage    `json:"toolCall,omitempty"`
	Options   []PermissionOption `json:"options"`
}

// PermissionOutcome is the inner outcome of a permission answer.
type PermissionOutcome struct {
	Outcome  string `json:"outcome"` // "selected" | "cancelled"
	OptionID string `json:"optionId,omitempty"`
}

// PermissionResponse is session/request_permission's result.
type PermissionResponse struct {
	Outcome PermissionOutcome `json:"outcome"`
}

// Update kinds the harness looks at (others pass through verbatim).
const (
	UpdateUserMessageChunk  = "user_message_chunk"
	UpdateAgentMessageChunk = "agent_message_chunk"
	UpdateAgentThoughtChunk = "agent_thought_chunk"
	UpdateToolCall          = "tool_call"
	UpdateToolCallUpdate    = "tool_call_update"
)

// SessionUpdate is a decoded view of one session/update notification; Raw is its params verbatim.
type SessionUpdate struct {
	SessionID  string
	Kind       string // update.sessionUpdate
	Replay     bool   // received while a session/load for this session was outstanding
	Text       string // content.text for *_chunk kinds
	ToolCallID string
	Title      string
	Status     string
	Raw        json.RawMessage
}

// ParseSessionUpdate decodes what it can of session/update params and never fails: fields of
// unexpected type are left empty, unknown kinds keep their name.
func ParseSessionUpdate(params json.RawMessage) SessionUpdate {
	// Fast path: one decode pass (updates can be many MiB); the lenient path handles odd types.
	var fast struct {
		SessionID string `json:"sessionId"`
		Update    struct {
			SessionUpdate string `json:"sessionUpdate"`
			Content       *struct {
				Text string `json:"text"`
			} `json:"content"`
			ToolCallID string `json:"toolCallId"`
			Title      string `json:"title"`
			Status     string `json:"status"`
		} `json:"update"`
	}
	if json.Unmarshal(params, &fast) == nil {
		u := SessionUpdate{Raw: params, SessionID: fast.SessionID, Kind: fast.Update.SessionUpdate,
			ToolCallID: fast.Update.ToolCallID, Title: fast.Update.Title, Status: fast.Update.Status}
		if strings.HasSuffix(u.Kind, "_chunk") && fast.Update.Content != nil {
			u.Text = fast.Update.Content.Text
		}
		return u
	}
	u := SessionUpdate{Raw: params}
	top := object(params)
	u.SessionID = str(top["sessionId"])
	upd := object(top["update"])
	u.Kind = str(upd["sessionUpdate"])
	if strings.HasSuffix(u.Kind, "_chunk") {
		u.Text = str(object(upd["content"])["text"])
	}
	u.ToolCallID = str(upd["toolCallId"])
	u.Title = str(upd["title"])
	u.Status = str(upd["status"])
	return u
}

// TextChunk builds an update such as agent_message_chunk carrying a text block.
func TextChunk(kind, text string) map[string]any {
	return map[string]any{"sessionUpdate": kind, "content": TextBlock(text)}
}

// SendUpdate sends a session/update notification (agent side).
func SendUpdate(c *Conn, sessionID string, update any) error {
	return c.Notify("session/update", map[string]any{"sessionId": sessionID, "update": update})
}

// Lenient field helpers: wrong types yield zero values instead of failing the whole decode.

func object(raw json.RawMessage) map[string]json.RawMessage {
	var m map[string]json.RawMessage
	if len(raw) == 0 || json.Unmarshal(raw, &m) != nil {
		return nil
	}
	return m
}

func str(raw json.RawMessage) string {
	var s string
	if len(raw) == 0 || json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

func boolean(raw json.RawMessage) bool {
	var b bool
	if len(raw) == 0 || json.Unmarshal(raw, &b) != nil {
		return false
	}
	return b
}

func integer(raw json.RawMessage) int {
	var f float64
	if len(raw) == 0 || json.Unmarshal(raw, &f) != nil {
		return 0
	}
	return int(f)
}

func present(raw json.RawMessage) bool {
	return len(raw) > 0 && string(raw) != "null"
}
