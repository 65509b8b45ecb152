// Package acpcmd is buzz-acp's command line (the buzz-acp binary and `buzz acp`): flags with
// environment fallbacks, named as upstream buzz-acp names them, turned into a harness.Config.
package acpcmd

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/buzz-harness/buzz/internal/client"
	"github.com/buzz-harness/buzz/internal/cmdflag"
	"github.com/buzz-harness/buzz/internal/console"
	"github.com/buzz-harness/buzz/internal/harness"
	"github.com/buzz-harness/buzz/internal/mcpconfig"
	"github.com/buzz-harness/buzz/internal/observer"
	"github.com/buzz-harness/buzz/internal/opshttp"
	"github.com/buzz-harness/buzz/internal/prompt"
	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/protocol/ownerauth"
	"github.com/buzz-harness/buzz/internal/subrules"
)

// Version is stamped by the build; "dev" otherwise.
var Version = "dev"

const defaultAgent = "buzz-agent"

// DefaultContextMessageLimit is how many thread/conversation messages a prompt carries unless
// --context-message-limit says otherwise; `buzz up` uses it too.
const DefaultContextMessageLimit = 12

// DefaultKinds is harness.DefaultKinds as the --kinds flag spells it.
var DefaultKinds = joinInts(harness.DefaultKinds)

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

// options mirrors the flags before they are checked.
type options struct {
	relayURL, privateKey, owner                    string
	agentCommand, agentArgs, agentCwd              string
	agents                                         int
	idleTimeout, maxTurnDuration, initTimeout      int
	permissions                                    string
	respondTo, allowlist, kinds, channels          string
	homeChannel                                    string
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
	noReactions, noTyping, noPresence              bool
	noPublishDirectory                             bool
	sessionPolicy                                  string
	multipleEvents, dedup                          string
	maxCachedSessions, sessionIdleTTL              int
	activityLog, activityAddr, logLevel            string
	selfAgent                                      bool
	mcpCommand, mcpServers                         string
	model, permissionMode, effortLevel             string
	permissionTimeout                              int
	channelAddPolicy, authTag                      string
	lease                                          string
	maxProcs                                       int
	metricsAddr                                    string
	lazyPool                                       bool
	idlePoolSleep, exitAfterInactivity             int
	replayFloor                                    int64
	maxCostPerDay                                  float64
	maxTokensPerDay                                int64
	subscribe, rulesFile                           string
	kindsGiven                                     bool // --kinds or BUZZ_ACP_KINDS was set
	heartbeatAlways                                bool
	maxImageBytes                                  int64
	// The reply safety net and thread follow (harness reply.go, follow.go).
	publishResponse string
	threadFollow    bool
	threadFollowTTL int
	relayObserver   bool
	turnLiveness    int
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
		// Runs for `buzz acp` too: a subcommand's own hook replaces its parent's.
		PersistentPreRunE: cmdflag.PreRun(os.Getenv),
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Under `buzz acp` the default agent is also this program: `buzz agent`.
			o.selfAgent = cmd.HasParent()
			o.kindsGiven = cmd.Flags().Changed("kinds") || strings.TrimSpace(os.Getenv("BUZZ_ACP_KINDS")) != ""
			cfg, err := o.config(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if err := o.load(&cfg); err != nil {
				return err
			}
			return o.run(cmd.Context(), cfg, cmd.ErrOrStderr())
		},
	}
	f := cmdflag.On(cmd.Flags())
	f.String(&o.relayURL, "relay-url", "BUZZ_RELAY_URL", "ws://localhost:3000", "relay WebSocket URL; several comma-separated are tried in order, and on loss the next is used")
	f.String(&o.privateKey, "private-key", "BUZZ_PRIVATE_KEY", "", "the agent's secret key (hex or nsec); required")
	f.String(&o.owner, "agent-owner", "BUZZ_ACP_AGENT_OWNER", "", "owner pubkey (hex or npub): may run !cancel/!rotate/!shutdown")
	f.String(&o.channelAddPolicy, "channel-add-policy", "BUZZ_ACP_CHANNEL_ADD_POLICY", "", "publish this channel_add_policy (anyone, owner_only, nobody) in the agent's kind 10100 at start (default: publish nothing)")
	f.String(&o.authTag, "auth-tag", ownerauth.EnvVar, "", "the agent's NIP-OA auth tag JSON: its owner is the agent's owner (over --agent-owner); also in its AUTH and on every event it signs")
	f.String(&o.agentCommand, "agent-command", "BUZZ_ACP_AGENT_COMMAND", defaultAgent, "ACP agent to run (under \"buzz acp\", falls back to \"buzz agent\" when no buzz-agent is installed)")
	f.String(&o.agentArgs, "agent-args", "BUZZ_ACP_AGENT_ARGS", "", "agent arguments, comma-separated")
	f.String(&o.agentCwd, "agent-cwd", "BUZZ_ACP_AGENT_CWD", "", "agent working directory (default: current directory)")
	f.Int(&o.agents, "agents", "BUZZ_ACP_AGENTS", 1, "agent processes running channels in parallel (1–32)")
	f.Int(&o.initTimeout, "agent-init-timeout", "BUZZ_ACP_AGENT_INIT_TIMEOUT", 60, "seconds an agent may take to answer initialize before it is killed and respawned")
	f.Int(&o.idleTimeout, "idle-timeout", "BUZZ_ACP_IDLE_TIMEOUT", 620, "seconds without agent output before a turn is cancelled")
	f.Int(&o.maxTurnDuration, "max-turn-duration", "BUZZ_ACP_MAX_TURN_DURATION", 7200, "hard cap on one turn, seconds")
	f.String(&o.permissions, "permissions", "BUZZ_ACP_PERMISSIONS", "allow", "answer agent permission requests: allow (allow_once), deny (reject_once), or ask the owner in the thread")
	f.Int(&o.permissionTimeout, "permission-timeout", "BUZZ_ACP_PERMISSION_TIMEOUT", 600, "with --permissions ask: seconds to wait for the owner before picking the reject option")
	f.String(&o.respondTo, "respond-to", "BUZZ_ACP_RESPOND_TO", "owner-only", "whose mentions to answer: owner-only, allowlist, anyone, nobody")
	f.String(&o.allowlist, "respond-to-allowlist", "BUZZ_ACP_RESPOND_TO_ALLOWLIST", "", "pubkeys (comma-separated) for --respond-to allowlist")
	f.String(&o.kinds, "kinds", "BUZZ_ACP_KINDS", DefaultKinds, "event kinds to subscribe to, comma-separated")
	f.String(&o.channels, "channels", "BUZZ_ACP_CHANNELS", "", "only these channel ids (comma-separated); default all member channels")
	f.String(&o.homeChannel, "home-channel", "BUZZ_ACP_HOME_CHANNEL", "", "a channel id always listened to (with the owner's own channels) however many others the agent was added to")
	f.Bool(&o.noMentionFilter, "no-mention-filter", "BUZZ_ACP_NO_MENTION_FILTER", "receive every event, not only those mentioning the agent")
	f.String(&o.subscribe, "subscribe", "BUZZ_ACP_SUBSCRIBE", "mentions", "what the agent listens to: mentions (--kinds, --no-mention-filter), all (every event of --kinds, or of any kind), or config (the rules of --config)")
	f.String(&o.rulesFile, "config", "BUZZ_ACP_CONFIG", "./buzz-acp.toml", "with --subscribe config: the TOML file of [[rules]] (name, channels, kinds, require_mention, filter, prompt_tag)")
	f.Bool(&o.heartbeatAlways, "heartbeat-always", "BUZZ_ACP_HEARTBEAT_ALWAYS", "prompt on every heartbeat tick, even when nothing is new for the agent")
	f.Int64(&o.maxImageBytes, "max-image-bytes", "BUZZ_ACP_MAX_IMAGE_BYTES", harness.DefaultMaxImageBytes, "largest image attachment also sent as an ACP image block to an agent that advertises promptCapabilities.image (0 = send none)")
	f.Int(&o.contextLimit, "context-message-limit", "BUZZ_ACP_CONTEXT_MESSAGE_LIMIT", DefaultContextMessageLimit, "thread/conversation messages included in a prompt (0–100)")
	f.Int(&o.maxTurnsPerSession, "max-turns-per-session", "BUZZ_ACP_MAX_TURNS_PER_SESSION", 0, "rotate a channel's session after this many turns (0 = never)")
	f.String(&o.sessionTitle, "session-title", "BUZZ_ACP_SESSION_TITLE", "", "agent display name used in _meta.sessionTitle")
	f.String(&o.basePromptFile, "base-prompt-file", "BUZZ_ACP_BASE_PROMPT_FILE", "", "replace the built-in [Base] prompt with this file (≤1 MB)")
	f.Bool(&o.noBasePrompt, "no-base-prompt", "BUZZ_ACP_NO_BASE_PROMPT", "send no [Base] prompt")
	f.String(&o.systemPrompt, "system-prompt", "BUZZ_ACP_SYSTEM_PROMPT", "", "persona text, sent as [System]")
	f.String(&o.systemPromptFile, "system-prompt-file", "BUZZ_ACP_SYSTEM_PROMPT_FILE", "", "persona from a file")
	f.String(&o.teamInstructions, "team-instructions", "BUZZ_ACP_TEAM_INSTRUCTIONS", "", "team instructions, sent as [Team Instructions]")
	f.String(&o.initialMessage, "initial-message", "BUZZ_ACP_INITIAL_MESSAGE", "", "first prompt of every new channel session")
	f.Bool(&o.noMemory, "no-memory", "BUZZ_ACP_NO_MEMORY", "do not load core memory (kind 30174)")
	f.Int(&o.heartbeatInterval, "heartbeat-interval", "BUZZ_ACP_HEARTBEAT_INTERVAL", 0, "seconds between heartbeat prompts (0 = off, else ≥10)")
	f.String(&o.heartbeatPrompt, "heartbeat-prompt", "BUZZ_ACP_HEARTBEAT_PROMPT", "", "heartbeat prompt text")
	f.String(&o.heartbeatPromptFile, "heartbeat-prompt-file", "BUZZ_ACP_HEARTBEAT_PROMPT_FILE", "", "heartbeat prompt from a file")
	f.String(&o.stateDir, "state-dir", "BUZZ_ACP_STATE_DIR", "", "where the session store lives (default <cwd>/.buzz-acp)")
	f.Bool(&o.noResumeSessions, "no-resume-sessions", "BUZZ_ACP_NO_RESUME_SESSIONS", "do not remember or resume channel sessions")
	f.Bool(&o.noReactions, "no-reactions", "BUZZ_ACP_NO_REACTIONS", "do not add 👀 to accepted events")
	f.Bool(&o.noTyping, "no-typing", "BUZZ_ACP_NO_TYPING", "do not send typing indicators (kind 20002) while a turn runs")
	f.Bool(&o.noPresence, "no-presence", "BUZZ_ACP_NO_PRESENCE", "do not send presence (kind 20001)")
	f.Bool(&o.noPublishDirectory, "no-publish-directory", "BUZZ_ACP_NO_PUBLISH_DIRECTORY", "do not publish the agent's kind-10100 directory entry (channels, respond_to) that Buzz Desktop's @ autocomplete reads")
	f.String(&o.sessionPolicy, "session-policy", "BUZZ_ACP_SESSION_POLICY", "thread", "one agent session per thread, or per channel (thread|channel)")
	f.String(&o.multipleEvents, "multiple-event-handling", "BUZZ_ACP_MULTIPLE_EVENT_HANDLING", "steer", "a new message while its conversation's turn runs: queue (wait), steer (fold it into the turn), interrupt (it supersedes the turn), owner-interrupt (interrupt for the owner, else steer)")
	f.String(&o.dedup, "dedup", "BUZZ_ACP_DEDUP", "queue", "events arriving while their conversation's turn runs: queue (answer next) or drop (only with --multiple-event-handling queue)")
	f.Int(&o.maxCachedSessions, "max-cached-conversation-sessions", "BUZZ_ACP_MAX_CACHED_CONVERSATION_SESSIONS", 8, "live sessions per agent process; the least recently used idle one is closed")
	f.Int(&o.sessionIdleTTL, "conversation-session-idle-ttl-secs", "BUZZ_ACP_CONVERSATION_SESSION_IDLE_TTL_SECS", 1800, "close a live session idle this many seconds")
	f.String(&o.activityLog, "activity-log", "BUZZ_ACP_ACTIVITY_LOG", "", "write the activity feed to this file as JSON lines")
	f.String(&o.activityAddr, "activity-addr", "BUZZ_ACP_ACTIVITY_ADDR", "", "serve the activity console on this loopback address (e.g. 127.0.0.1:3002)")
	f.String(&o.mcpCommand, "mcp-command", "BUZZ_ACP_MCP_COMMAND", "", "MCP server (stdio) every session gets, handed the agent's relay URL, key and BUZZ_AUTH_TAG")
	f.String(&o.mcpServers, "mcp-servers", "BUZZ_ACP_MCP_SERVERS", "", "JSON file of more stdio MCP servers for every session (see README)")
	f.Int(&o.maxProcs, "max-procs", "BUZZ_ACP_MAX_PROCS", 1, "cores buzz-acp's own Go code may use at once (0 = Go's default: all, or $GOMAXPROCS); one keeps its handoffs on one thread, which on cores busy with agents cut the p99 mention→prompt time in half (docs/benchmarks.md)")
	f.String(&o.lease, "lease", "BUZZ_ACP_LEASE", "", "hold the agent's lease in PostgreSQL (postgres://…) instead of a local lock file: a second buzz-acp with the same --lease waits as a standby and takes over when the holder dies")
	f.String(&o.model, "model", "BUZZ_ACP_MODEL", "", "model id to switch every session to, if the agent offers it (default: the agent's own)")
	f.String(&o.permissionMode, "permission-mode", "BUZZ_ACP_PERMISSION_MODE", "", "permission mode for every session: any mode id the agent advertises (codex-acp: read-only, workspace-write, …), or Claude's default, auto, acceptEdits, bypassPermissions, dontAsk, plan in kebab-case too (default: the agent's own)")
	f.String(&o.effortLevel, "effort-level", "BUZZ_ACP_EFFORT_LEVEL", "", "effort (thought level) for every session, e.g. low, medium, high, if the agent offers it")
	f.String(&o.publishResponse, "publish-response", "BUZZ_ACP_PUBLISH_RESPONSE", "fallback", "when a person's mention got no visible answer: fallback (post the agent's final text as its reply) or off (post only a notice saying why)")
	cmd.Flags().BoolVar(&o.threadFollow, "thread-follow", true, "after the agent replied in a thread, answer later messages there without an @mention (--thread-follow=false turns it off)")
	cmdflag.Bind(cmd.Flags(), "thread-follow", "BUZZ_ACP_THREAD_FOLLOW")
	f.Int(&o.threadFollowTTL, "thread-follow-ttl-secs", "BUZZ_ACP_THREAD_FOLLOW_TTL_SECS", 86400, "follow a thread this many seconds after the agent's last reply there")
	cmd.Flags().BoolVar(&o.relayObserver, "relay-observer", true, "with an owner known, send NIP-AO observer frames (kind 24200) to the owner and take its control frames (--relay-observer=false turns it off)")
	cmdflag.Bind(cmd.Flags(), "relay-observer", "BUZZ_ACP_RELAY_OBSERVER")
	f.Int(&o.turnLiveness, "turn-liveness-secs", "BUZZ_ACP_TURN_LIVENESS_SECS", 10, "seconds between turn_liveness observer frames while a turn runs (0 = none, else ≥5)")
	f.String(&o.logLevel, "log-level", "BUZZ_ACP_LOG_LEVEL", "info", "debug, info, warn or error")
	f.String(&o.metricsAddr, "metrics-addr", "BUZZ_ACP_METRICS_ADDR", "", "serve Prometheus metrics at /metrics on this address (a bare :port is loopback; default: off)")
	f.Bool(&o.lazyPool, "lazy-pool", "BUZZ_ACP_LAZY_POOL", "start agent processes only when a mention waits for one")
	f.Int(&o.idlePoolSleep, "idle-pool-sleep", "BUZZ_ACP_IDLE_POOL_SLEEP", 0, "stop an agent process idle this many seconds; the next mention starts it and reloads its sessions (0 = never)")
	f.Int(&o.exitAfterInactivity, "exit-after-inactivity", "BUZZ_ACP_EXIT_AFTER_INACTIVITY", 0, "exit 0 once nothing has happened for this many seconds and no work is pending (0 = never)")
	f.Int64(&o.replayFloor, "replay-floor", "BUZZ_ACP_REPLAY_FLOOR", 0, "unix seconds: at start also catch up events from this moment (the mention that woke a scaled-to-zero harness)")
	f.Float64(&o.maxCostPerDay, "max-cost-per-day", "BUZZ_ACP_MAX_COST_PER_DAY", 0, "USD the agent may spend per UTC day (as it reports it); past it mentions get a notice until !budget or the next day (0 = no cap)")
	f.Int64(&o.maxTokensPerDay, "max-tokens-per-day", "BUZZ_ACP_MAX_TOKENS_PER_DAY", 0, "tokens the agent may use per UTC day (as it reports them); past it mentions get a notice (0 = no cap)")
	cmd.AddCommand(modelsCommand(), authMethodsCommand(), authenticateCommand())
	cmd.MarkFlagsMutuallyExclusive("system-prompt", "system-prompt-file")
	cmd.MarkFlagsMutuallyExclusive("heartbeat-prompt", "heartbeat-prompt-file")
	cmd.MarkFlagsMutuallyExclusive("base-prompt-file", "no-base-prompt")
	return cmd
}

// config turns the flags into a harness.Config and checks them: parsing only, no I/O (load
// reads the files and finds the commands they name).
func (o *options) config(stderr io.Writer) (harness.Config, error) {
	if o.maxProcs < 0 {
		return harness.Config{}, errors.New("--max-procs / BUZZ_ACP_MAX_PROCS must be 0 or more")
	}
	if o.maxImageBytes < 0 {
		return harness.Config{}, errors.New("--max-image-bytes / BUZZ_ACP_MAX_IMAGE_BYTES must be 0 or more")
	}
	if err := o.operations(); err != nil {
		return harness.Config{}, err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return harness.Config{}, fmt.Errorf("--log-level: %w", err)
	}
	sk, err := protocol.ParseSecretKey(o.privateKey)
	if err != nil {
		return harness.Config{}, fmt.Errorf("--private-key / BUZZ_PRIVATE_KEY: %w", err)
	}
	cfg := o.harnessConfig(sk, slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})))
	for _, parse := range []func(*harness.Config) error{o.agentSettings, o.people, o.scope} {
		if err := parse(&cfg); err != nil {
			return cfg, err
		}
	}
	if cfg.RelayURL == "" {
		return cfg, errors.New("--relay-url / BUZZ_RELAY_URL is empty")
	}
	if _, err := protocol.PublicKey(sk); err != nil {
		return cfg, fmt.Errorf("--private-key / BUZZ_PRIVATE_KEY: %w", err)
	}
	return cfg, nil
}

// harnessConfig is the harness.Config of the flags that need no checking beyond their type.
func (o *options) harnessConfig(sk string, logger *slog.Logger) harness.Config {
	return harness.Config{
		RelayURL:                      strings.Join(client.SplitRelayURLs(o.relayURL), ","),
		SecretKey:                     sk,
		AgentCommand:                  o.agentCommand,
		AgentArgs:                     cmdflag.List(o.agentArgs),
		Agents:                        o.agents,
		InitTimeout:                   secs(o.initTimeout, 1),
		IdleTimeout:                   secs(o.idleTimeout, 1),
		MaxTurnDuration:               secs(o.maxTurnDuration, 60),
		Permissions:                   harness.Permissions(o.permissions),
		PermissionTimeout:             secs(o.permissionTimeout, 1),
		MaxTurnsPerSession:            o.maxTurnsPerSession,
		RespondTo:                     harness.RespondTo(o.respondTo),
		NoMentionFilter:               o.noMentionFilter,
		ContextMessageLimit:           o.contextLimit,
		SessionTitle:                  o.sessionTitle,
		TeamInstructions:              o.teamInstructions,
		InitialMessage:                o.initialMessage,
		Memory:                        !o.noMemory,
		HeartbeatInterval:             time.Duration(o.heartbeatInterval) * time.Second,
		HeartbeatAlways:               o.heartbeatAlways,
		MaxImageBytes:                 cmp.Or(o.maxImageBytes, -1), // the flag's 0 is "none", the Config's "default"
		NoResumeSessions:              o.noResumeSessions,
		NoReactions:                   o.noReactions,
		NoTyping:                      o.noTyping,
		NoPresence:                    o.noPresence,
		NoPublishDirectory:            o.noPublishDirectory,
		SessionPolicy:                 harness.SessionPolicy(o.sessionPolicy),
		MultipleEventHandling:         harness.EventHandling(o.multipleEvents),
		Dedup:                         harness.Dedup(o.dedup),
		MaxCachedConversationSessions: o.maxCachedSessions,
		ConversationSessionIdleTTL:    time.Duration(o.sessionIdleTTL) * time.Second,
		Logger:                        logger,
		Version:                       Version,
		MCPCommand:                    o.mcpCommand,
		Model:                         strings.TrimSpace(o.model),
		PermissionMode:                strings.TrimSpace(o.permissionMode),
		EffortLevel:                   strings.TrimSpace(o.effortLevel),
		SystemPrompt:                  o.systemPrompt,
		HeartbeatPrompt:               o.heartbeatPrompt,
		PublishResponse:               harness.PublishResponse(o.publishResponse),
		NoThreadFollow:                !o.threadFollow,
		ThreadFollowTTL:               time.Duration(o.threadFollowTTL) * time.Second,
		NoRelayObserver:               !o.relayObserver,
		TurnLiveness:                  time.Duration(o.turnLiveness) * time.Second,
		LazyPool:                      o.lazyPool,
		IdlePoolSleep:                 time.Duration(o.idlePoolSleep) * time.Second,
		ExitAfterInactivity:           time.Duration(o.exitAfterInactivity) * time.Second,
		ReplayFloor:                   unixOrZero(o.replayFloor),
		MaxCostPerDay:                 o.maxCostPerDay,
		MaxTokensPerDay:               o.maxTokensPerDay,
	}
}

func unixOrZero(s int64) time.Time {
	if s <= 0 {
		return time.Time{}
	}
	return time.Unix(s, 0)
}

// operations checks the flags of running at team scale: metrics, sleeping pools, spend caps.
func (o *options) operations() error {
	switch {
	case o.idlePoolSleep < 0:
		return errors.New("--idle-pool-sleep / BUZZ_ACP_IDLE_POOL_SLEEP must be 0 or more seconds")
	case o.exitAfterInactivity < 0:
		return errors.New("--exit-after-inactivity / BUZZ_ACP_EXIT_AFTER_INACTIVITY must be 0 or more seconds")
	case o.replayFloor < 0:
		return errors.New("--replay-floor / BUZZ_ACP_REPLAY_FLOOR must be unix seconds")
	case o.maxCostPerDay < 0 || math.IsNaN(o.maxCostPerDay) || math.IsInf(o.maxCostPerDay, 0):
		return errors.New("--max-cost-per-day / BUZZ_ACP_MAX_COST_PER_DAY must be 0 (no cap) or a dollar amount")
	case o.maxTokensPerDay < 0:
		return errors.New("--max-tokens-per-day / BUZZ_ACP_MAX_TOKENS_PER_DAY must be 0 (no cap) or more")
	}
	if o.metricsAddr != "" && !opshttp.CheckAddr(o.metricsAddr) {
		return fmt.Errorf("--metrics-addr / BUZZ_ACP_METRICS_ADDR: %q is not host:port or :port", o.metricsAddr)
	}
	return nil
}

// agentSettings checks how the agent's permission requests are answered, in which mode, and how
// long a followed thread stays followed.
func (o *options) agentSettings(cfg *harness.Config) error {
	if cfg.PermissionMode != "" {
		var err error
		if cfg.PermissionMode, err = harness.PermissionModeWire(cfg.PermissionMode); err != nil {
			return fmt.Errorf("--permission-mode: %w", err)
		}
	}
	if _, err := harness.ParsePermissions(o.permissions); err != nil {
		return err
	}
	if o.threadFollowTTL < 0 {
		return fmt.Errorf("--thread-follow-ttl-secs must be at least 1, got %d", o.threadFollowTTL)
	}
	return nil
}

// people parses who the agent belongs to and answers: its owner, auth tag, allowlist and the
// channel-add policy it publishes.
func (o *options) people(cfg *harness.Config) error {
	var err error
	if o.owner != "" {
		if cfg.Owner, err = protocol.ParsePubkey(o.owner); err != nil {
			return fmt.Errorf("--agent-owner: %w", err)
		}
	}
	if o.channelAddPolicy != "" {
		if err := client.CheckAddPolicy(o.channelAddPolicy); err != nil {
			return fmt.Errorf("--channel-add-policy: %w", err)
		}
		cfg.ChannelAddPolicy = o.channelAddPolicy
	}
	if cfg.AuthTag = strings.TrimSpace(o.authTag); cfg.AuthTag != "" {
		agent, _ := protocol.PublicKey(cfg.SecretKey)
		if _, err := ownerauth.ResolveOwner(cfg.AuthTag, agent); err != nil {
			return fmt.Errorf("--auth-tag / %s: %w", ownerauth.EnvVar, err)
		}
	}
	if o.allowlist != "" {
		cfg.Allowlist = map[string]bool{}
		for _, p := range cmdflag.List(o.allowlist) {
			pk, err := protocol.ParsePubkey(p)
			if err != nil {
				return fmt.Errorf("--respond-to-allowlist: %w", err)
			}
			cfg.Allowlist[pk] = true
		}
	}
	return nil
}

// scope parses which events the harness subscribes to: kinds and channels.
func (o *options) scope(cfg *harness.Config) error {
	for _, k := range cmdflag.List(o.kinds) {
		n, err := strconv.Atoi(k)
		if err != nil {
			return fmt.Errorf("--kinds: %q is not a number", k)
		}
		cfg.Kinds = append(cfg.Kinds, n)
	}
	mode, err := subrules.ParseMode(o.subscribe)
	if err != nil {
		return err
	}
	switch mode {
	case subrules.ModeAll:
		var kinds []int // any kind, unless --kinds says which
		if o.kindsGiven {
			kinds = cfg.Kinds
		}
		cfg.Rules = subrules.ForMode(mode, kinds, false)
	case subrules.ModeConfig:
		// The rules say which channels and kinds; load reads them. Upstream ignores these flags
		// in config mode, with a warning (given in load, once the logger is set up).
		cfg.Kinds, cfg.NoMentionFilter = nil, false
		return nil
	}
	if o.homeChannel != "" {
		if !protocol.IsUUID(o.homeChannel) {
			return fmt.Errorf("--home-channel: %q is not a channel UUID", o.homeChannel)
		}
		cfg.HomeChannel = o.homeChannel
	}
	if o.channels != "" {
		cfg.Channels = map[string]bool{}
		for _, c := range cmdflag.List(o.channels) {
			if !protocol.IsUUID(c) {
				return fmt.Errorf("--channels: %q is not a channel UUID", c)
			}
			cfg.Channels[c] = true
		}
	}
	return nil
}

// load fills in what the flags name on this machine: the agent command, the working and state
// directories, the prompt files and the MCP servers file. It reads; it creates nothing.
func (o *options) load(cfg *harness.Config) error {
	var err error
	if o.subscribe == string(subrules.ModeConfig) {
		if cfg.Rules, err = loadRules(o.rulesFile, cfg.Logger); err != nil {
			return fmt.Errorf("--config %s: %w", o.rulesFile, err)
		}
		if o.kindsGiven || o.channels != "" || o.noMentionFilter {
			cfg.Logger.Warn("--subscribe config: --kinds, --channels and --no-mention-filter are ignored; the rules decide")
		}
	}
	if o.mcpServers != "" {
		if cfg.MCPServers, err = mcpconfig.Load(o.mcpServers); err != nil {
			return fmt.Errorf("--mcp-servers %s: %w", o.mcpServers, err)
		}
	}
	if cfg.AgentCwd, err = absDir(o.agentCwd); err != nil {
		return fmt.Errorf("--agent-cwd: %w", err)
	}
	if cfg.StateDir = o.stateDir; cfg.StateDir == "" {
		cfg.StateDir = filepath.Join(cfg.AgentCwd, ".buzz-acp")
		if wd, err := os.Getwd(); err == nil {
			cfg.StateDir = filepath.Join(wd, ".buzz-acp")
		}
	}
	if cfg.AgentCommand, err = resolveAgent(cfg.AgentCommand); err != nil {
		exe, xerr := os.Executable()
		if !o.selfAgent || o.agentCommand != defaultAgent || xerr != nil {
			return err
		}
		cfg.AgentCommand, cfg.AgentArgs = exe, append([]string{"agent"}, cfg.AgentArgs...)
	}
	cfg.BuzzCLIDir = harness.BuzzCLIDir()
	return o.loadPrompts(cfg)
}

// loadPrompts reads the prompt files, and gives the default [Base] prompt the CLI's path.
func (o *options) loadPrompts(cfg *harness.Config) error {
	var err error
	switch {
	case o.noBasePrompt:
	case o.basePromptFile != "":
		if cfg.BasePrompt, err = readText(o.basePromptFile, 1<<20); err != nil {
			return fmt.Errorf("--base-prompt-file: %w", err)
		}
	default:
		cfg.BasePrompt = prompt.DefaultBasePrompt()
		if cfg.BuzzCLIDir != "" {
			// Login shells (bash -l, as codex uses) reset PATH; name the CLI's absolute path too.
			cfg.BasePrompt += "\n\nThe `buzz` CLI is at `" + filepath.Join(cfg.BuzzCLIDir, "buzz") +
				"`; use that path if `buzz` is not found on PATH."
		}
	}
	if o.systemPromptFile != "" {
		if cfg.SystemPrompt, err = readText(o.systemPromptFile, 1<<20); err != nil {
			return fmt.Errorf("--system-prompt-file: %w", err)
		}
	}
	if o.heartbeatPromptFile != "" {
		if cfg.HeartbeatPrompt, err = readText(o.heartbeatPromptFile, 1<<20); err != nil {
			return fmt.Errorf("--heartbeat-prompt-file: %w", err)
		}
	}
	return nil
}

// run is buzz-acp once configured: it takes the agent's lease, then starts the activity log,
// the activity console and the harness, and returns once each has stopped, last started first.
func (o *options) run(parent context.Context, cfg harness.Config, stderr io.Writer) error {
	if o.maxProcs > 0 {
		runtime.GOMAXPROCS(o.maxProcs)
	}
	sigCtx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithCancelCause(sigCtx)
	defer cancel(nil)
	// Before anything else is started: a refused second instance leaves no trace, and a standby
	// touches nothing until it holds the lease.
	release, err := o.takeLease(ctx, cfg, cancel)
	if err != nil {
		if sigCtx.Err() != nil {
			return nil // stopped while waiting as a standby
		}
		return err
	}
	defer release()
	cfg.Observer = observer.NewBus(2000)
	if o.activityLog != "" {
		stopLog, err := startActivityLog(o.activityLog, cfg.Observer)
		if err != nil {
			return fmt.Errorf("--activity-log: %w", err)
		}
		defer stopLog()
	}
	if o.activityAddr != "" {
		stopConsole, err := startActivityConsole(ctx, o.activityAddr, cfg, stderr)
		if err != nil {
			return fmt.Errorf("--activity-addr: %w", err)
		}
		defer stopConsole()
	}
	var metrics net.Listener
	if o.metricsAddr != "" {
		if metrics, err = net.Listen("tcp", opshttp.ListenAddr(o.metricsAddr)); err != nil {
			return fmt.Errorf("--metrics-addr: %w", err)
		}
		defer metrics.Close()
	}
	h, err := harness.New(cfg)
	if err != nil {
		return err
	}
	if metrics != nil {
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", h.MetricsHandler())
		defer opshttp.Serve(metrics, mux, "buzz-acp metrics", stderr)()
	}
	if err := h.Run(ctx); err != nil {
		return err
	}
	if cause := context.Cause(ctx); sigCtx.Err() == nil && cause != nil {
		return cause // the lease was lost
	}
	return nil
}

// takeLease holds the agent's lease on every relay it may use, in PostgreSQL with --lease, else
// in lock files, until release. Losing a PostgreSQL lease cancels ctx (through lost) with why.
func (o *options) takeLease(ctx context.Context, cfg harness.Config, lost context.CancelCauseFunc) (release func(), err error) {
	pk, _ := protocol.PublicKey(cfg.SecretKey) // config checked it
	if o.lease != "" {
		l, err := takePGLease(ctx, o.lease, pk, relayList(cfg), cfg.Logger, func(err error) {
			cfg.Logger.Error("stopping: the lease may pass to a standby", "err", err)
			lost(err)
		})
		if err != nil {
			return nil, err
		}
		return l.release, nil
	}
	dir, err := leaseDir()
	if err != nil {
		return nil, err
	}
	return takeLeases(dir, pk, relayList(cfg))
}

// startActivityConsole serves the activity console of cfg's feed on addr and prints its URL,
// until stop, which returns once it has stopped serving.
func startActivityConsole(ctx context.Context, addr string, cfg harness.Config, stderr io.Writer) (stop func(), err error) {
	ctx, cancel := context.WithCancel(ctx)
	url, done, err := console.ServeActivity(ctx, addr, cfg.Observer, cfg.SecretKey)
	if err != nil {
		cancel()
		return nil, err
	}
	fmt.Fprintln(stderr, "buzz-acp activity console:", url)
	return func() {
		cancel()
		<-done
	}, nil
}

// startActivityLog appends the activity feed of bus to the file at path, as JSON lines, until
// stop, which returns once the writer has stopped and the file is closed.
func startActivityLog(path string, bus *observer.Bus) (stop func(), err error) {
	fh, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		observer.WriteJSONLines(ctx, bus, fh)
	}()
	return func() {
		cancel()
		<-done
		fh.Close()
	}, nil
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

// secs converts a seconds flag; 0 becomes floor, as upstream does.
func secs(n, floor int) time.Duration {
	if n <= 0 {
		n = floor
	}
	return time.Duration(n) * time.Second
}

// relayList is every relay the harness may connect to.
func relayList(cfg harness.Config) []string { return client.SplitRelayURLs(cfg.RelayURL) }

// loadRules reads the --config rules file (at most 1 MB).
func loadRules(path string, log *slog.Logger) (*subrules.Set, error) {
	data, err := readText(path, 1<<20)
	if err != nil {
		return nil, err
	}
	return subrules.Parse([]byte(data), func(rule, msg string) { log.Warn("subscription rule", "rule", rule, "problem", msg) })
}
