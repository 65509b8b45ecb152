package harness

import (
	"reflect"
	"strings"
	"testing"

	"github.com/buzz-harness/buzz/internal/acp"
	"github.com/buzz-harness/buzz/internal/mcpconfig"
	"github.com/buzz-harness/buzz/internal/protocol"
)

func TestSessionParamsCarryChannelIdentityTitleAndFreshInOneMeta(t *testing.T) {
	o := &sessionOpener{cfg: &Config{AgentCwd: "/work", SessionTitle: "helper"}}
	ch := &channel{ID: "c1", Name: "general", Type: "stream"}
	p := o.params(sessionSpec{channel: ch, conv: convKey{Channel: "c1", Root: "r1"}, route: RouteUserMessage, system: "ignored here", fresh: true})
	if p.Cwd != "/work" || p.SystemPrompt != nil {
		t.Fatalf("cwd %q, systemPrompt %v", p.Cwd, p.SystemPrompt)
	}
	want := map[string]any{"sessionTitle": "helper · #general", "channelId": "c1", "channelType": "stream", "freshSession": true}
	if len(p.Meta) != len(want)+1 {
		t.Fatalf("meta %v, want %v and buzz", p.Meta, want)
	}
	if b, _ := p.Meta["buzz"].(map[string]any); b["conversationId"] != "buzz:c1:r1" {
		t.Fatalf("meta.buzz %v, want conversationId buzz:c1:r1", p.Meta["buzz"])
	}
	for k, v := range want {
		if p.Meta[k] != v {
			t.Fatalf("meta[%s] = %v, want %v", k, p.Meta[k], v)
		}
	}
}

func TestSessionParamsPutStandingContextWhereTheRouteCarriesIt(t *testing.T) {
	o := &sessionOpener{cfg: &Config{AgentCwd: "/work"}}
	spec := o.params(sessionSpec{route: RouteSpecSystemPrompt, system: "[Base]\nbe kind"})
	if spec.SystemPrompt == nil || spec.SystemPrompt.Mode != "append" || spec.SystemPrompt.Content[0].Text != "[Base]\nbe kind" {
		t.Fatalf("spec route: systemPrompt %+v", spec.SystemPrompt)
	}
	claude := o.params(sessionSpec{route: RouteClaudeMeta, system: "[Base]\nbe kind"})
	if sp, _ := claude.Meta["systemPrompt"].(map[string]any); claude.SystemPrompt != nil || sp["append"] != "[Base]\nbe kind" {
		t.Fatalf("claude route: systemPrompt %+v, meta %v", claude.SystemPrompt, claude.Meta)
	}
	for _, r := range []Route{RouteSpecSystemPrompt, RouteClaudeMeta} {
		if p := o.params(sessionSpec{route: r}); p.SystemPrompt != nil || len(p.Meta) != 0 {
			t.Fatalf("%s with no standing text and no channel: %+v", r, p)
		}
	}
}

func TestSessionParamsCarryMcpCommandServerWithIdentityThenFileServers(t *testing.T) {
	sk := strings.Repeat("01", 32)
	cfg := &Config{
		RelayURL: "ws://relay", SecretKey: sk, AgentCommand: "agent", AgentCwd: "/work",
		MCPCommand: "/opt/bin/buzz-dev-mcp", AuthTag: `["auth","o","","sig"]`,
		MCPServers: []mcpconfig.Server{{Name: "files", Command: "files-mcp", Args: []string{"-v"}, Env: map[string]string{"B": "2", "A": "1"}}},
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	o := &sessionOpener{cfg: cfg}
	got := o.params(sessionSpec{route: RouteUserMessage}).McpServers
	want := []acp.McpServer{
		{Name: "buzz-dev-mcp", Command: "/opt/bin/buzz-dev-mcp", Args: []string{}, Env: []acp.EnvVariable{
			{Name: "BUZZ_RELAY_URL", Value: "ws://relay"},
			{Name: "BUZZ_PRIVATE_KEY", Value: protocol.Nsec(sk)},
			{Name: "BUZZ_AUTH_TAG", Value: `["auth","o","","sig"]`},
		}},
		{Name: "files", Command: "files-mcp", Args: []string{"-v"}, Env: []acp.EnvVariable{{Name: "A", Value: "1"}, {Name: "B", Value: "2"}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("mcpServers\n got %+v\nwant %+v", got, want)
	}
	if !strings.HasPrefix(want[0].Env[1].Value, "nsec1") {
		t.Fatalf("private key %q is not bech32 nsec", want[0].Env[1].Value)
	}

	cfg.AuthTag, cfg.MCPServers = "", nil
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if env := o.params(sessionSpec{}).McpServers[0].Env; len(env) != 2 {
		t.Fatalf("without BUZZ_AUTH_TAG the env is %+v; want relay and key only", env)
	}
	cfg.MCPCommand = ""
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if m := o.params(sessionSpec{}).McpServers; len(m) != 0 {
		t.Fatalf("no MCP settings gave %+v", m)
	}
}

func TestMcpCommandNameIsTheFileStem(t *testing.T) {
	for cmd, want := range map[string]string{
		"/opt/bin/buzz-dev-mcp": "buzz-dev-mcp",
		"buzz-mcp":              "buzz-mcp",
		"./tools/server.py":     "server",
		"/x/a.b.c":              "a.b",
		"/x/.hidden":            ".hidden",
		"/":                     "mcp",
	} {
		if got := mcpCommandName(cmd); got != want {
			t.Errorf("mcpCommandName(%q) = %q, want %q", cmd, got, want)
		}
	}
}

func TestValidateRefusesFileServerNamedLikeTheMcpCommandServer(t *testing.T) {
	cfg := &Config{
		SecretKey: strings.Repeat("01", 32), AgentCommand: "agent", AgentCwd: "/work",
		MCPCommand: "/bin/buzz", MCPServers: []mcpconfig.Server{{Name: "a", Command: "a"}, {Name: "buzz", Command: "b"}},
	}
	err := cfg.Validate()
	if err == nil || err.Error() != `--mcp-servers: servers[1].name: "buzz" is already the --mcp-command server's name` {
		t.Fatalf("err = %v", err)
	}
}

func TestReplayWatchFindsTheBriefingOnlyAtTheStartOfAReplayedUserMessage(t *testing.T) {
	chunk := func(kind, text string, replay bool) acp.SessionUpdate {
		return acp.SessionUpdate{SessionID: "s1", Kind: kind, Text: text, Replay: replay}
	}
	cases := []struct {
		name    string
		updates []acp.SessionUpdate
		want    bool
	}{
		{"briefed first message", []acp.SessionUpdate{
			chunk(acp.UpdateUserMessageChunk, "[Base]\nYou are on Buzz.\n\n[Context]\n…", true),
			chunk(acp.UpdateAgentMessageChunk, "ok", true)}, true},
		{"header split across chunks", []acp.SessionUpdate{
			chunk(acp.UpdateUserMessageChunk, "[Ba", true), chunk(acp.UpdateUserMessageChunk, "se]\nbody", true)}, true},
		{"header quoted mid-message", []acp.SessionUpdate{
			chunk(acp.UpdateUserMessageChunk, "someone wrote\n[Base]\nhere", true)}, false},
		{"header only in the agent's text", []acp.SessionUpdate{
			chunk(acp.UpdateAgentMessageChunk, "[Base]\nbody", true)}, false},
		{"not a replay", []acp.SessionUpdate{
			chunk(acp.UpdateUserMessageChunk, "[Base]\nbody", false)}, false},
		{"no history", nil, false},
		{"later message briefed", []acp.SessionUpdate{
			chunk(acp.UpdateUserMessageChunk, "hello", true), chunk(acp.UpdateAgentMessageChunk, "hi", true),
			chunk(acp.UpdateUserMessageChunk, "[System]\nYou are Helper.", true)}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var w replayWatch
			w.observe(chunk(acp.UpdateUserMessageChunk, "[Base]\nbefore the load", true)) // not watched yet
			w.begin("s1")
			for _, u := range c.updates {
				w.observe(u)
			}
			if got := w.end("s1"); got != c.want {
				t.Fatalf("briefed = %v, want %v", got, c.want)
			}
		})
	}
}
