package harness

import (
	"strconv"
	"strings"
)

// Route is how standing context reaches an agent. One decision per agent process, consulted by
// both session creation and prompt rendering so the two cannot disagree.
type Route string

const (
	// RouteSpecSystemPrompt: the agent advertises sessionCapabilities.systemPrompt, so
	// session/new (and load/resume) carry systemPrompt {mode: "append", content: [...]}.
	RouteSpecSystemPrompt Route = "system_prompt"
	// RouteClaudeMeta: claude-agent-acp ≥ 0.6.0 takes _meta.systemPrompt = {append: text}.
	RouteClaudeMeta Route = "claude_meta"
	// RouteGoose: goose's _goose/unstable/session/system-prompt/set after session/new.
	RouteGoose Route = "goose_method"
	// RouteUserMessage: the standing sections lead the first prompt of each session, once.
	RouteUserMessage Route = "user_message"
)

// SystemRole reports whether the route delivers standing context outside user messages.
func (r Route) SystemRole() bool { return r != RouteUserMessage }

// claudeAgentPackages are the published names of the Claude ACP adapter.
var claudeAgentPackages = map[string]bool{
	"@agentclientprotocol/claude-agent-acp": true,
	"@zed-industries/claude-agent-acp":      true,
	"@zed-industries/claude-code-acp":       true,
}

// AgentIdentity is what initialize told us that matters for the route.
type AgentIdentity struct {
	Name             string
	Version          string
	SpecSystemPrompt bool       // sessionCapabilities.systemPrompt advertised
	GooseProbe       ProbeState // what goose's system-prompt method did on this process
	LoadSession      bool
	Resume           bool
	Close            bool // sessionCapabilities.close: idle sessions are closed with session/close
	Steering         bool // initialize _meta.steering.supported: _session/steering reaches a running turn
	Images           bool // promptCapabilities.image: image attachments go along as image blocks (images.go)
	MCPHTTP          bool // mcpCapabilities.http: its sessions get the MCP servers over HTTP (mcpbridge.go)
}

// ProbeState is what goose's system-prompt probe found on an agent process.
type ProbeState int

const (
	ProbeUnknown     ProbeState = iota // not tried yet (or not goose)
	ProbeSupported                     // the custom method took the system prompt
	ProbeUnsupported                   // method not found: standing context goes in the user message
)

// DecideRoute picks the standing-context route for an agent. goose is RouteGoose until its probe
// has found the method missing; then standing context falls back to the user message.
func DecideRoute(a AgentIdentity) Route {
	name := strings.ToLower(strings.TrimSpace(a.Name))
	switch {
	case a.SpecSystemPrompt:
		return RouteSpecSystemPrompt
	case claudeAgentPackages[name] && versionAtLeast(a.Version, 0, 6, 0):
		return RouteClaudeMeta
	case name == "goose" && a.GooseProbe != ProbeUnsupported:
		return RouteGoose
	}
	return RouteUserMessage
}

// versionAtLeast parses a semver-ish "x.y.z" (leading v, pre-release and build ignored) and
// compares it to the floor. Absent or unparseable versions are not supported: an ignored _meta
// key would leave the agent with no instructions at all.
func versionAtLeast(v string, major, minor, patch int) bool {
	v = strings.TrimPrefix(strings.TrimSpace(v), "v")
	if i := strings.IndexAny(v, "-+"); i >= 0 {
		v = v[:i]
	}
	parts := strings.Split(v, ".")
	if len(parts) != 3 {
		return false
	}
	var n [3]int
	for i, p := range parts {
		x, err := strconv.Atoi(p)
		if err != nil || x < 0 {
			return false
		}
		n[i] = x
	}
	want := [3]int{major, minor, patch}
	for i := range n {
		if n[i] != want[i] {
			return n[i] > want[i]
		}
	}
	return true
}
