// Package cli is buzz-acp's command line: flags with environment fallbacks, named as upstream
// buzz-acp names them, turned into a harness.Config.
package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/buzz-harness/buzz/internal/console"
	"github.com/buzz-harness/buzz/internal/harness"
	"github.com/buzz-harness/buzz/internal/observer"
	"github.com/buzz-harness/buzz/internal/prompt"
	"github.com/buzz-harness/buzz/internal/protocol"
)

// Version is stamped by the build; "dev" otherwise.
var Version = "dev"

// options mirrors the flags before they are checked.
type options struct {
	relayURL, privateKey, owner                    string
	agentCommand, agentArgs, agentCwd              string
	agents                                         int
	idleTimeout, maxTurnDuration, initTimeout      int
	permissions                                    string
	respondTo, allowlist, kinds, channels          string
	noMentionFilter                                bool
	contextLimit, maxTurnsPerSession               int
	sessionTitle                                   string
	basePromptFile, systemPrompt, systemPromptFile string
	noBasePrompt                                   bool
	teamInstructions, initialMessage               string
	noMemory                                       bool
	heartbeatInterval                              int
	heartbeatPrompt, heartbeatPromptFile           string
	stateDir                                       string
	noResumeSessions                               bool
	sessionPolicy                                  string
	maxCachedSessions, sessionIdleTTL              int
	// envErrs are environment values that did not parse: a typo in an env var is an error,
	// not a silent default.
	envErrs []error

	activityLog, activityAddr, logLevel string
}

// Command returns the buzz-acp root command.
func Command() *cobra.Command {
	var o options
	cmd := &cobra.Command{
		Use:           "buzz-acp",
		Short:         "Connect ACP agents to Buzz channels",
		Version:       Version,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, closeLog, err := o.config(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer closeLog()
			if o.activityAddr != "" {
				url, err := console.ServeActivity(cmd.Context(), o.activityAddr, cfg.Observer)
				if err != nil {
					return fmt.Errorf("--activity-addr: %w", err)
				}
				fmt.Fprintln(cmd.ErrOrStderr(), "buzz-acp activity console:", url)
			}
			h, err := harness.New(cfg)
			if err != nil {
				return err
			}
			return h.Run(cmd.Context())
		},
	}
	f := cmd.Flags()
	str(f, &o.relayURL, "relay-url", "BUZZ_RELAY_URL", "ws://localhost:3000", "relay WebSocket URL")
	str(f, &o.privateKey, "private-key", "BUZZ_PRIVATE_KEY", "", "the agent's secret key (hex or nsec); required")
	str(f, &o.owner, "agent-owner", "BUZZ_ACP_AGENT_OWNER", "", "owner pubkey (hex or npub): may run !cancel/!rotate/!shutdown")
	str(f, &o.agentCommand, "agent-command", "BUZZ_ACP_AGENT_COMMAND", "buzz-agent", "ACP agent to run")
	str(f, &o.agentArgs, "agent-args", "BUZZ_ACP_AGENT_ARGS", "", "agent arguments, comma-separated")
	str(f, &o.agentCwd, "agent-cwd", "BUZZ_ACP_AGENT_CWD", "", "agent working directory (default: current directory)")
	num(f, &o.envErrs, &o.agents, "agents", "BUZZ_ACP_AGENTS", 1, "agent processes running channels in parallel (1–32)")
	num(f, &o.envErrs, &o.initTimeout, "agent-init-timeout", "BUZZ_ACP_AGENT_INIT_TIMEOUT", 60, "seconds an agent may take to answer initialize before it is killed and respawned")
	num(f, &o.envErrs, &o.idleTimeout, "idle-timeout", "BUZZ_ACP_IDLE_TIMEOUT", 620, "seconds without agent output before a turn is cancelled")
	num(f, &o.envErrs, &o.maxTurnDuration, "max-turn-duration", "BUZZ_ACP_MAX_TURN_DURATION", 7200, "hard cap on one turn, seconds")
	str(f, &o.permissions, "permissions", "BUZZ_ACP_PERMISSIONS", "allow", "answer agent permission requests: allow (allow_once) or deny (reject_once)")
	str(f, &o.respondTo, "respond-to", "BUZZ_ACP_RESPOND_TO", "owner-only", "whose mentions to answer: owner-only, allowlist, anyone, nobody")
	str(f, &o.allowlist, "respond-to-allowlist", "BUZZ_ACP_RESPOND_TO_ALLOWLIST", "", "pubkeys (comma-separated) for --respond-to allowlist")
	str(f, &o.kinds, "kinds", "BUZZ_ACP_KINDS", "9,46010,40007", "event kinds to subscribe to, comma-separated")
	str(f, &o.channels, "channels", "BUZZ_ACP_CHANNELS", "", "only these channel ids (comma-separated); default all member channels")
	boolean(f, &o.envErrs, &o.noMentionFilter, "no-mention-filter", "BUZZ_ACP_NO_MENTION_FILTER", "receive every event, not only those mentioning the agent")
	num(f, &o.envErrs, &o.contextLimit, "context-message-limit", "BUZZ_ACP_CONTEXT_MESSAGE_LIMIT", 12, "thread/conversation messages included in a prompt (0–100)")
	num(f, &o.envErrs, &o.maxTurnsPerSession, "max-turns-per-session", "BUZZ_ACP_MAX_TURNS_PER_SESSION", 0, "rotate a channel's session after this many turns (0 = never)")
	str(f, &o.sessionTitle, "session-title", "BUZZ_ACP_SESSION_TITLE", "", "agent display name used in _meta.sessionTitle")
	str(f, &o.basePromptFile, "base-prompt-file", "BUZZ_ACP_BASE_PROMPT_FILE", "", "replace the built-in [Base] prompt with this file (≤1 MB)")
	boolean(f, &o.envErrs, &o.noBasePrompt, "no-base-prompt", "BUZZ_ACP_NO_BASE_PROMPT", "send no [Base] prompt")
	str(f, &o.systemPrompt, "system-prompt", "BUZZ_ACP_SYSTEM_PROMPT", "", "persona text, sent as [System]")
	str(f, &o.systemPromptFile, "system-prompt-file", "BUZZ_ACP_SYSTEM_PROMPT_FILE", "", "persona from a file")
	str(f, &o.teamInstructions, "team-instructions", "BUZZ_ACP_TEAM_INSTRUCTIONS", "", "team instructions, sent as [Team Instructions]")
	str(f, &o.initialMessage, "initial-message", "BUZZ_ACP_INITIAL_MESSAGE", "", "first prompt of every new channel session")
	boolean(f, &o.envErrs, &o.noMemory, "no-memory", "BUZZ_ACP_NO_MEMORY", "do not load core memory (kind 30174)")
	num(f, &o.envErrs, &o.heartbeatInterval, "heartbeat-interval", "BUZZ_ACP_HEARTBEAT_INTERVAL", 0, "seconds between heartbeat prompts (0 = off, else ≥10)")
	str(f, &o.heartbeatPrompt, "heartbeat-prompt", "BUZZ_ACP_HEARTBEAT_PROMPT", "", "heartbeat prompt text")
	str(f, &o.heartbeatPromptFile, "heartbeat-prompt-file", "BUZZ_ACP_HEARTBEAT_PROMPT_FILE", "", "heartbeat prompt from a file")
	str(f, &o.stateDir, "state-dir", "BUZZ_ACP_STATE_DIR", "", "where the session store lives (default <cwd>/.buzz-acp)")
	boolean(f, &o.envErrs, &o.noResumeSessions, "no-resume-sessions", "BUZZ_ACP_NO_RESUME_SESSIONS", "do not remember or resume channel sessions")
	str(f, &o.sessionPolicy, "session-policy", "BUZZ_ACP_SESSION_POLICY", "thread", "one agent session per thread, or per channel (thread|channel)")
	num(f, &o.envErrs, &o.maxCachedSessions, "max-cached-conversation-sessions", "BUZZ_ACP_MAX_CACHED_CONVERSATION_SESSIONS", 8, "live sessions per agent process; the least recently used idle one is closed")
	num(f, &o.envErrs, &o.sessionIdleTTL, "conversation-session-idle-ttl-secs", "BUZZ_ACP_CONVERSATION_SESSION_IDLE_TTL_SECS", 1800, "close a live session idle this many seconds")
	str(f, &o.activityLog, "activity-log", "BUZZ_ACP_ACTIVITY_LOG", "", "write the activity feed to this file as JSON lines")
	str(f, &o.activityAddr, "activity-addr", "BUZZ_ACP_ACTIVITY_ADDR", "", "serve the activity console on this loopback address (e.g. 127.0.0.1:3002)")
	str(f, &o.logLevel, "log-level", "BUZZ_ACP_LOG_LEVEL", "info", "debug, info, warn or error")
	cmd.MarkFlagsMutuallyExclusive("system-prompt", "system-prompt-file")
	cmd.MarkFlagsMutuallyExclusive("heartbeat-prompt", "heartbeat-prompt-file")
	cmd.MarkFlagsMutuallyExclusive("base-prompt-file", "no-base-prompt")
	return cmd
}

func (o *options) config(stderr io.Writer) (harness.Config, func(), error) {
	noop := func() {}
	if len(o.envErrs) > 0 {
		return harness.Config{}, noop, o.envErrs[0]
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return harness.Config{}, noop, fmt.Errorf("--log-level: %w", err)
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	sk, err := protocol.ParseSecretKey(o.privateKey)
	if err != nil {
		return harness.Config{}, noop, fmt.Errorf("--private-key / BUZZ_PRIVATE_KEY: %w", err)
	}
	cfg := harness.Config{
		RelayURL:                      o.relayURL,
		SecretKey:                     sk,
		AgentCommand:                  o.agentCommand,
		AgentArgs:                     splitList(o.agentArgs),
		Agents:                        o.agents,
		InitTimeout:                   secs(o.initTimeout, 1),
		IdleTimeout:                   secs(o.idleTimeout, 1),
		MaxTurnDuration:               secs(o.maxTurnDuration, 60),
		PermissionsDeny:               o.permissions == "deny",
		MaxTurnsPerSession:            o.maxTurnsPerSession,
		RespondTo:                     harness.RespondTo(o.respondTo),
		NoMentionFilter:               o.noMentionFilter,
		ContextMessageLimit:           o.contextLimit,
		SessionTitle:                  o.sessionTitle,
		TeamInstructions:              o.teamInstructions,
		InitialMessage:                o.initialMessage,
		Memory:                        !o.noMemory,
		HeartbeatInterval:             time.Duration(o.heartbeatInterval) * time.Second,
		NoResumeSessions:              o.noResumeSessions,
		SessionPolicy:                 harness.SessionPolicy(o.sessionPolicy),
		MaxCachedConversationSessions: o.maxCachedSessions,
		ConversationSessionIdleTTL:    time.Duration(o.sessionIdleTTL) * time.Second,
		Logger:                        logger,
		Version:                       Version,
		BuzzCLIDir:                    harness.BuzzCLIDir(),
	}
	if o.permissions != "allow" && o.permissions != "deny" {
		return cfg, noop, fmt.Errorf("--permissions must be allow or deny, got %q", o.permissions)
	}
	if o.owner != "" {
		if cfg.Owner, err = protocol.ParsePubkey(o.owner); err != nil {
			return cfg, noop, fmt.Errorf("--agent-owner: %w", err)
		}
	}
	if o.allowlist != "" {
		cfg.Allowlist = map[string]bool{}
		for _, p := range splitList(o.allowlist) {
			pk, err := protocol.ParsePubkey(p)
			if err != nil {
				return cfg, noop, fmt.Errorf("--respond-to-allowlist: %w", err)
			}
			cfg.Allowlist[pk] = true
		}
	}
	for _, k := range splitList(o.kinds) {
		n, err := strconv.Atoi(k)
		if err != nil {
			return cfg, noop, fmt.Errorf("--kinds: %q is not a number", k)
		}
		cfg.Kinds = append(cfg.Kinds, n)
	}
	if o.channels != "" {
		cfg.Channels = map[string]bool{}
		for _, c := range splitList(o.channels) {
			if !protocol.IsUUID(c) {
				return cfg, noop, fmt.Errorf("--channels: %q is not a channel UUID", c)
			}
			cfg.Channels[c] = true
		}
	}
	if cfg.AgentCwd, err = absDir(o.agentCwd); err != nil {
		return cfg, noop, fmt.Errorf("--agent-cwd: %w", err)
	}
	if o.stateDir == "" {
		o.stateDir = filepath.Join(cfg.AgentCwd, ".buzz-acp")
		if wd, err := os.Getwd(); err == nil {
			o.stateDir = filepath.Join(wd, ".buzz-acp")
		}
	}
	cfg.StateDir = o.stateDir
	if cfg.AgentCommand, err = resolveAgent(cfg.AgentCommand); err != nil {
		return cfg, noop, err
	}
	switch {
	case o.noBasePrompt:
	case o.basePromptFile != "":
		if cfg.BasePrompt, err = readText(o.basePromptFile, 1<<20); err != nil {
			return cfg, noop, fmt.Errorf("--base-prompt-file: %w", err)
		}
	default:
		cfg.BasePrompt = prompt.DefaultBasePrompt()
		if cfg.BuzzCLIDir != "" {
			// Login shells (bash -l, as codex uses) reset PATH; name the CLI's absolute path too.
			cfg.BasePrompt += "\n\nThe `buzz` CLI is at `" + filepath.Join(cfg.BuzzCLIDir, "buzz") +
				"`; use that path if `buzz` is not found on PATH."
		}
	}
	cfg.SystemPrompt = o.systemPrompt
	if o.systemPromptFile != "" {
		if cfg.SystemPrompt, err = readText(o.systemPromptFile, 1<<20); err != nil {
			return cfg, noop, fmt.Errorf("--system-prompt-file: %w", err)
		}
	}
	cfg.HeartbeatPrompt = o.heartbeatPrompt
	if o.heartbeatPromptFile != "" {
		if cfg.HeartbeatPrompt, err = readText(o.heartbeatPromptFile, 1<<20); err != nil {
			return cfg, noop, fmt.Errorf("--heartbeat-prompt-file: %w", err)
		}
	}
	cfg.Observer = observer.NewBus(2000)
	closeLog := noop
	if o.activityLog != "" {
		fh, err := os.OpenFile(o.activityLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return cfg, noop, fmt.Errorf("--activity-log: %w", err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { observer.WriteJSONLines(ctx, cfg.Observer, fh); close(done) }()
		closeLog = func() { cancel(); <-done; fh.Close() }
	}
	return cfg, closeLog, nil
}

// resolveAgent finds the agent command: as given if it has a path, else beside this executable
// (so a bundled buzz-agent is found wherever buzz-acp is installed), else on PATH.
func resolveAgent(command string) (string, error) {
	if strings.ContainsRune(command, filepath.Separator) {
		if _, err := os.Stat(command); err != nil {
			return "", fmt.Errorf("agent command %q not found", command)
		}
		return command, nil
	}
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), command)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	p, err := exec.LookPath(command)
	if err != nil {
		return "", fmt.Errorf("agent command %q not found beside buzz-acp or on PATH (set --agent-command)", command)
	}
	return p, nil
}

func absDir(dir string) (string, error) {
	if dir == "" {
		return os.Getwd()
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	st, err := os.Stat(abs)
	if err != nil {
		return "", err
	}
	if !st.IsDir() {
		return "", fmt.Errorf("%s is not a directory", abs)
	}
	return abs, nil
}

func readText(path string, max int64) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if st.Size() > max {
		return "", fmt.Errorf("%s is larger than %d bytes", path, max)
	}
	b, err := os.ReadFile(path)
	return string(b), err
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// secs converts a seconds flag; 0 becomes floor, as upstream does.
func secs(n, floor int) time.Duration {
	if n <= 0 {
		n = floor
	}
	return time.Duration(n) * time.Second
}

// Flag helpers: the env var, when set, becomes the flag's default, so an explicit flag wins.
func str(f *pflag.FlagSet, p *string, name, env, def, usage string) {
	if v, ok := os.LookupEnv(env); ok {
		def = v
	}
	f.StringVar(p, name, def, usage+" ["+env+"]")
}

func num(f *pflag.FlagSet, envErrs *[]error, p *int, name, env string, def int, usage string) {
	if v, ok := os.LookupEnv(env); ok {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			*envErrs = append(*envErrs, fmt.Errorf("%s=%q is not a whole number", env, v))
		} else {
			def = n
		}
	}
	f.IntVar(p, name, def, usage+" ["+env+"]")
}

func boolean(f *pflag.FlagSet, envErrs *[]error, p *bool, name, env, usage string) {
	def := false
	if v, ok := os.LookupEnv(env); ok {
		var err error
		if def, err = strconv.ParseBool(strings.TrimSpace(v)); err != nil {
			*envErrs = append(*envErrs, fmt.Errorf("%s=%q is not true or false", env, v))
		}
	}
	f.BoolVar(p, name, def, usage+" ["+env+"]")
}
