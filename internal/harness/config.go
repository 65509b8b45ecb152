package harness

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/buzz-harness/buzz/internal/observer"
)

// DefaultKinds are the event kinds a channel subscription asks for: stream messages, workflow
// approval requests and reminders.
var DefaultKinds = []int{9, 46010, 40007}

// Config is everything buzz-acp needs; cmd/buzz-acp fills it from flags and env.
type Config struct {
	RelayURL string // ws:// or http:// URL of the relay; names the session scope
	// RelayURLs, when set, are all relays to try in order (RelayURL first): the live session
	// and the bridge fail over along them, and so does the agent's buzz CLI (BUZZ_RELAY_URL).
	RelayURLs []string
	SecretKey string // the agent's key, hex
	Owner     string // owner pubkey hex ("" = none)

	AgentCommand string
	AgentArgs    []string
	AgentCwd     string // absolute; default the working directory
	AgentEnv     []string
	Agents       int    // parallel agent processes, 1–32
	BuzzCLIDir   string // directory holding the buzz CLI, put first on the agent's PATH

	InitTimeout        time.Duration // how long an agent may take to answer initialize
	IdleTimeout        time.Duration
	MaxTurnDuration    time.Duration
	CancelGrace        time.Duration
	PermissionsDeny    bool
	MaxTurnsPerSession int

	RespondTo       RespondTo
	Allowlist       map[string]bool
	Kinds           []int
	NoMentionFilter bool
	Channels        map[string]bool // restrict to these channel ids (nil = all)

	ContextMessageLimit int
	SessionTitle        string

	BasePrompt       string // empty with NoBasePrompt
	SystemPrompt     string
	TeamInstructions string
	InitialMessage   string
	Memory           bool

	HeartbeatInterval time.Duration
	HeartbeatPrompt   string

	StateDir         string
	NoResumeSessions bool

	// Acknowledgement (ack.go): 👀 on accepted events, typing while a turn runs, presence.
	NoReactions bool
	NoTyping    bool
	NoPresence  bool

	Logger   *slog.Logger
	Observer *observer.Bus
	Version  string

	// Backoff for agent respawns; nil = 1s·2^(n−1) capped at 30s with jitter.
	RespawnBackoff func(attempt int) time.Duration
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
	if c.ContextMessageLimit < 0 || c.ContextMessageLimit > 100 {
		return fmt.Errorf("--context-message-limit must be 0–100, got %d", c.ContextMessageLimit)
	}
	if c.HeartbeatInterval != 0 && c.HeartbeatInterval < 10*time.Second {
		return fmt.Errorf("--heartbeat-interval must be 0 or at least 10s, got %s", c.HeartbeatInterval)
	}
	if c.AgentCwd == "" || !filepath.IsAbs(c.AgentCwd) {
		return fmt.Errorf("--agent-cwd must be an absolute path, got %q", c.AgentCwd)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Observer == nil {
		c.Observer = observer.NewBus(0)
	}
	return nil
}

// relays is the relay list the clients take: RelayURLs comma-joined, else RelayURL.
func (c *Config) relays() string {
	if len(c.RelayURLs) == 0 {
		return c.RelayURL
	}
	return strings.Join(c.RelayURLs, ",")
}
