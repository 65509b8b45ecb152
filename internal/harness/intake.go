package harness

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/journal"
	"github.com/buzz-harness/buzz/internal/protocol"
)

var (
	errOwnerCancel = errors.New("cancelled by the owner")
	errRotate      = errors.New("session rotated by the owner")
	errLeft        = errors.New("agent left the channel")
)

// handleEvent runs the intake pipeline for one channel event, in upstream's order:
// membership → ignore self → owner commands → author gate → queue.
func (h *Harness) handleEvent(ctx context.Context, ev *nostr.Event) {
	chID, ok := protocol.ChannelID(ev.Tags)
	if !ok {
		return
	}
	c := h.channels[chID]
	if c == nil {
		return // not (or no longer) a member
	}
	if !h.seen.Add(ev.ID) || h.jrnl.Handled(ev.ID) {
		return // a replay: never handled twice
	}
	if ev.PubKey == h.agent {
		return
	}
	if cmd := ParseOwnerCommand(ev, h.cfg.Owner, h.agent); cmd != CmdNone {
		h.skip(ev)
		h.ownerCommand(ctx, cmd, c, ev)
		return
	}
	if !h.gate.Allows(ev.PubKey, c.Type) {
		h.skip(ev)
		h.log.Debug("author gate dropped event", "event", ev.ID, "author", ev.PubKey, "channel", chID)
		return
	}
	// Journal before acknowledging: an event we cannot make durable is not accepted (the relay
	// will offer it again after a reconnect).
	raw, _ := json.Marshal(ev)
	if err := h.jrnl.Append(journal.Entry{ChannelID: chID, Event: raw, EventID: ev.ID, CreatedAt: int64(ev.CreatedAt), AcceptedAt: h.now()}); err != nil {
		h.seen.Forget(ev.ID)
		h.log.Error("cannot journal event; not accepting it", "event", ev.ID, "channel", chID, "err", err)
		return
	}
	h.enqueue(chID, ev)
}

func (h *Harness) enqueue(chID string, ev *nostr.Event) {
	if dropped := h.queue.Push(chID, ev, h.now()); dropped != nil {
		h.log.Warn("queue full; dropped oldest event", "channel", chID, "event", dropped.ID)
		h.done(dropped.ID)
	}
	h.log.Info("queued", "channel", chID, "event", ev.ID, "author", ev.PubKey)
	h.poke()
}

// skip records an event handled without a turn, so a replay after restart ignores it.
func (h *Harness) skip(ev *nostr.Event) {
	if err := h.jrnl.Skip(ev.ID, int64(ev.CreatedAt)); err != nil {
		h.log.Warn("journal", "err", err)
	}
}

// done records terminal outcomes (answered, dead-lettered, dropped) in the journal.
func (h *Harness) done(ids ...string) {
	if err := h.jrnl.Done(ids...); err != nil {
		h.log.Warn("journal", "err", err)
	}
}

// replayJournal queues accepted events that never reached a terminal outcome, in order, before
// any new event. Events of channels we are no longer in are finished. A batch that was in flight
// when we stopped counts as answered if the agent's reply to it landed (the outcome just was not
// recorded); otherwise it is prompted again.
func (h *Harness) replayJournal(ctx context.Context) {
	type batchKey struct {
		ch string
		at int64
	}
	inflight := map[batchKey][]*nostr.Event{}
	var order []batchKey
	n := 0
	for _, e := range h.jrnl.Pending() {
		ev := new(nostr.Event)
		if err := json.Unmarshal(e.Event, ev); err != nil || ev.ID != e.EventID {
			h.log.Warn("journal: skipping unreadable entry", "event", e.EventID)
			h.done(e.EventID)
			continue
		}
		if h.channels[e.ChannelID] == nil {
			h.done(e.EventID)
			continue
		}
		if !e.InFlightAt.IsZero() {
			k := batchKey{e.ChannelID, e.InFlightAt.Unix()}
			if inflight[k] == nil {
				order = append(order, k)
			}
			inflight[k] = append(inflight[k], ev)
			continue
		}
		h.seen.Add(ev.ID)
		h.enqueue(e.ChannelID, ev)
		n++
	}
	// In-flight batches go first: they were accepted before anything still waiting.
	for i := len(order) - 1; i >= 0; i-- {
		k := order[i]
		evs := inflight[k]
		if h.answered(ctx, k.ch, evs, time.Unix(k.at, 0)) {
			h.log.Info("journal: batch in flight at the restart was already answered", "channel", k.ch, "events", len(evs))
			for _, ev := range evs {
				h.done(ev.ID)
			}
			continue
		}
		for j := len(evs) - 1; j >= 0; j-- {
			h.seen.Add(evs[j].ID)
			h.queue.PushFront(k.ch, evs[j], h.now())
			n++
		}
	}
	if n > 0 {
		h.log.Info("replayed journal", "events", n)
		h.poke()
	}
}

// answered reports whether the agent has posted, at or after since, a message in ch that replies
// to one of evs or to their thread: the sign that a turn's reply landed even though its outcome
// was not recorded (the harness or the agent died first). On a failed query it says no:
// answering twice beats never answering.
func (h *Harness) answered(ctx context.Context, ch string, evs []*nostr.Event, since time.Time) bool {
	refs := map[string]bool{}
	for _, ev := range evs {
		refs[ev.ID] = true
		if root := protocol.ParseThread(ev.Tags).Root; root != "" {
			refs[root] = true
		}
	}
	got, err := h.query(ctx, nostr.Filter{Kinds: []int{protocol.KindStreamMessage}, Authors: []string{h.agent},
		Tags: nostr.TagMap{"h": {ch}}, Since: ptrTS(since), Limit: 100})
	if err != nil {
		return false
	}
	for _, r := range got {
		for _, t := range r.Tags {
			if len(t) >= 2 && t[0] == "e" && refs[t[1]] {
				return true
			}
		}
	}
	return false
}

// ownerCommand carries out !cancel, !rotate, !shutdown and !status and answers each — no-ops
// included — with an agent-signed kind 40099 row in the thread where it was typed.
func (h *Harness) ownerCommand(ctx context.Context, cmd OwnerCommand, c *channel, ev *nostr.Event) {
	h.log.Info("owner command", "command", cmd, "channel", c.ID)
	stop := h.inflight[c.ID]
	outcome := map[string]any{"actor": ev.PubKey, "target": h.agent}
	switch cmd {
	case CmdCancel:
		if stop != nil {
			stop(errOwnerCancel)
			outcome["type"] = "turn_cancelled"
		} else {
			outcome["type"] = "cancel_noop"
		}
	case CmdRotate:
		had := stop != nil
		if _, ok := h.store.Get(c.ID, h.storeScope()); ok {
			had = true
		}
		if err := h.store.Remove(c.ID); err != nil {
			h.log.Warn("session store", "err", err)
		}
		h.store.RequestFresh(c.ID)
		for _, s := range h.slots {
			if s.invalidateChannel(c.ID, s.busy) {
				had = true
			}
		}
		if stop != nil {
			stop(errRotate)
		}
		outcome["type"] = "session_rotated"
		if !had {
			outcome["type"] = "rotate_noop"
		}
	case CmdShutdown:
		outcome["type"] = "agent_shutdown"
	case CmdStatus:
		outcome["type"] = "status"
		outcome["status"] = h.status()
	}
	row := h.outcomeRow(c.ID, ev, outcome)
	if cmd == CmdShutdown {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		h.publish(pctx, row)
		cancel()
		h.shutdown()
		return
	}
	go func() {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		h.publish(pctx, row)
	}()
}

// outcomeRow builds the 40099 row answering an owner command, threaded under the command.
func (h *Harness) outcomeRow(chID string, cmdEv *nostr.Event, payload map[string]any) *nostr.Event {
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

func (h *Harness) publish(ctx context.Context, ev *nostr.Event) {
	res, err := h.bridge.Publish(ctx, ev)
	if err != nil {
		h.log.Warn("publish failed", "kind", ev.Kind, "err", err)
		return
	}
	if !res.Accepted {
		h.log.Warn("relay refused event", "kind", ev.Kind, "message", res.Message)
	}
}

// status summarises queued and in-flight work per channel.
func (h *Harness) status() map[string]any {
	chans := map[string]any{}
	for id := range h.channels {
		chans[id] = map[string]any{"queued": h.queue.Len(id), "in_flight": h.queue.InFlight(id)}
	}
	return map[string]any{"channels": chans}
}
