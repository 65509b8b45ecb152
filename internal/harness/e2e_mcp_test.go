package harness_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/protocol/ownerauth"
)

// writeMCPServers writes an --mcp-servers document and returns its path.
func writeMCPServers(t *testing.T, doc string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "mcp.json")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestEverySessionCarriesTheMcpCommandServerWithTheAgentsIdentity(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	tag, err := ownerauth.Issue(s.ownerSK, s.agentPK, "", rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	servers := writeMCPServers(t, `{"version":1,"servers":[
		{"transport":"stdio","name":"files","command":"/usr/bin/files-mcp","args":["--root","/srv"],"env":{"LOG_LEVEL":"warn","A":"1"}}]}`)
	args := []string{"--mcp-command", "/opt/bin/buzz-dev-mcp", "--mcp-servers", servers}
	s.start(args, "BUZZ_AUTH_TAG="+tag.JSON())
	first := s.mention(s.ownerSK, "codeword=MANGO")
	r1 := s.waitReply(first.ID)
	s.waitLog("turn done", 20*time.Second) // the test agent saves the session after the reply
	s.kill()
	s.start(args, "BUZZ_AUTH_TAG="+tag.JSON())
	s.mention(s.ownerSK, "again", replyTo(first.ID)) // the same thread, so its session is loaded
	s.waitNewReply(first.ID, r1)

	want := `[{"name":"buzz-dev-mcp","command":"/opt/bin/buzz-dev-mcp","args":[],"env":[` +
		`{"name":"BUZZ_RELAY_URL","value":"` + s.relay.URL + `"},` +
		`{"name":"BUZZ_PRIVATE_KEY","value":"` + protocol.Nsec(s.agentSK) + `"},` +
		`{"name":"BUZZ_AUTH_TAG","value":` + jsonString(t, tag.JSON()) + `}]},` +
		`{"name":"files","command":"/usr/bin/files-mcp","args":["--root","/srv"],"env":[{"name":"A","value":"1"},{"name":"LOG_LEVEL","value":"warn"}]}]`
	news, loads := s.methods("session/new"), s.methods("session/load")
	if len(news) != 1 || len(loads) != 1 {
		t.Fatalf("session/new ×%d, session/load ×%d; want 1 and 1", len(news), len(loads))
	}
	for _, r := range []record{news[0], loads[0]} {
		var p struct {
			McpServers json.RawMessage `json:"mcpServers"`
		}
		if err := json.Unmarshal(r.Params, &p); err != nil {
			t.Fatal(err)
		}
		if string(p.McpServers) != want {
			t.Fatalf("%s mcpServers\n got %s\nwant %s", r.Method, p.McpServers, want)
		}
	}
}

func TestSessionWithoutMcpSettingsSendsEmptyMcpServersWithNoAuthTagLeak(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	tag, err := ownerauth.Issue(s.ownerSK, s.agentPK, "", rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s.start(nil, "BUZZ_AUTH_TAG="+tag.JSON())
	s.waitReply(s.mention(s.ownerSK, "hi").ID)
	news := s.methods("session/new")
	if len(news) != 1 {
		t.Fatalf("session/new ×%d", len(news))
	}
	var p struct {
		McpServers json.RawMessage `json:"mcpServers"`
	}
	if err := json.Unmarshal(news[0].Params, &p); err != nil || string(p.McpServers) != "[]" {
		t.Fatalf("mcpServers %s (%v), want []", p.McpServers, err)
	}
}

func TestProtectedKeyInMcpServersFileIsRefusedAtStartup(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	servers := writeMCPServers(t, `{"version":1,"servers":[
		{"name":"ok","command":"/bin/true"},
		{"name":"thief","command":"/bin/true","env":{"BUZZ_PRIVATE_KEY":"nsec1stolen"}}]}`)
	out := refuseToStart(t, s, "--mcp-servers", servers)
	want := "--mcp-servers " + servers + ": servers[1].env.BUZZ_PRIVATE_KEY: is protected"
	if !strings.Contains(out, want) {
		t.Fatalf("output does not name the field; want %q in:\n%s", want, out)
	}
	if len(s.recorded()) != 0 {
		t.Fatal("an agent was started despite the bad --mcp-servers file")
	}
}

func TestMcpServersFileNameClashingWithMcpCommandIsRefusedAtStartup(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	servers := writeMCPServers(t, `{"version":1,"servers":[{"name":"buzz-dev-mcp","command":"/bin/true"}]}`)
	out := refuseToStart(t, s, "--mcp-command", "/opt/bin/buzz-dev-mcp", "--mcp-servers", servers)
	if want := `servers[0].name: "buzz-dev-mcp" is already the --mcp-command server's name`; !strings.Contains(out, want) {
		t.Fatalf("want %q in:\n%s", want, out)
	}
}

// refuseToStart runs buzz-acp with the stack's settings plus args and returns its output; it
// must exit non-zero on its own.
func refuseToStart(t *testing.T, s *stack, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(s.bin, "buzz-acp"), append([]string{
		"--agent-command", filepath.Join(s.bin, "testagent"),
		"--relay-url", s.relay.URL, "--state-dir", s.stateDir, "--agent-cwd", t.TempDir(),
	}, args...)...)
	cmd.Env = append(os.Environ(), "BUZZ_PRIVATE_KEY="+s.agentSK, "TESTAGENT_RECORD="+s.record, "TESTAGENT_STATE_DIR="+s.agentDir)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("buzz-acp did not exit; output:\n%s", out)
	}
	if err == nil {
		t.Fatalf("buzz-acp exited 0; output:\n%s", out)
	}
	return string(out)
}

func jsonString(t *testing.T, s string) string {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// bearerTransport adds one Authorization header to every request.
type bearerTransport struct{ value string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", b.value)
	return http.DefaultTransport.RoundTrip(r)
}

func TestAgentTakingHTTPMcpGetsTheMcpCommandServerOverHTTPWithASecret(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	mcpCmd := filepath.Join(t.TempDir(), "buzz-mcp") // `buzz` run as buzz-mcp is `buzz mcp`
	if err := os.Symlink(filepath.Join(s.bin, "buzz"), mcpCmd); err != nil {
		t.Fatal(err)
	}
	s.start([]string{"--mcp-command", mcpCmd}, "TESTAGENT_MCP_HTTP=1")
	s.waitReply(s.mention(s.ownerSK, "hi").ID)
	news := s.methods("session/new")
	if len(news) != 1 {
		t.Fatalf("session/new ×%d", len(news))
	}
	var p struct {
		McpServers []struct {
			Type, Name, URL string
			Command         *string
			Headers         []struct{ Name, Value string }
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal(news[0].Params, &p); err != nil {
		t.Fatal(err)
	}
	if len(p.McpServers) != 1 {
		t.Fatalf("mcpServers %s", news[0].Params)
	}
	e := p.McpServers[0]
	if e.Type != "http" || e.Name != "buzz-mcp" || e.Command != nil || !strings.HasPrefix(e.URL, "http://127.0.0.1:") ||
		len(e.Headers) != 1 || e.Headers[0].Name != "Authorization" || !strings.HasPrefix(e.Headers[0].Value, "Bearer ") || len(e.Headers[0].Value) < len("Bearer ")+20 {
		t.Fatalf("mcpServers entry %+v: want one http entry on loopback with a bearer secret", e)
	}

	// The entry works: buzz mcp answers over it as the agent, and nothing without the secret.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: e.URL, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: bearerTransport{e.Headers[0].Value}}}, nil)
	if err != nil {
		t.Fatalf("connect to the entry: %v", err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "send_message", Arguments: map[string]any{"channel": s.channel, "content": "sent over the bridge"}})
	if err != nil || res.IsError {
		t.Fatalf("send_message: %+v, %v", res, err)
	}
	var sent struct {
		EventID string `json:"event_id"`
	}
	if err := json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &sent); err != nil {
		t.Fatal(err)
	}
	if evs := s.relay.Query(t, s.ownerSK, nostr.Filter{IDs: []string{sent.EventID}}); len(evs) != 1 || evs[0].PubKey != s.agentPK {
		t.Fatalf("the bridged send is %+v; want one event signed by the agent %s", evs, s.agentPK)
	}
	resp, err := http.Post(e.URL, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without the secret: %d, want 401", resp.StatusCode)
	}
}
