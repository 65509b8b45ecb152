package harness

import (
	"context"
	"encoding/json"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/journal"
	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/protocol/reminder"
)

// The agent's own NIP-ER reminders wake it. The harness subscribes to the agent's reminders
// (kind 30300 by its key, unbounded, as NIP-ER asks); the relay re-sends one when it falls due,
// and the backlog of a (re)connect holds any that fell due while the harness was down. A due,
// pending reminder that links a message (`buzz reminders create --link`) becomes one more
// accepted event of that message's conversation: journaled like a mention, so it is prompted
// exactly once across crashes, with the note as its content. When its turn ends the harness
// marks it done, publishing the done version the CLI would. A reminder without a link has no
// conversation to wake; it is logged and left to `buzz reminders list --due`.

const subReminders = "reminders"

// reminderTag is the prompt tag a woken reminder is shown with.
const reminderTag = "reminder"

func (h *Harness) subscribeReminders() {
	h.live.Subscribe(subReminders, nostr.Filter{Kinds: []int{reminder.Kind}, Authors: []string{h.agent}})
}

// handleReminder wakes the agent for one of its reminders that is due.
func (h *Harness) handleReminder(ctx context.Context, ev *nostr.Event) {
	r, err := reminder.Open(h.cfg.SecretKey, ev)
	if err != nil || !r.Due(h.clock.Now()) {
		return // not ours, terminal, or not due yet: the relay sends it again when it is
	}
	if h.seen.Has(ev.ID) {
		return // queued, running or finished in this run (the journal replay marks its own seen)
	}
	if h.jrnl.Handled(ev.ID) {
		h.completeReminder(ctx, ev.ID) // finished in an earlier run; its done version did not land
		return
	}
	t := r.Content.Target
	if t == nil || t.ChannelID == "" {
		h.log.Warn("a due reminder links no message; not waking the agent for it", "reminder", r.D)
		return
	}
	c := h.chans.byID[t.ChannelID]
	if c == nil {
		h.log.Warn("a due reminder links a channel the agent is not in", "reminder", r.D, "channel", t.ChannelID)
		return
	}
	h.seen.Add(ev.ID)
	woken := wakeEvent(ev, r, h.agent, timestamp(h.clock))
	raw, _ := json.Marshal(woken)
	if err := h.jrnl.Append(journal.Entry{ChannelID: c.ID, Event: raw, EventID: ev.ID, CreatedAt: int64(woken.CreatedAt),
		AcceptedAt: h.clock.Now(), PromptTag: reminderTag}); err != nil {
		h.seen.Forget(ev.ID)
		h.log.Error("cannot journal the due reminder; not waking for it now", "reminder", r.D, "err", err)
		return
	}
	h.log.Info("reminder due; waking the agent", "reminder", r.D, "channel", c.ID)
	h.enqueue(h.convOf(c, woken), woken, reminderTag)
}

// wakeEvent is the event a due reminder is queued as: the reminder's id (the journal's key),
// the note as content, and tags placing it in the linked message's channel and thread (and
// naming its author, so the prompt asks for a threaded answer).
func wakeEvent(ev *nostr.Event, r reminder.Reminder, self string, at nostr.Timestamp) *nostr.Event {
	t := r.Content.Target
	tags := nostr.Tags{{"h", t.ChannelID}}
	if target := t.ID; protocol.IsHex64(target) {
		root := t.RootID
		if !protocol.IsHex64(root) {
			root = target
		}
		tags = append(tags, protocol.ReplyTags(root, target)...)
	}
	if protocol.IsHex64(t.AuthorPubkey) && t.AuthorPubkey != self {
		tags = append(tags, nostr.Tag{"p", t.AuthorPubkey})
	}
	note := r.Content.Note
	if note == "" {
		note = "(no note)"
	}
	content := "Your reminder is due (set with `buzz reminders create`, id " + r.D + "): " + note
	if t.Preview != "" {
		content += "\nAbout the message: " + t.Preview
	}
	return &nostr.Event{ID: ev.ID, PubKey: self, CreatedAt: at, Kind: reminder.Kind, Tags: tags, Content: content, Sig: ev.Sig}
}

// completeReminders marks the reminders among a finished batch's events done.
func (h *Harness) completeReminders(ctx context.Context, evs []*nostr.Event) {
	for _, ev := range evs {
		if ev.Kind == reminder.Kind && ev.PubKey == h.agent {
			h.completeReminder(ctx, ev.ID)
		}
	}
}

// completeReminder publishes the done version of the reminder whose current version is id, off
// the loop. A reminder changed since (snoozed, cancelled) is left alone.
func (h *Harness) completeReminder(ctx context.Context, id string) {
	h.tasks.Go(func() {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		evs, err := h.relay.query(cctx, nostr.Filter{IDs: []string{id}, Kinds: []int{reminder.Kind}, Authors: []string{h.agent}})
		if err != nil || len(evs) == 0 {
			h.log.Warn("reminder: could not read it to mark it done", "event", id, "err", err)
			return
		}
		heads, err := h.relay.query(cctx, nostr.Filter{Kinds: []int{reminder.Kind}, Authors: []string{h.agent},
			Tags: nostr.TagMap{"d": {protocol.TagValue(evs[0].Tags, "d")}}})
		if err != nil {
			return
		}
		cur := reminder.Heads(h.cfg.SecretKey, heads)
		if len(cur) == 0 || cur[0].EventID != id || cur[0].Content.Status != reminder.Pending {
			return
		}
		c := cur[0].Content
		c.Status = reminder.Done
		at := h.clock.Now()
		if next := time.Unix(cur[0].CreatedAt+1, 0); next.After(at) {
			at = next
		}
		done, err := reminder.Build(h.cfg.SecretKey, cur[0].D, c, nil, at)
		if err != nil {
			h.log.Warn("reminder: cannot build its done version", "err", err)
			return
		}
		h.relay.publish(cctx, done)
		h.log.Info("reminder marked done", "reminder", cur[0].D)
	})
}
