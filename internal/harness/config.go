package harness

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/buzz-harness/buzz/internal/acp"
	"github.com/buzz-harness/buzz/internal/atomicfile"
	"github.com/buzz-harness/buzz/internal/client"
	"github.com/buzz-harness/buzz/internal/clock"
	"github.com/buzz-harness/buzz/internal/mcpconfig"
	"github.com/buzz-harness/buzz/internal/observer"
	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/protocol/ownerauth"
	"github.com/buzz-harness/buzz/internal/subrules"
)

// DefaultKinds are the event kinds a channel subscription asks for: stream messages, workflow
// approval requests and reminders.
var DefaultKinds = []int{9, 46010, 40007}

// Config is everything buzz-acp needs; cmd/buzz-acp fills it from flags and env.
type Config struct {
	// RelayURL is the relay's ws:// or http:// URL, or several comma-separated, tried in order:
	// the live session and the bridge fail over along them, and so does the agent's buzz CLI
	// (BUZZ_RELAY_URL gets the whole list). The first names the session scope.
	RelayURL  string
	SecretKey string // the agent's key, hex
	Owner     string // owner pubkey hex ("" = none)

	// ChannelAddPolicy ("" = leave the agent's kind 10100 alone) is published at start, with
	// AuthTag (NIP-OA JSON, "" = none) on it; see addpolicy.go.
	ChannelAddPolicy string
	AuthTag          string
	// NoPublishDirectory leaves the kind-10100 directory entry alone (directory.go).
	NoPublishDirectory bool

	AgentCommand string
	AgentArgs    []string
	AgentCwd     string // absolute; default the working directory
	AgentEnv     []string
	Agents       int    // parallel agent processes, 1–32
	BuzzCLIDir   string // directory holding the buzz CLI, put first on the agent's PATH

	InitTimeout     time.Duration // how long an agent may take to answer initialize
	IdleTimeout     time.Duration
	MaxTurnDuration time.Duration
	CancelGrace     time.Duration
	// Permissions answers the agent's permission requests ("" = allow). With ask, the owner is
	// asked in the thread (permask.go), PermissionTimeout (default 10 min) before the reject
	// option is picked.
	Permissions       Permissions
	PermissionTimeout time.Duration
	// Agent settings applied to every session once opened ("" = the agent's own): a model id,
	// a permission mode (any spelling PermissionModeWire takes) and an effort level.
	Model, PermissionMode, EffortLevel string
	MaxTurnsPerSession                 int

	RespondTo       RespondTo
	Allowlist       map[string]bool
	Kinds           []int
	NoMentionFilter bool
	Channels        map[string]bool // restrict to these channel ids (nil = all)
	// HomeChannel ("" = none) is listened to first, like the channels the owner created or
	// added the agent to, whatever else the agent was added to (the stack's #general).
	HomeChannel string
	// Rules decide which events of a channel the agent listens to, and their prompt tags
	// (--subscribe, --config). nil: upstream's mentions rule, from Kinds and NoMentionFilter.
	Rules *subrules.Set

	ContextMessageLimit int
	SessionTitle        string

	BasePrompt       string // empty with NoBasePrompt
	SystemPrompt     string
	TeamInstructions string
	InitialMessage   string
	Memory           bool

	HeartbeatInterval time.Duration
	HeartbeatPrompt   string
	// HeartbeatAlways prompts on every tick; otherwise a tick with nothing new for the agent is
	// skipped (heartbeat.go).
	HeartbeatAlways bool

	// MaxImageBytes is the largest image attachment sent along as an image block to an agent
	// that accepts images (images.go); 0 = DefaultMaxImageBytes, negative = none are sent.
	MaxImageBytes int64

	StateDir         string
	NoResumeSessions bool

	// Pools that sleep (pools.go): LazyPool starts an agent only once work waits for one;
	// IdlePoolSleep stops an agent idle that long (0: never); ExitAfterInactivity ends Run once
	// the harness has been quiet that long (0: never).
	LazyPool            bool
	IdlePoolSleep       time.Duration
	ExitAfterInactivity time.Duration
	// ReplayFloor (BUZZ_ACP_REPLAY_FLOOR): the start also catches up events from this moment.
	ReplayFloor time.Time
	// Spend caps per UTC day, from the usage the agent reports (budget.go); 0 = none.
	MaxCostPerDay   float64
	MaxTokensPerDay int64

	// Acknowledgement (ack.go): 👀 on accepted events, typing while a turn runs, presence.
	NoReactions bool
	NoTyping    bool
	NoPresence  bool

	// SessionPolicy: a session per thread (default) or per channel.
	SessionPolicy SessionPolicy
	// MultipleEventHandling: what a new event does to its conversation's running turn (steer.go).
	MultipleEventHandling EventHandling
	// Dedup: whether events arriving while their conversation's turn runs wait (queue) or are
	// dropped (drop, only with MultipleEventHandling queue).
	Dedup Dedup
	// MaxCachedConversationSessions bounds live sessions per agent process (default 8); the
	// least recently used idle one is closed to make room.
	MaxCachedConversationSessions int
	// ConversationSessionIdleTTL closes a live session idle this long (default 30 min).
	ConversationSessionIdleTTL time.Duration
	// PublishResponse is the reply safety net (reply.go): on a silent turn, post the agent's final
	// text (fallback, the default when empty) or only say why nothing came (off).
	PublishResponse PublishResponse
	// NoThreadFollow turns thread follow off (follow.go): by default, after the agent replied in
	// a thread, later messages there start a turn without an @mention, for ThreadFollowTTL
	// (default 24 h) since its last reply there.
	NoThreadFollow  bool
	ThreadFollowTTL time.Duration

	// Relay observer (NIP-AO, observe.go): with an owner known, telemetry frames to the owner
	// and control frames from it, unless NoRelayObserver. TurnLiveness is the turn_liveness
	// period (0 = none, else at least 5 s).
	NoRelayObserver bool
	TurnLiveness    time.Duration

	// MCP servers every session is opened with: MCPCommand's server, which is handed the agent's
	// relay, key and AuthTag (BUZZ_AUTH_TAG), then MCPServers (--mcp-servers) as written.
	MCPCommand string
	MCPServers []mcpconfig.Server
	mcp        []acp.McpServer // built by Validate

	Logger   *slog.Logger
	Observer *observer.Bus
	Version  string
	// Clock is the time everything waits on and every signed event is dated by (nil: the real
	// clock). Tests run hours of heartbeats and timeouts in milliseconds with a clock.Fake.
	Clock clock.Clock

	// Backoff for agent respawns; nil = 1s·2^(n−1) capped at 30s with jitter.
	RespawnBackoff func(attempt int) time.Duration

	// stateWriteOpts apply to every state-file rewrite (sessions, agents, permission questions):
	// tests stall or fail the disk with them (export_test.go).
	stateWriteOpts []atomicfile.Option
}

// busyStateEvery spaces the writes of state files that change with nearly every turn (today's
// spend, the followed threads): at a hundred turns a second, rewriting and fsyncing them each
// time took a third of buzz-acp's CPU. A crash loses at most what changed in that last second;
// a clean stop writes everything.
const busyStateEvery = time.Second

// busyStateOpts are opts with the writes spaced by busyStateEvery.
func busyStateOpts(opts []atomicfile.Option) []atomicfile.Option {
	return append(slices.Clone(opts), atomicfile.Every(busyStateEvery))
}

// Permissions is how the harness answers an agent's session/request_permission (--permissions).
type Permissions string

const (
	PermissionsAllow Permissions = "allow" // allow_once
	PermissionsDeny  Permissions = "deny"  // reject_once
	PermissionsAsk   Permissions = "ask"   // ask the owner in the thread
)

// PublishResponse is what the harness does on a silent turn (--publish-response).
type PublishResponse string

const (
	PublishOff      PublishResponse = "off"      // post nothing but the failure notice
	PublishFallback PublishResponse = "fallback" // post the agent's final text as its reply
)

// ParsePermissions reads a --permissions value; "" is allow.
func ParsePermissions(s string) (Permissions, error) {
	switch p := Permissions(s); p {
	case "":
		return PermissionsAllow, nil
	case PermissionsAllow, PermissionsDeny, PermissionsAsk:
		return p, nil
	}
	return "", fmt.Errorf("--permissions must be allow, deny or ask, got %q", s)
}

// Validate checks ranges and fills defaults.
func (c *Config) Validate() error {
	if c.SecretKey == "" {
		return errors.New("a private key is required (--private-key or BUZZ_PRIVATE_KEY)")
	}
	if c.AgentCommand == "" {
		return errors.New("an agent command is required (--agent-command)")
	}
	if c.Agents == 0 {
		c.Agents = 1
	}
	if c.Agents < 1 || c.Agents > 32 {
		return fmt.Errorf("--agents must be 1–32, got %d", c.Agents)
	}
	if c.InitTimeout <= 0 {
		c.InitTimeout = 60 * time.Second
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = 620 * time.Second
	}
	if c.MaxTurnDuration <= 0 {
		c.MaxTurnDuration = 7200 * time.Second
	}
	if c.MaxTurnDuration <= c.IdleTimeout {
		return fmt.Errorf("--max-turn-duration (%s) must exceed --idle-timeout (%s)", c.MaxTurnDuration, c.IdleTimeout)
	}
	if c.CancelGrace <= 0 {
		c.CancelGrace = 5 * time.Second
	}
	if c.MaxImageBytes == 0 {
		c.MaxImageBytes = DefaultMaxImageBytes
	}
	switch c.RespondTo {
	case "":
		c.RespondTo = RespondOwnerOnly
	case RespondOwnerOnly, RespondAnyone, RespondNobody:
	case RespondAllowlist:
		if len(c.Allowlist) == 0 {
			return errors.New("--respond-to allowlist needs --respond-to-allowlist")
		}
	default:
		return fmt.Errorf("--respond-to must be owner-only, allowlist, anyone or nobody, got %q", c.RespondTo)
	}
	if len(c.Kinds) == 0 {
		c.Kinds = DefaultKinds
	}
	if c.Rules == nil {
		c.Rules = subrules.ForMode(subrules.ModeMentions, c.Kinds, c.NoMentionFilter)
	}
	if c.ContextMessageLimit < 0 || c.ContextMessageLimit > 100 {
		return fmt.Errorf("--context-message-limit must be 0–100, got %d", c.ContextMessageLimit)
	}
	if c.TurnLiveness != 0 && c.TurnLiveness < 5*time.Second {
		return fmt.Errorf("--turn-liveness-secs must be 0 or at least 5, got %s", c.TurnLiveness)
	}
	if c.HeartbeatInterval != 0 && c.HeartbeatInterval < 10*time.Second {
		return fmt.Errorf("--heartbeat-interval must be 0 or at least 10s, got %s", c.HeartbeatInterval)
	}
	switch c.SessionPolicy {
	case "":
		c.SessionPolicy = PolicyThread
	case PolicyThread, PolicyChannel:
	default:
		return fmt.Errorf("--session-policy must be thread or channel, got %q", c.SessionPolicy)
	}
	if err := c.validateEventHandling(); err != nil {
		return err
	}
	if c.MaxCachedConversationSessions == 0 {
		c.MaxCachedConversationSessions = 8
	}
	if c.MaxCachedConversationSessions < 1 || c.MaxCachedConversationSessions > 1024 {
		return fmt.Errorf("--max-cached-conversation-sessions must be 1–1024, got %d", c.MaxCachedConversationSessions)
	}
	if c.ConversationSessionIdleTTL == 0 {
		c.ConversationSessionIdleTTL = 1800 * time.Second
	}
	if c.ConversationSessionIdleTTL < time.Second {
		return fmt.Errorf("--conversation-session-idle-ttl-secs must be at least 1, got %s", c.ConversationSessionIdleTTL)
	}
	if c.IdlePoolSleep < 0 || c.ExitAfterInactivity < 0 {
		return errors.New("--idle-pool-sleep and --exit-after-inactivity must be 0 or more seconds")
	}
	if c.MaxCostPerDay < 0 || c.MaxTokensPerDay < 0 {
		return errors.New("--max-cost-per-day and --max-tokens-per-day must be 0 (no cap) or more")
	}
	switch c.PublishResponse {
	case "":
		c.PublishResponse = PublishFallback
	case PublishOff, PublishFallback:
	default:
		return fmt.Errorf("--publish-response must be off or fallback, got %q", c.PublishResponse)
	}
	if c.ThreadFollowTTL == 0 {
		c.ThreadFollowTTL = DefaultThreadFollowTTL
	}
	if c.ThreadFollowTTL < time.Second {
		return fmt.Errorf("--thread-follow-ttl-secs must be at least 1, got %s", c.ThreadFollowTTL)
	}
	if c.AgentCwd == "" || !filepath.IsAbs(c.AgentCwd) {
		return fmt.Errorf("--agent-cwd must be an absolute path, got %q", c.AgentCwd)
	}
	p, err := ParsePermissions(string(c.Permissions))
	if err != nil {
		return err
	}
	c.Permissions = p
	if c.Permissions == PermissionsAsk && c.Owner == "" {
		return errors.New("--permissions ask needs an owner to ask (--agent-owner)")
	}
	if c.PermissionTimeout <= 0 {
		c.PermissionTimeout = DefaultPermissionTimeout
	}
	if c.Permissions == PermissionsAsk && c.PermissionTimeout >= c.IdleTimeout {
		// The agent is silent while it waits for the answer: the idle timeout would end the turn first.
		return fmt.Errorf("--permission-timeout (%s) must be shorter than --idle-timeout (%s)", c.PermissionTimeout, c.IdleTimeout)
	}
	if c.PermissionMode != "" {
		w, err := PermissionModeWire(c.PermissionMode)
		if err != nil {
			return fmt.Errorf("--permission-mode %w", err)
		}
		c.PermissionMode = w
	}
	if err := c.buildMCP(); err != nil {
		return err
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Observer == nil {
		c.Observer = observer.NewBus(0)
	}
	if c.Clock == nil {
		c.Clock = clock.Real()
	}
	return nil
}

// buildMCP turns the MCP settings into the session/new entries, refusing a file server that takes
// the --mcp-command server's name.
func (c *Config) buildMCP() error {
	c.mcp = nil
	if c.MCPCommand != "" {
		env := []acp.EnvVariable{
			{Name: "BUZZ_RELAY_URL", Value: c.RelayURL}, // the whole list, as the agent gets it
			{Name: "BUZZ_PRIVATE_KEY", Value: protocol.Nsec(c.SecretKey)},
		}
		if c.AuthTag != "" {
			env = append(env, acp.EnvVariable{Name: "BUZZ_AUTH_TAG", Value: c.AuthTag})
		}
		c.mcp = append(c.mcp, acp.McpServer{Name: mcpCommandName(c.MCPCommand), Command: c.MCPCommand, Args: []string{}, Env: env})
	}
	for i, s := range c.MCPServers {
		if len(c.mcp) > 0 && s.Name == c.mcp[0].Name {
			return fmt.Errorf("--mcp-servers: servers[%d].name: %q is already the --mcp-command server's name", i, s.Name)
		}
		env := make([]acp.EnvVariable, 0, len(s.Env))
		for _, k := range s.EnvNames() {
			env = append(env, acp.EnvVariable{Name: k, Value: s.Env[k]})
		}
		c.mcp = append(c.mcp, acp.McpServer{Name: s.Name, Command: s.Command, Args: s.Args, Env: env})
	}
	return nil
}

// mcpCommandName is the --mcp-command server's name, as upstream names it: the command's file
// stem (/opt/bin/buzz-dev-mcp → buzz-dev-mcp), or "mcp" when there is none.
func mcpCommandName(command string) string {
	base := filepath.Base(command)
	stem := strings.TrimSuffix(base, filepath.Ext(base))
	switch {
	case base == "." || base == string(filepath.Separator):
		return "mcp"
	case stem == "":
		return base // a dot file: its stem is its whole name
	}
	return stem
}

// primaryRelay is the first relay of the list: the session store's records name it, so adding
// fallbacks after it keeps the sessions.
func (c *Config) primaryRelay() string {
	if urls := client.SplitRelayURLs(c.RelayURL); len(urls) > 0 {
		return urls[0]
	}
	return c.RelayURL
}

// resolveOwner takes the owner from the agent's NIP-OA attestation (BUZZ_AUTH_TAG) when there is
// one: the owner who signed for this agent key is the owner, whatever --agent-owner says.
// Without a tag, --agent-owner stands. A tag that does not parse or verify is a startup error,
// not upstream's warning-and-fallback: the same tag goes on the agent's kind 10100 and to the
// MCP server, so running on with a broken credential would fail later and more quietly.
func (c *Config) resolveOwner(agent string) error {
	if c.AuthTag == "" {
		return nil
	}
	owner, err := ownerauth.ResolveOwner(c.AuthTag, agent)
	if err != nil {
		return fmt.Errorf("%s: %w", ownerauth.EnvVar, err)
	}
	if c.Owner != "" && c.Owner != owner && c.Logger != nil {
		c.Logger.Warn("the auth tag names a different owner than --agent-owner; the auth tag wins", "auth_tag_owner", owner, "agent_owner", c.Owner)
	}
	c.Owner = owner
	return nil
}
