package stack_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/buzz-harness/buzz/internal/testbin"
	"github.com/buzz-harness/buzz/internal/testwait"
)

type mcpEntry struct {
	Name    string   `json:"name"`
	Command string   `json:"command"`
	Args    []string `json:"args"`
	Env     []struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	} `json:"env"`
}

// firstSessionServers waits for the test agent's first session/new and returns its mcpServers.
func firstSessionServers(t *testing.T, record string) []mcpEntry {
	t.Helper()
	var servers []mcpEntry
	testwait.Eventually(t, 45*time.Second, func() bool {
		f, err := os.Open(record)
		if err != nil {
			return false
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			var r struct {
				Method string `json:"method"`
				Params struct {
					McpServers []mcpEntry `json:"mcpServers"`
				} `json:"params"`
			}
			if json.Unmarshal(sc.Bytes(), &r) == nil && r.Method == "session/new" {
				servers = r.Params.McpServers
				return true
			}
		}
		return false
	}, "the agent's first session/new")
	return servers
}

func TestUpGivesSessionsTheBuzzMcpServerWhichPostsAsTheAgent(t *testing.T) {
	t.Parallel()
	bin := testbin.Dir(t, "cmd/buzz", "internal/testagent")
	dataDir := filepath.Join(t.TempDir(), "data")
	record := filepath.Join(t.TempDir(), "record.jsonl")
	agentEnv := []string{"TESTAGENT_RECORD=" + record, "TESTAGENT_NO_CLI=1"}
	up := startUpEnv(t, agentEnv, bin, dataDir, testbin.FreeAddr(t), "--agent-command", filepath.Join(bin, "testagent"))
	send(t, bin, up.banner.relayHTTP, up.banner.ownerKey, up.banner.channel, "@"+up.banner.agentName+" hello")

	servers := firstSessionServers(t, record)
	if len(servers) != 1 || servers[0].Name != "buzz-mcp" || servers[0].Command != filepath.Join(dataDir, "bin", "buzz-mcp") || len(servers[0].Args) != 0 {
		t.Fatalf("mcpServers %+v, want the one buzz-mcp entry", servers)
	}
	env := map[string]string{}
	var names []string
	for _, e := range servers[0].Env {
		env[e.Name] = e.Value
		names = append(names, e.Name)
	}
	if strings.Join(names, ",") != "BUZZ_RELAY_URL,BUZZ_PRIVATE_KEY,BUZZ_AUTH_TAG" {
		t.Fatalf("env names %v", names)
	}

	// Run the server as an agent would: the entry's command, args and env, nothing inherited.
	cmd := exec.Command(servers[0].Command)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect to %s: %v", servers[0].Command, err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "send_message", Arguments: map[string]any{"channel": up.banner.channel, "content": "posted through buzz-mcp"}})
	if err != nil || res.IsError {
		t.Fatalf("send_message: %v %+v", err, res)
	}
	agentPK := pubkeyOf(t, filepath.Join(dataDir, "agent.key"))
	var msgs []struct {
		Pubkey  string `json:"pubkey"`
		Content string `json:"content"`
	}
	if err := json.Unmarshal(cli(t, bin, up.banner.relayHTTP, up.banner.ownerKey, "messages", "get", "--channel", up.banner.channel), &msgs); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, m := range msgs {
		found = found || m.Content == "posted through buzz-mcp" && m.Pubkey == agentPK
	}
	if !found {
		t.Fatalf("the owner does not see the agent's MCP post: %+v", msgs)
	}
	// Memory needs the owner: it comes from BUZZ_AUTH_TAG, so an empty memory is "not found",
	// not "no owner".
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "set_memory", Arguments: map[string]any{"value": "set over MCP"}})
	if err != nil || res.IsError {
		t.Fatalf("set_memory: %v %+v", err, res.Content)
	}
	up.stop(t)
}

func TestUpNoMcpLeavesSessionsWithoutServers(t *testing.T) {
	t.Parallel()
	bin := testbin.Dir(t, "cmd/buzz", "internal/testagent")
	dataDir := filepath.Join(t.TempDir(), "data")
	record := filepath.Join(t.TempDir(), "record.jsonl")
	agentEnv := []string{"TESTAGENT_RECORD=" + record, "TESTAGENT_NO_CLI=1"}
	up := startUpEnv(t, agentEnv, bin, dataDir, testbin.FreeAddr(t), "--agent-command", filepath.Join(bin, "testagent"), "--no-mcp")
	send(t, bin, up.banner.relayHTTP, up.banner.ownerKey, up.banner.channel, "@"+up.banner.agentName+" hello")
	if servers := firstSessionServers(t, record); len(servers) != 0 {
		t.Fatalf("mcpServers %+v with --no-mcp", servers)
	}
	up.stop(t)
}
