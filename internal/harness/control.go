package harness

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

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
	if channelType == protocol.TypeDM || channelType == "" || channelType == string(protocol.ChannelUnknown) {
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

// The 40099 row types answering owner commands: upstream's strings, which Buzz Desktop renders
// (and any other type it silently drops), plus our !status extension under its own name.
const (
	RowTurnCancelled          = "agent_turn_cancelled"
	RowTurnCancelNoop         = "agent_turn_cancel_noop"
	RowSessionRotatedInFlight = "agent_session_rotated_in_flight"
	RowSessionRotated         = "agent_session_rotated"
	RowSessionRotateNoop      = "agent_session_rotate_noop"
	RowShutdown               = "agent_shutdown"
	RowStatus                 = "status"
)

// Why an owner command stopped a running turn (its context's cause).
var (
	errOwnerCancel = errors.New("cancelled by the owner")
	errRotate      = errors.New("session rotated by the owner")
)

// ownerCommand carries out !cancel, !rotate, !shutdown and !status and answers each — no-ops
// included — with an agent-signed kind 40099 row in the thread where it was typed.
func (h *Harness) ownerCommand(ctx context.Context, cmd OwnerCommand, c *channel, ev *nostr.Event) {
	// The command acts on the conversation it is typed in: its thread, or the whole channel.
	k := h.scopeOf(c, ev)
	h.log.Info("owner command", "command", cmd, "channel", c.ID, "scope", k.String())
	stop := h.inflight[k]
	outcome := map[string]any{"actor": ev.PubKey, "target": h.agent}
	switch cmd {
	case CmdCancel:
		if stop != nil {
			stop(errOwnerCancel)
			outcome["type"] = RowTurnCancelled
		} else {
			outcome["type"] = RowTurnCancelNoop
		}
	case CmdRotate:
		switch inFlight := stop != nil; {
		case !h.rotate(k, stop):
			outcome["type"] = RowSessionRotateNoop
		case inFlight:
			outcome["type"] = RowSessionRotatedInFlight
		default:
			outcome["type"] = RowSessionRotated
		}
	case CmdShutdown:
		outcome["type"] = RowShutdown
	case CmdStatus:
		outcome["type"] = RowStatus
		outcome["status"] = h.status()
	}
	row := outcomeRow(c.ID, ev, outcome)
	if cmd == CmdShutdown {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		h.relay.publish(pctx, row)
		cancel()
		h.shutdown()
		return
	}
	h.publishLater(ctx, row)
}

// rotate forgets a conversation's session everywhere — the store, every agent, a running turn —
// so its next turn opens a fresh one. It reports whether there was a session to forget.
func (h *Harness) rotate(k scopeKey, stop context.CancelCauseFunc) bool {
	had := stop != nil
	if _, ok := h.store.Get(k.String(), h.cfg.storeScope()); ok {
		had = true
	}
	if err := h.store.Remove(k.String()); err != nil {
		h.log.Warn("session store", "err", err)
	}
	h.store.RequestFresh(k.String())
	if h.pool.dropSessions(k) {
		had = true
	}
	if stop != nil {
		stop(errRotate)
	}
	return had
}

// outcomeRow builds the 40099 row answering an owner command, threaded under the command.
func outcomeRow(chID string, cmdEv *nostr.Event, payload map[string]any) *nostr.Event {
	content, _ := json.Marshal(payload)
	tags := nostr.Tags{{"h", chID}}
	tags = append(tags, threadTags(cmdEv)...)
	return &nostr.Event{Kind: protocol.KindSystemMessage, Content: string(content), Tags: tags, CreatedAt: nostr.Now()}
}

// threadTags are the e tags that reply to ev in its thread (ev starts one if top-level).
func threadTags(ev *nostr.Event) nostr.Tags {
	ref := protocol.ParseThread(ev.Tags)
	root := ref.Root
	if root == "" {
		root = ev.ID
	}
	return protocol.ReplyTags(root, ev.ID)
}

// publishLater publishes off the loop, bounded by ten seconds (and by the run).
func (h *Harness) publishLater(ctx context.Context, ev *nostr.Event) {
	h.tasks.Go(func() { h.publishNow(ctx, ev) })
}

// publishNow publishes from a task goroutine, bounded by ten seconds (and by the run).
func (h *Harness) publishNow(ctx context.Context, ev *nostr.Event) {
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	h.relay.publish(pctx, ev)
}

// status summarises queued and in-flight work per channel (over all its conversations).
func (h *Harness) status() map[string]any {
	chans := map[string]any{}
	for id := range h.channels {
		n := h.queue.InFlight(id)
		chans[id] = map[string]any{"queued": h.queue.Len(id), "in_flight": n > 0, "conversations_in_flight": n}
	}
	return map[string]any{"channels": chans}
}
