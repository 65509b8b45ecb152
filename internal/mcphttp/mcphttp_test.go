package mcphttp_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/mcphttp"
	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/relay/relaytest"
	"github.com/buzz-harness/buzz/internal/testbin"
)

func TestMain(m *testing.M) { os.Exit(testbin.Run(m)) }

// bearer adds the bridge's Authorization header to every request.
type bearer struct{ value string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", b.value)
	return http.DefaultTransport.RoundTrip(r)
}

// buzzBridge starts a relay and a bridge serving the real `buzz mcp` as "buzz-mcp", acting with
// a new key; it returns the bridge, that key's env and a channel it created.
func buzzBridge(t *testing.T) (b *mcphttp.Bridge, env []string, channel string) {
	t.Helper()
	buzz := testbin.Path(t, "cmd/buzz")
	relay := relaytest.Start(t)
	env = []string{"BUZZ_RELAY_URL=" + relay.URL, "BUZZ_PRIVATE_KEY=" + protocol.Nsec(nostr.GeneratePrivateKey()), "BUZZ_TIMEOUT_SECS=10"}
	create := exec.Command(buzz, "channels", "create", "--name", "bridge")
	create.Env = append(os.Environ(), env...)
	out, err := create.Output()
	if err != nil {
		t.Fatalf("buzz channels create: %v\n%s", err, out)
	}
	var ch struct {
		ID string `json:"channel_id"`
	}
	if err := json.Unmarshal(out, &ch); err != nil || ch.ID == "" {
		t.Fatalf("buzz channels create printed %s (%v)", out, err)
	}
	b, err = mcphttp.Start(map[string]mcphttp.Command{"buzz-mcp": {Path: buzz, Args: []string{"mcp"}, Env: env}}, mcphttp.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b, env, ch.ID
}

func TestBuzzMcpOverHTTPListsToolsAndSendsWithTheSecret(t *testing.T) {
	t.Parallel()
	b, _, channel := buzzBridge(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if u := b.URL("buzz-mcp"); !strings.HasPrefix(u, "http://127.0.0.1:") {
		t.Fatalf("URL %s is not on loopback", u)
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   b.URL("buzz-mcp"),
		HTTPClient: &http.Client{Transport: bearer{b.Authorization()}},
		MaxRetries: -1,
	}, nil)
	if err != nil {
		t.Fatalf("connect over HTTP: %v", err)
	}
	defer cs.Close()
	if info := cs.InitializeResult(); info == nil || info.ServerInfo.Name != "buzz" {
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
	if !slices.Contains(names, "send_message") || !slices.Contains(names, "get_messages") {
		t.Fatalf("tools %v lack send_message and get_messages", names)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "send_message", Arguments: map[string]any{"channel": channel, "content": "over http"}})
	if err != nil || res.IsError {
		t.Fatalf("send_message: %+v, %v", res, err)
	}
	if text := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(text, `"accepted":true`) {
		t.Fatalf("send_message answered %s", text)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_messages", Arguments: map[string]any{"channel": channel}})
	if err != nil || res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "over http") {
		t.Fatalf("get_messages after the send: %+v, %v", res, err)
	}
}

func TestBridgeRefusesRequestsWithoutTheSecret(t *testing.T) {
	t.Parallel()
	b, _, _ := buzzBridge(t)
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	for name, auth := range map[string]string{"none": "", "wrong": "Bearer not-the-secret", "bare secret": strings.TrimPrefix(b.Authorization(), "Bearer ")} {
		req, err := http.NewRequest(http.MethodPost, b.URL("buzz-mcp"), strings.NewReader(initialize))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("Mcp-Session-Id") != "" {
			t.Fatalf("%s: status %d, session %q; want 401 and no session", name, resp.StatusCode, resp.Header.Get("Mcp-Session-Id"))
		}
	}
}
