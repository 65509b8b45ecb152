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

// OwnerCommand is a control command the agent's owner typed in a conversation: !cancel,
// !rotate, !shutdown, !status, !model / !mode with the value to switch to, or !budget with
// today's spend cap (budget.go).
type OwnerCommand struct {
	Name  string
	Value string // !model, !mode and !budget only
}

const (
	CmdCancel   = "!cancel"
	CmdRotate   = "!rotate"
	CmdShutdown = "!shutdown"
	CmdStatus   = "!status"
	CmdModel    = "!model"
	CmdMode     = "!mode"
)

// ownerCommands are the command names, and whether each takes a value.
var ownerCommands = map[string]bool{CmdCancel: false, CmdRotate: false, CmdShutdown: false, CmdStatus: false, CmdModel: true, CmdMode: true, CmdBudget: true}

// ParseOwnerCommand recognises an owner command: a kind-9 event from owner that p-tags agent,
// whose words are the command (and its one value, for !model, !mode and !budget) with nothing else but
// mention text before or after (mention text starts with "@" or "nostr:" and may span words: a
// display name). Anything else, such as "please !rotate", "!rotate now" or "!model a b", is an
// ordinary message.
func ParseOwnerCommand(ev *nostr.Event, owner, agent string) (OwnerCommand, bool) {
	if owner == "" || ev.Kind != protocol.KindStreamMessage || ev.PubKey != owner || !protocol.Mentioned(ev.Tags, agent) {
		return OwnerCommand{}, false
	}
	words := strings.Fields(ev.Content)
	for i, w := range words {
		valued, known := ownerCommands[w]
		if !known {
			continue
		}
		cmd, rest := OwnerCommand{Name: w}, words[i+1:]
		if valued {
			if len(rest) == 0 || isMentionWord(rest[0]) {
				return OwnerCommand{}, false
			}
			cmd.Value, rest = rest[0], rest[1:]
		}
		if !mentionsOnly(words[:i]) || !mentionsOnly(rest) {
			return OwnerCommand{}, false
		}
		return cmd, true
	}
	return OwnerCommand{}, false
}

// setting is the agent setting a !model or !mode command changes ("" for the others).
func (c OwnerCommand) setting() string {
	switch c.Name {
	case CmdModel:
		return settingModel
	case CmdMode:
		return settingMode
	}
	return ""
}

func isMentionWord(w string) bool { return strings.HasPrefix(w, "@") || strings.HasPrefix(w, "nostr:") }

// mentionsOnly: no words, or words starting with a mention (a display name may span words).
func mentionsOnly(words []string) bool { return len(words) == 0 || isMentionWord(words[0]) }

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

// Allows reports whether an event by author in a channel of type t may be prompted.
// DMs (and channels whose type is unknown — fail closed) only admit the owner.
func (g Gate) Allows(author string, t protocol.ChannelType) bool {
	if g.Mode == RespondNobody {
		return false
	}
	isOwner := g.Owner != "" && author == g.Owner
	if ownerOnly(t) {
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

// ownerOnly: in DMs, and in channels whose type is unknown (fail closed), only the owner is
// answered.
func ownerOnly(t protocol.ChannelType) bool {
	return t == protocol.ChannelDM || t == protocol.ChannelUnknown || t == ""
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

// ownerCommand carries out an owner command and answers it — no-ops included — with an
// agent-signed kind 40099 row in the thread where it was typed. It acts on the conversation it
// is typed in: its thread, or the whole channel.
func (h *Harness) ownerCommand(ctx context.Context, cmd OwnerCommand, c *channel, ev *nostr.Event) {
	k := h.convOf(c, ev)
	if setting := cmd.setting(); setting != "" {
		h.ownerSetting(ctx, setting, cmd.Value, c, ev)
		return
	}
	h.log.Info("owner command", "command", cmd.Name, "channel", c.ID, "conversation", k.String())
	var running *turn
	if cv := h.convs.get(k); cv != nil {
		running = cv.turn
	}
	outcome := map[string]any{"actor": ev.PubKey, "target": h.agent}
	switch cmd.Name {
	case CmdCancel:
		if running != nil {
			running.cancel(errOwnerCancel)
			outcome["type"] = RowTurnCancelled
		} else {
			outcome["type"] = RowTurnCancelNoop
		}
	case CmdRotate:
		switch {
		case !h.rotate(k):
			outcome["type"] = RowSessionRotateNoop
		case running != nil:
			outcome["type"] = RowSessionRotatedInFlight
		default:
			outcome["type"] = RowSessionRotated
		}
	case CmdShutdown:
		outcome["type"] = RowShutdown
	case CmdStatus:
		outcome["type"] = RowStatus
		outcome["status"] = status(h.chans.byID, h.convs, h.replies, c.ID)
		outcome["spend"] = h.budget.status()
	case CmdBudget:
		h.budgetCommand(cmd.Value, outcome)
	}
	row := outcomeRow(c.ID, ev, outcome, h.clock.Now())
	if cmd.Name == CmdShutdown {
		// The row first (bounded), then the run ends: off the loop, which goes on meanwhile.
		h.tasks.Go(func() {
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			h.relay.publish(pctx, row)
			cancel()
			h.shutdown()
		})
		return
	}
	h.relay.publishLater(ctx, &h.tasks, row)
}

// rotate forgets a conversation's session everywhere — the store, every agent, a running turn —
// so its next turn opens a fresh one. It reports whether there was a session to forget.
func (h *Harness) rotate(k convKey) bool {
	_, had := h.store.Get(k, h.cfg.sessionOrigin())
	h.store.Remove(k)
	h.convs.update(k, func(c *conversation) {
		if c.dropSessions() {
			had = true
		}
		c.fresh = true
		if c.turn != nil {
			c.turn.cancel(errRotate)
		}
	})
	return had
}

// outcomeRow builds the 40099 row answering an owner command, threaded under the command.
func outcomeRow(chID string, cmdEv *nostr.Event, payload map[string]any, now time.Time) *nostr.Event {
	content, _ := json.Marshal(payload)
	tags := nostr.Tags{{"h", chID}}
	tags = append(tags, threadTags(cmdEv)...)
	return &nostr.Event{Kind: protocol.KindSystemMessage, Content: string(content), Tags: tags, CreatedAt: nostr.Timestamp(now.Unix())}
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

// status summarises queued and in-flight work per channel (over all its conversations), and the
// silent turns so far (reply.go): how many, and for how many the agent's text was posted. The row
// is read by everyone who can read the channel it is typed in (here), so only that channel and
// open channels are listed by id; private channels and DMs are summed up under "others" (how
// many, queued, conversations in flight), their ids left out.
func status(channels map[string]*channel, convs *conversations, replies replyCounts, here string) map[string]any {
	chans := map[string]any{}
	var others, othersQueued, othersInFlight int
	for id, c := range channels {
		n := convs.InFlight(id)
		if id != here && c.Type != protocol.ChannelStream {
			others++
			othersQueued += convs.Len(id)
			othersInFlight += n
			continue
		}
		chans[id] = map[string]any{"queued": convs.Len(id), "in_flight": n > 0, "conversations_in_flight": n}
	}
	return map[string]any{"channels": chans,
		"others":       map[string]any{"channels": others, "queued": othersQueued, "conversations_in_flight": othersInFlight},
		"silent_turns": replies.silent, "fallbacks_published": replies.fallbacks}
}
