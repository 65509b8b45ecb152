package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/buzz-harness/buzz/internal/protocol/engram"
)

// buzz mcp serves a few CLI commands as MCP tools over stdio. Each tool calls the same function as
// its command and answers with the same JSON, so the two cannot drift. It reads the same global
// settings (BUZZ_RELAY_URL, BUZZ_PRIVATE_KEY, BUZZ_AUTH_TAG), which is what buzz-acp's
// --mcp-command hands its server.

type mcpSendInput struct {
	Channel   string   `json:"channel" jsonschema:"channel UUID"`
	Content   string   `json:"content" jsonschema:"message text"`
	ReplyTo   string   `json:"reply_to,omitempty" jsonschema:"event id to reply to (NIP-10 thread tags are added)"`
	Mentions  []string `json:"mentions,omitempty" jsonschema:"pubkeys to mention, hex or npub; @names in the text are resolved too"`
	Kind      int      `json:"kind,omitempty" jsonschema:"9 (message, default), 45001 (forum post) or 45003 (forum comment)"`
	Broadcast bool     `json:"broadcast,omitempty" jsonschema:"mark the message as a broadcast"`
}

type mcpGetInput struct {
	Channel string `json:"channel" jsonschema:"channel UUID"`
	Limit   int    `json:"limit,omitempty" jsonschema:"maximum messages, 1-200 (default 50)"`
	Since   *int64 `json:"since,omitempty" jsonschema:"only messages at or after this unix time"`
	Before  *int64 `json:"before,omitempty" jsonschema:"only messages at or before this unix time"`
	Kinds   string `json:"kinds,omitempty" jsonschema:"comma-separated kinds (default 9,40002,40008,45001,45003)"`
}

type mcpThreadInput struct {
	Channel    string `json:"channel" jsonschema:"channel UUID"`
	Event      string `json:"event" jsonschema:"any event id in the thread"`
	Limit      int    `json:"limit,omitempty" jsonschema:"maximum replies, 1-500 (default 100)"`
	DepthLimit int    `json:"depth_limit,omitempty" jsonschema:"maximum reply depth"`
}

type mcpReactInput struct {
	Event string `json:"event" jsonschema:"event id to react to"`
	Emoji string `json:"emoji,omitempty" jsonschema:"reaction emoji or +/- (default +)"`
}

type mcpSearchInput struct {
	Query   string `json:"query" jsonschema:"words to search message text for (at most 16 words, 256 bytes)"`
	Channel string `json:"channel,omitempty" jsonschema:"channel UUID to search in (default: every channel you can read)"`
	Limit   int    `json:"limit,omitempty" jsonschema:"maximum messages, 1-100 (default 20)"`
}

type mcpMemGetInput struct {
	Slug string `json:"slug,omitempty" jsonschema:"memory slug (default core, the core profile loaded into every session)"`
}

type mcpMemSetInput struct {
	Slug  string `json:"slug,omitempty" jsonschema:"memory slug (default core)"`
	Value string `json:"value" jsonschema:"the whole new value"`
}

type mcpCanvasGetInput struct {
	Channel string `json:"channel" jsonschema:"channel UUID"`
}

type mcpCanvasSetInput struct {
	Channel string `json:"channel" jsonschema:"channel UUID"`
	Content string `json:"content" jsonschema:"the whole new canvas text"`
}

func (a *app) mcpCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "mcp",
		Short: "Serve messages, threads, reactions, search, the canvas and memory as MCP tools over stdio",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			t := &mcp.IOTransport{Reader: io.NopCloser(a.io.Stdin), Writer: nopWriteCloser{a.io.Stdout}}
			return a.mcpServer().Run(cmd.Context(), t)
		},
	}
}

// mcpServer builds the server. Its tools run on a copy of the app that never reads stdin, which
// carries the protocol: content "-" is sent as written.
func (a *app) mcpServer() *mcp.Server {
	tools := *a
	tools.io.Stdin, tools.literalContent = nil, true
	s := mcp.NewServer(&mcp.Implementation{Name: "buzz", Version: Version}, nil)
	addTool(s, "send_message", "Send a message to a channel, optionally as a reply and with mentions; returns event_id, accepted and mention_pubkeys",
		func(ctx context.Context, in mcpSendInput) (any, error) {
			kind := in.Kind
			if kind == 0 {
				kind = 9
			}
			return tools.send(ctx, sendOptions{channel: in.Channel, content: in.Content, replyTo: in.ReplyTo, mentions: in.Mentions, kind: kind, broadcast: in.Broadcast})
		})
	addTool(s, "get_messages", "Recent channel messages, oldest first",
		func(ctx context.Context, in mcpGetInput) (any, error) {
			return tools.getMessages(ctx, getOptions{channel: in.Channel, kinds: in.Kinds, limit: orDefault(in.Limit, 50), since: in.Since, before: in.Before})
		})
	addTool(s, "get_thread", "A message's whole thread (root and replies), oldest first",
		func(ctx context.Context, in mcpThreadInput) (any, error) {
			return tools.thread(ctx, threadOptions{channel: in.Channel, event: in.Event, limit: orDefault(in.Limit, 100), depth: in.DepthLimit})
		})
	addTool(s, "add_reaction", "React to an event (kind 7)",
		func(ctx context.Context, in mcpReactInput) (any, error) {
			emoji := in.Emoji
			if emoji == "" {
				emoji = "+"
			}
			return tools.react(ctx, in.Event, emoji)
		})
	addTool(s, "get_canvas", "A channel's canvas (latest kind 40100); null if none",
		func(ctx context.Context, in mcpCanvasGetInput) (any, error) {
			return tools.canvasGet(ctx, in.Channel)
		})
	addTool(s, "set_canvas", "Replace a channel's canvas (kind 40100)",
		func(ctx context.Context, in mcpCanvasSetInput) (any, error) {
			return tools.canvasSet(ctx, in.Channel, in.Content)
		})
	addTool(s, "search_messages", "Search message text (NIP-50), best match first; same JSON as buzz messages search",
		func(ctx context.Context, in mcpSearchInput) (any, error) {
			return tools.search(ctx, searchOptions{query: in.Query, channel: in.Channel, limit: orDefault(in.Limit, 20)})
		})
	addTool(s, "get_memory", "Read one of your memories (default: core); same JSON as buzz mem get --json",
		func(ctx context.Context, in mcpMemGetInput) (any, error) {
			return tools.memGet(ctx, tools.memOwner(), orCore(in.Slug))
		})
	addTool(s, "set_memory", "Write one of your memories (default: core); same JSON as buzz mem set --json",
		func(ctx context.Context, in mcpMemSetInput) (any, error) {
			return tools.memSet(ctx, tools.memOwner(), orCore(in.Slug), in.Value)
		})
	return s
}

// memOwner is `buzz mem`'s owner for the agent's side: BUZZ_AGENT_OWNER, else the auth tag's.
func (a *app) memOwner() memOpts {
	return memOpts{owner: strings.TrimSpace(a.io.Env(OwnerEnv))}
}

func orCore(slug string) string {
	if strings.TrimSpace(slug) == "" {
		return engram.CoreSlug
	}
	return slug
}

// addTool registers fn as a tool answering with the command's JSON as text; a command error
// becomes a tool error carrying the CLI's "category: message" text.
func addTool[In any](s *mcp.Server, name, desc string, fn func(context.Context, In) (any, error)) {
	mcp.AddTool(s, &mcp.Tool{Name: name, Description: desc}, func(ctx context.Context, _ *mcp.CallToolRequest, in In) (*mcp.CallToolResult, any, error) {
		out, err := fn(ctx, in)
		if err != nil {
			return toolText(classify(err).Error(), true), nil, nil
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(out); err != nil {
			return toolText("error: encode result: "+err.Error(), true), nil, nil
		}
		return toolText(strings.TrimSuffix(buf.String(), "\n"), false), nil, nil
	})
}

func toolText(text string, isError bool) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: isError, Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

func orDefault(n, def int) int {
	if n == 0 {
		return def
	}
	return n
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
