package harness

import (
	"strings"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
)

// OwnerCommand is a control command the agent's owner can type in a channel.
type OwnerCommand string

const (
	CmdNone     OwnerCommand = ""
	CmdCancel   OwnerCommand = "!cancel"
	CmdRotate   OwnerCommand = "!rotate"
	CmdShutdown OwnerCommand = "!shutdown"
	CmdStatus   OwnerCommand = "!status"
)

var ownerCommands = []OwnerCommand{CmdCancel, CmdRotate, CmdShutdown, CmdStatus}

// ParseOwnerCommand recognises an owner command: a kind-9 event from owner that p-tags agent,
// whose trimmed content is the bare command, or mention text and the command in either order
// (mention text starts with "@" or "nostr:" and may contain spaces). Anything else, such as
// "please !rotate" or "!rotate now", is an ordinary message.
func ParseOwnerCommand(ev *nostr.Event, owner, agent string) OwnerCommand {
	if owner == "" || ev.Kind != protocol.KindStreamMessage || ev.PubKey != owner || !protocol.Mentioned(ev.Tags, agent) {
		return CmdNone
	}
	text := strings.TrimSpace(ev.Content)
	for _, c := range ownerCommands {
		cmd := string(c)
		if text == cmd {
			return c
		}
		if rest, ok := strings.CutSuffix(text, cmd); ok && isMentionText(rest) {
			return c
		}
		if rest, ok := strings.CutPrefix(text, cmd); ok && isMentionText(rest) {
			return c
		}
	}
	return CmdNone
}

// isMentionText reports whether s (which sat next to a command) is whitespace-separated mention
// text: non-empty after trimming, separated from the command by whitespace, starting with @ or nostr:.
func isMentionText(s string) bool {
	t := strings.TrimSpace(s)
	if t == "" || t == s {
		return false
	}
	return strings.HasPrefix(t, "@") || strings.HasPrefix(t, "nostr:")
}

// RespondTo is the author gate's mode (--respond-to).
type RespondTo string

const (
	RespondOwnerOnly RespondTo = "owner-only"
	RespondAllowlist RespondTo = "allowlist"
	RespondAnyone    RespondTo = "anyone"
	RespondNobody    RespondTo = "nobody"
)

// Gate decides whose events the agent answers.
type Gate struct {
	Mode      RespondTo
	Owner     string          // hex; empty means no owner
	Allowlist map[string]bool // hex pubkeys, for RespondAllowlist
}

// Allows reports whether an event by author in a channel of channelType may be prompted.
// DMs (and channels whose type is unknown — fail closed) only admit the owner.
func (g Gate) Allows(author, channelType string) bool {
	if g.Mode == RespondNobody {
		return false
	}
	isOwner := g.Owner != "" && author == g.Owner
	if channelType == protocol.TypeDM || channelType == "" || channelType == "unknown" {
		return isOwner
	}
	switch g.Mode {
	case RespondAnyone:
		return true
	case RespondAllowlist:
		return isOwner || g.Allowlist[author]
	default: // owner-only
		return isOwner
	}
}
