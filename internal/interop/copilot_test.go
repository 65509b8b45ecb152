package interop

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/buzz-harness/buzz/internal/fakemodel"
)

var copilotCLI = adapter{"copilot-1.0.102", "@github/copilot", "1.0.102", "npm-loader.js"}

// copilotEnv is what Copilot CLI needs to run offline: offline mode (no GitHub sign-in, telemetry
// or updates) and its BYOK provider, OpenAI chat completions by default, at the fake server. Its
// state lives in $HOME/.copilot, the stack's home. Its permission requests (the shell asks for
// each command) are answered by buzz-acp, so no allow-all is needed.
func copilotEnv(m *fakemodel.Server) []string {
	return []string{"COPILOT_OFFLINE=true", "COPILOT_PROVIDER_BASE_URL=" + m.BaseURL, "COPILOT_MODEL=gpt-mock"}
}

func TestCopilotRepliesWithItsShellAndLoadsItsSessionAcrossSIGKILL(t *testing.T) {
	t.Parallel()
	node, script := copilotCLI.command(t)
	m := fakemodel.NewOpenAI(t, ChatScript(rememberCodeword))
	s := newStack(t)
	run := func() agentRun {
		return agentRun{node, []string{script, "--acp"}, copilotEnv(m)}
	}
	repliesAndResumesAcrossSIGKILL(t, s, m, run, "session/load")
}

// copilotMCPSend is the tool Copilot makes of buzz mcp's send_message: <server name>-<tool>.
const copilotMCPSend = "buzz-mcp-send_message"

// mcpSendScript plays the model for an agent that offers the Buzz MCP tools: a user message
// naming a channel and event gets a send_message call (no shell); the tool result ends the turn.
func mcpSendScript(tool, content string) fakemodel.Script {
	return func(n int, r fakemodel.Request) fakemodel.Reply {
		rep := fakemodel.Reply{Text: []string{"ok"}, InputTokens: 100, OutputTokens: 10}
		last := r.Last()
		if ch, ev, ok := ReplyTarget(last.Text); ok && last.Role == "user" && r.HasTool(tool) {
			args, _ := json.Marshal(map[string]string{"channel": ch, "reply_to": ev, "content": content})
			rep.Text, rep.Calls = nil, []fakemodel.Call{{ID: fmt.Sprintf("call_%02d", n+1), Name: tool, Args: string(args)}}
		} else if last.Role == "tool" {
			rep.Text = []string{"Replied."}
		}
		return rep
	}
}

// Copilot takes no stdio MCP servers; buzz-acp offers it buzz mcp over HTTP, and the reply goes
// out through that server's send_message, not the shell.
func TestCopilotRepliesThroughBuzzMcpOverHTTP(t *testing.T) {
	t.Parallel()
	node, script := copilotCLI.command(t)
	m := fakemodel.NewOpenAI(t, mcpSendScript(copilotMCPSend, "sent by MCP over HTTP"))
	s := newStack(t)
	t.Cleanup(func() { dumpOnFailure(t, s, m.Requests()) })
	mcpCmd := filepath.Join(t.TempDir(), "buzz-mcp") // `buzz` run as buzz-mcp is `buzz mcp`
	if err := os.Symlink(filepath.Join(s.bin, "buzz"), mcpCmd); err != nil {
		t.Fatal(err)
	}
	s.start(node, []string{script, "--acp"}, append(copilotEnv(m), "BUZZ_ACP_MCP_COMMAND="+mcpCmd)...)
	first := s.mention("hello")
	if got := s.waitReply(first.ID, time.Minute); got.Content != "sent by MCP over HTTP" {
		t.Fatalf("reply %q is not the one the MCP tool sent", got.Content)
	}
	var p struct {
		McpServers []struct{ Type, Name string } `json:"mcpServers"`
	}
	news := sent(s.acpLines(s.activity), "session/new")
	if len(news) != 1 {
		t.Fatalf("session/new sent %d times", len(news))
	}
	if err := json.Unmarshal(news[0], &p); err != nil || len(p.McpServers) != 1 || p.McpServers[0].Type != "http" {
		t.Fatalf("session/new mcpServers %s: want one http entry", news[0])
	}
}
