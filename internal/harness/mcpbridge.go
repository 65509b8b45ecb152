package harness

import (
	"io"

	"github.com/buzz-harness/buzz/internal/acp"
	"github.com/buzz-harness/buzz/internal/mcphttp"
)

// startMCPBridge offers the sessions' stdio MCP servers (--mcp-command, --mcp-servers) over MCP's
// streamable HTTP transport as well, for agents that advertise mcpCapabilities.http: Copilot
// takes no stdio servers at all. One loopback listener serves the whole run with one random
// secret; each HTTP session starts the server's command with the environment the agent would
// have given it (the agent's own, plus the entry's env), so it acts with the agent's key. The
// listener and the servers it started run on their own goroutines, never on the loop.
//
// It sets the HTTP entries params hands those agents; stop closes the listener and ends every
// server it started.
func (h *Harness) startMCPBridge() (stop func(), err error) {
	if len(h.cfg.mcp) == 0 {
		return func() {}, nil
	}
	commands := make(map[string]mcphttp.Command, len(h.cfg.mcp))
	base := agentEnv(&h.cfg)
	for _, m := range h.cfg.mcp {
		env := append([]string(nil), base...)
		for _, e := range m.Env {
			env = append(env, e.Name+"="+e.Value)
		}
		commands[m.Name] = mcphttp.Command{Path: m.Command, Args: m.Args, Env: env}
	}
	b, err := mcphttp.Start(commands, mcphttp.Options{
		Logger: h.log,
		Stderr: func(name string) io.Writer { return &lineLogger{log: h.log.With("mcp_server", name), agent: -1} },
	})
	if err != nil {
		return nil, err
	}
	entries := make([]acp.McpServer, 0, len(h.cfg.mcp))
	for _, m := range h.cfg.mcp {
		entries = append(entries, acp.McpServer{Name: m.Name, URL: b.URL(m.Name),
			Headers: []acp.EnvVariable{{Name: "Authorization", Value: b.Authorization()}}})
	}
	h.sessions.mcpHTTP = entries
	h.log.Info("MCP servers offered over HTTP too, for agents that take it", "servers", len(entries))
	return func() { _ = b.Close() }, nil
}
