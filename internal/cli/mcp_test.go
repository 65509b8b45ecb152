package cli_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/relay/relaytest"
)

// mcpSession starts a real `buzz mcp` process as u and connects to it over stdio.
func (u *user) mcpSession(ctx context.Context) *mcp.ClientSession {
	return u.mcpSessionOf(ctx, exec.Command(buzzBin(u.t), "mcp"))
}

// mcpSessionOf is mcpSession with the server's command given; env entries are added to its
// environment.
func (u *user) mcpSessionOf(ctx context.Context, cmd *exec.Cmd, env ...string) *mcp.ClientSession {
	u.t.Helper()
	cmd.Env = append(os.Environ(), "BUZZ_RELAY_URL="+u.relay, "BUZZ_PRIVATE_KEY="+protocol.Nsec(u.sk), "BUZZ_TIMEOUT_SECS=10")
	cmd.Env = append(cmd.Env, env...)
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		u.t.Fatalf("connect to buzz mcp: %v", err)
	}
	u.t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// callTool calls a tool and returns its text answer and whether it is a tool error.
func callTool(t *testing.T, ctx context.Context, cs *mcp.ClientSession, name string, args map[string]any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if len(res.Content) != 1 {
		t.Fatalf("%s: %d content blocks", name, len(res.Content))
	}
	text, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("%s: content is %T, want text", name, res.Content[0])
	}
	return text.Text, res.IsError
}

func TestMCPServerListsToolsAndItsSendIsReadByTheCLI(t *testing.T) {
	t.Parallel()
	s := relaytest.Start(t)
	alice := newUser(t, s.URL)
	ch := alice.createChannel("mcp", false)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs := alice.mcpSession(ctx)
	if info := cs.InitializeResult(); info == nil || info.ServerInfo.Name != "buzz" || info.Capabilities.Tools == nil {
		t.Fatalf("initialize result %+v", info)
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	if want := []string{"add_reaction", "get_canvas", "get_memory", "get_messages", "get_thread", "search_messages", "send_message", "set_canvas", "set_memory"}; !slices.Equal(names, want) {
		t.Fatalf("tools %v, want %v", names, want)
	}

	var root sent
	alice.ok(&root, "", "messages", "send", "--channel", ch, "--content", "root via CLI")
	text, isErr := callTool(t, ctx, cs, "send_message", map[string]any{
		"channel": ch, "content": "reply via MCP", "reply_to": root.EventID, "mentions": []string{alice.pk},
	})
	var reply sent
	if err := json.Unmarshal([]byte(text), &reply); err != nil || isErr || !reply.Accepted || !slices.Equal(reply.MentionPubkeys, []string{alice.pk}) {
		t.Fatalf("send_message answered %q (error %v)", text, isErr)
	}
	var thread []msg
	alice.ok(&thread, "", "messages", "thread", "--channel", ch, "--event", root.EventID)
	if len(thread) != 2 || thread[1].ID != reply.EventID || thread[1].Content != "reply via MCP" {
		t.Fatalf("CLI thread after MCP reply = %+v", thread)
	}

	// Tool and command answer with the same JSON.
	cliThread := alice.buzz("", "messages", "thread", "--channel", ch, "--event", root.EventID)
	if toolThread, _ := callTool(t, ctx, cs, "get_thread", map[string]any{"channel": ch, "event": root.EventID}); toolThread != strings.TrimSpace(cliThread.stdout) {
		t.Fatalf("get_thread\n got %s\nwant %s", toolThread, cliThread.stdout)
	}
	if text, isErr := callTool(t, ctx, cs, "set_canvas", map[string]any{"channel": ch, "content": "# Plan"}); isErr {
		t.Fatalf("set_canvas: %s", text)
	}
	cliCanvas := alice.buzz("", "canvas", "get", "--channel", ch)
	if toolCanvas, _ := callTool(t, ctx, cs, "get_canvas", map[string]any{"channel": ch}); toolCanvas != strings.TrimSpace(cliCanvas.stdout) || !strings.Contains(toolCanvas, `"# Plan"`) {
		t.Fatalf("get_canvas\n got %s\nwant %s", toolCanvas, cliCanvas.stdout)
	}
	if text, isErr := callTool(t, ctx, cs, "add_reaction", map[string]any{"event": reply.EventID, "emoji": "🚀"}); isErr || !strings.Contains(text, `"accepted":true`) {
		t.Fatalf("add_reaction: %s", text)
	}
	if got, _ := callTool(t, ctx, cs, "get_messages", map[string]any{"channel": ch}); !strings.Contains(got, "reply via MCP") {
		t.Fatalf("get_messages: %s", got)
	}
}

func TestMCPToolErrorCarriesTheCLIErrorTextAndDashIsText(t *testing.T) {
	t.Parallel()
	s := relaytest.Start(t)
	alice := newUser(t, s.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs := alice.mcpSession(ctx)
	text, isErr := callTool(t, ctx, cs, "send_message", map[string]any{"channel": "not-a-uuid", "content": "x"})
	if want := `user_error: --channel must be a channel UUID, got "not-a-uuid"`; !isErr || text != want {
		t.Fatalf("bad channel answered %q (error %v); want the tool error %q", text, isErr, want)
	}
	// "-" is text here: stdin carries the protocol and must never be read as content.
	ch := alice.createChannel("dash", false)
	if text, isErr := callTool(t, ctx, cs, "send_message", map[string]any{"channel": ch, "content": "-"}); isErr {
		t.Fatalf("content - answered %q", text)
	}
	var got []msg
	alice.ok(&got, "", "messages", "get", "--channel", ch)
	if len(got) != 1 || got[0].Content != "-" {
		t.Fatalf("messages after sending \"-\": %+v", got)
	}
}

func TestBuzzRunAsBuzzMcpIsTheMCPServerWithoutArguments(t *testing.T) {
	t.Parallel()
	s := relaytest.Start(t)
	alice := newUser(t, s.URL)
	link := filepath.Join(t.TempDir(), "buzz-mcp")
	if err := os.Symlink(buzzBin(t), link); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs := alice.mcpSessionOf(ctx, exec.Command(link)) // as buzz-acp's --mcp-command runs it: no args
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) != 9 {
		t.Fatalf("tools %+v, err %v", tools, err)
	}
}

func TestMCPSearchFindsMessagesByTheirWords(t *testing.T) {
	t.Parallel()
	s := relaytest.Start(t)
	alice := newUser(t, s.URL)
	ch := alice.createChannel("search", false)
	alice.ok(nil, "", "messages", "send", "--channel", ch, "--content", "the walrus deploy is green")
	alice.ok(nil, "", "messages", "send", "--channel", ch, "--content", "lunch at noon")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs := alice.mcpSession(ctx)
	text, isErr := callTool(t, ctx, cs, "search_messages", map[string]any{"query": "walrus", "channel": ch})
	var got []msg
	if err := json.Unmarshal([]byte(text), &got); err != nil || isErr || len(got) != 1 || got[0].Content != "the walrus deploy is green" {
		t.Fatalf("search_messages answered %s (error %v)", text, isErr)
	}
	if text, isErr := callTool(t, ctx, cs, "search_messages", map[string]any{"query": "  "}); !isErr || !strings.Contains(text, "needs --query") {
		t.Fatalf("empty query answered %q (error %v)", text, isErr)
	}
}

func TestMCPMemoryToolsReadAndWriteWhatBuzzMemSees(t *testing.T) {
	t.Parallel()
	s := relaytest.Start(t)
	agent, owner := newUser(t, s.URL), newUser(t, s.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// As buzz-acp sets it for its agents; only the server has it: the CLI calls below name the
	// owner or agent.
	cs := agent.mcpSessionOf(ctx, exec.Command(buzzBin(t), "mcp"), "BUZZ_AGENT_OWNER="+owner.pk)

	text, isErr := callTool(t, ctx, cs, "set_memory", map[string]any{"value": "I am the release bot"})
	if isErr || !strings.Contains(text, `"slug":"core"`) || !strings.Contains(text, `"accepted":true`) {
		t.Fatalf("set_memory answered %s (error %v)", text, isErr)
	}
	var asOwner memValue
	owner.ok(&asOwner, "", "mem", "get", "core", "--agent", agent.pk, "--json")
	if asOwner.Value != "I am the release bot" {
		t.Fatalf("the owner reads %+v", asOwner)
	}
	cli := agent.buzz("", "mem", "get", "core", "--owner", owner.pk, "--json")
	if got, _ := callTool(t, ctx, cs, "get_memory", map[string]any{}); got != strings.TrimSpace(cli.stdout) {
		t.Fatalf("get_memory\n got %s\nwant %s", got, cli.stdout)
	}
	if text, isErr := callTool(t, ctx, cs, "get_memory", map[string]any{"slug": "nothing"}); !isErr || !strings.HasPrefix(text, "not_found") {
		t.Fatalf("unknown slug answered %q (error %v)", text, isErr)
	}
}
