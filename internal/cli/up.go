package cli

import (
	"errors"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/buzz-harness/buzz/internal/cmdflag"
	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/stack"
)

// upCommand is `buzz up`: relay, harness, agent and web console in one process tree.
func (a *app) upCommand() *cobra.Command {
	var cfg stack.Config
	var agentArgs string
	var printEnv, consoleOnly bool
	var agent string
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run the whole stack here: relay, harness, agent and web console (Ctrl-C stops it)",
		Long: `buzz up starts, in one process tree, a relay (SQLite under --data-dir), the harness and an
agent (this program's own "buzz agent": echo mode unless OPENAI_API_KEY or ANTHROPIC_API_KEY is
set), plus a web console on 127.0.0.1. The first start creates an agent identity and a #general
channel in the data dir, and an owner identity in the owner dir (under your config directory, out
of the agent's working directory); later starts reuse them and resume the agent's channel sessions.

Use --agent-command/--agent-args to run any ACP agent instead (claude-agent-acp, codex-acp, goose).
eval "$(buzz up --print-env)" lets you use the buzz CLI as the owner.

--console-only serves just the web console for an agent whose harness runs elsewhere: the relay
is --relay (BUZZ_RELAY_URL), you are the agent's owner by --private-key (BUZZ_PRIVATE_KEY), and
--agent names the agent. Its Activity view and Stop/model controls go over the agent's observer
frames (NIP-AO), so that harness needs its relay observer on (the default once it has an owner).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if printEnv {
				cfg.Out = cmd.ErrOrStderr() // stdout is for eval
				return upError(stack.PrintEnv(cmd.OutOrStdout(), cfg))
			}
			if consoleOnly {
				return a.consoleOnly(cmd, cfg.ConsoleAddr, agent)
			}
			if agent != "" {
				return usageError("--agent is for --console-only (buzz up runs its own agent)")
			}
			cfg.AgentArgs = splitComma(agentArgs)
			cfg.Out = cmd.OutOrStdout()
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			err := stack.Run(ctx, cfg)
			if ctx.Err() != nil && !errors.As(err, new(*stack.Error)) {
				return nil // interrupted: Run said what it stopped
			}
			return upError(err)
		},
	}
	f := cmdflag.On(cmd.Flags())
	f.String(&cfg.DataDir, "data-dir", "BUZZ_UP_DATA_DIR", stack.DefaultDataDir, "where the agent's key, the relay database and session state live")
	f.String(&cfg.OwnerDir, "owner-dir", "BUZZ_UP_OWNER_DIR", "", "where the owner key and the console token live, 0700, outside the data dir and the agent's working directory (default: <config dir>/buzz/owner/<data dir's name>-<hash>)")
	f.String(&cfg.RelayAddr, "relay-addr", "BUZZ_UP_RELAY_ADDR", stack.DefaultRelayAddr, "relay listen address")
	f.String(&cfg.MetricsAddr, "metrics-addr", "BUZZ_UP_METRICS_ADDR", "", "serve Prometheus metrics (the relay's at /metrics, the harness's at /metrics/acp) and the relay's /healthz, /readyz here (a bare :port is loopback; default: off)")
	f.String(&cfg.ConsoleAddr, "console-addr", "BUZZ_UP_CONSOLE_ADDR", stack.DefaultConsoleAddr, "web console listen address (loopback only)")
	f.String(&cfg.AgentCommand, "agent-command", "BUZZ_UP_AGENT_COMMAND", "", `ACP agent to run (default: the built-in "buzz agent")`)
	f.String(&agentArgs, "agent-args", "BUZZ_UP_AGENT_ARGS", "", "agent arguments, comma-separated")
	f.String(&cfg.AgentName, "agent-name", "BUZZ_UP_AGENT_NAME", stack.DefaultAgentName, "the agent's profile name (set on first start, then kept)")
	f.String(&cfg.SystemPrompt, "system-prompt", "BUZZ_UP_SYSTEM_PROMPT", "", "persona text for the agent, sent as [System]")
	f.String(&cfg.TeamInstructions, "team-instructions", "BUZZ_UP_TEAM_INSTRUCTIONS", "", "team instructions, sent as [Team Instructions]")
	f.String(&cfg.Permissions, "permissions", "BUZZ_UP_PERMISSIONS", "allow", "answer the agent's permission requests: allow, deny, or ask (you answer in the thread or with the console's buttons)")
	f.Bool(&cfg.NoMCP, "no-mcp", "BUZZ_UP_NO_MCP", "do not give the agent's sessions the buzz MCP server (buzz mcp)")
	f.Bool(&consoleOnly, "console-only", "BUZZ_UP_CONSOLE_ONLY", "serve only the web console, for the agent --agent whose harness runs elsewhere on --relay; you are its owner (--private-key)")
	f.String(&agent, "agent", "BUZZ_UP_AGENT", "", "with --console-only: the agent to watch and control (npub or hex)")
	cmd.Flags().BoolVar(&printEnv, "print-env", false, "print BUZZ_RELAY_URL/BUZZ_PRIVATE_KEY exports for the owner (the running stack's relay URL, if one runs) and exit")
	return cmd
}

// consoleOnly is `buzz up --console-only`: the owner's key and the relay as every command takes
// them, the agent from --agent.
func (a *app) consoleOnly(cmd *cobra.Command, addr, agent string) error {
	if _, err := a.bridge(); err != nil { // checks the key and the relay URL
		return err
	}
	if agent == "" {
		return usageError("--console-only needs --agent (the agent's npub or hex pubkey)")
	}
	pk, err := protocol.ParsePubkey(agent)
	if err != nil {
		return usageError("--agent: %s", err)
	}
	sk, _ := protocol.ParseSecretKey(a.options().PrivateKey)
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return upError(stack.RunConsoleOnly(ctx, stack.ConsoleOnly{RelayURL: a.options().RelayURL, OwnerKey: sk, Agent: pk,
		ConsoleAddr: addr, Out: cmd.OutOrStdout()}))
}

func upError(err error) error {
	if err == nil {
		return nil
	}
	var se *stack.Error
	if errors.As(err, &se) {
		return &Error{Category: "up_error", Message: se.Msg, Code: ExitUsage}
	}
	return &Error{Category: "error", Message: err.Error(), Code: ExitOther}
}

// splitComma splits --agent-args as buzz-acp does: comma-separated, blanks dropped.
func splitComma(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
