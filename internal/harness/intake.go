package harness

import (
	"context"
	"encoding/json"
	"runtime"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/journal"
	"github.com/buzz-harness/buzz/internal/prompt"
	"github.com/buzz-harness/buzz/internal/protocol"
)

// handleEvent runs the intake pipeline for one channel event, in upstream's order:
// membership → ignore self → subscription rules or thread follow → owner commands → author
// gate → queue. An event no rule listens to goes on only if it continues a followed thread
// (follow.go). alone: it came by itself off the live socket, not in a page of many.
func (h *Harness) handleEvent(ctx context.Context, ev *nostr.Event, alone bool) {
	chID, ok := protocol.ChannelID(ev.Tags)
	if !ok {
		return
	}
	c := h.chans.byID[chID]
	if c == nil {
		return // not (or no longer) a member
	}
	if !h.seen.Add(ev.ID) || h.jrnl.Handled(ev.ID) {
		return // a replay: never handled twice
	}
	if ev.PubKey == h.agent {
		return
	}
	in, ok := h.arrival(c, ev)
	if !ok {
		return
	}
	in.alone = alone
	if cmd, ok := ParseOwnerCommand(ev, h.cfg.Owner, h.agent); ok {
		h.skip(ev)
		h.ownerCommand(ctx, cmd, c, ev)
		return
	}
	if ev.PubKey == h.cfg.Owner && ev.Kind == protocol.KindStreamMessage && h.answerQuestion(ev, h.convOf(c, ev)) {
		h.skip(ev) // the owner answered a permission question (--permissions ask)
		return
	}
	switch h.admit(ctx, c, in) {
	case gateDrop:
		h.skip(ev)
		h.log.Debug("author gate dropped event", "event", ev.ID, "author", ev.PubKey, "channel", chID)
		return
	case gateHeld:
		return // finishSiblingLookup accepts or skips it
	}
	h.accept(ctx, c, in)
}

// arriving is an event on its way in, with how it came: the prompt tag of the subscription
// rule that listens to it, or prompt.FollowTag for a message that only continues a followed
// thread; alone when no other event comes in with it (a page of catch-up brings many, which
// are queued together so that one turn answers them).
type arriving struct {
	ev       *nostr.Event
	tag      string
	followed bool
	alone    bool
}

// arrival decides whether the harness listens to an event of channel c at all: a subscription
// rule matches it (listen.go), or it continues a thread the agent follows.
func (h *Harness) arrival(c *channel, ev *nostr.Event) (arriving, bool) {
	if tag, ok := h.listensTo(c, ev); ok {
		return arriving{ev: ev, tag: tag}, true
	}
	if h.followable(c, ev) {
		return arriving{ev: ev, tag: prompt.FollowTag, followed: true}, true
	}
	return arriving{}, false
}

// accept makes an event that passed the gate durable, queues it and acknowledges it.
func (h *Harness) accept(ctx context.Context, c *channel, in arriving) {
	if h.overBudget(ctx, c, in.ev) {
		return
	}
	chID, ev, tag := c.ID, in.ev, in.tag
	// Journal before acknowledging: an event we cannot make durable is not accepted (the relay
	// will offer it again after a reconnect).
	raw, _ := json.Marshal(ev)
	if err := h.jrnl.Append(journal.Entry{ChannelID: chID, Event: raw, EventID: ev.ID, CreatedAt: int64(ev.CreatedAt), AcceptedAt: h.clock.Now(), PromptTag: tag}); err != nil {
		h.seen.Forget(ev.ID)
		h.log.Error("cannot journal event; not accepting it", "event", ev.ID, "channel", chID, "err", err)
		return
	}
	k := h.convOf(c, ev)
	if h.dropWhileBusy(k, ev) {
		return
	}
	h.push(k, ev, tag)
	h.midTurn(ctx, k, ev)
	// The prompt first: a turn a lone event can start goes out before the rest of its
	// bookkeeping (the log line, 👀). The loop runs on one P by default (--max-procs), where a
	// started turn's goroutine runs only once the loop blocks or yields, so it yields.
	if in.alone && h.dispatch(ctx) > 0 {
		runtime.Gosched()
	}
	h.logQueued(k, ev)
	h.ack.queued(chID, ev)
}

// convOf is the conversation an event of channel c belongs to under the configured policy.
func (h *Harness) convOf(c *channel, ev *nostr.Event) convKey {
	return conversationOf(h.cfg.SessionPolicy, *c, ev)
}

func (h *Harness) enqueue(k convKey, ev *nostr.Event, tag string) {
	h.push(k, ev, tag)
	h.logQueued(k, ev)
}

func (h *Harness) logQueued(k convKey, ev *nostr.Event) {
	h.log.Info("queued", "channel", k.Channel, "conversation", k.String(), "event", ev.ID, "author", ev.PubKey)
}

// push queues an event for its conversation's next turn.
func (h *Harness) push(k convKey, ev *nostr.Event, tag string) {
	if dropped := h.convs.PushItem(k, queued{Event: ev, ReceivedAt: h.clock.Now(), Tag: tag}); dropped != nil {
		h.log.Warn("queue full; dropped oldest event", "channel", k.Channel, "conversation", k.String(), "event", dropped.ID)
		h.done(dropped.ID)
	}
	h.inbox.poke()
}

// skip records an event handled without a turn, so a replay after restart ignores it.
func (h *Harness) skip(ev *nostr.Event) {
	if err := h.jrnl.Skip(ev.ID, int64(ev.CreatedAt)); err != nil {
		h.log.Warn("journal", "err", err)
	}
}

// done records terminal outcomes (answered, dead-lettered, dropped) in the journal.
func (h *Harness) done(ids ...string) {
	h.ack.finished(ids...)
	if err := h.jrnl.Done(ids...); err != nil {
		h.log.Warn("journal", "err", err)
	}
}

// replayJournal queues accepted events that never reached a terminal outcome, in order, before
// any new event. Events of channels we are no longer in are finished. A batch that was in flight
// when we stopped counts as answered if the agent's reply to it landed (the outcome just was not
// recorded); else, if the safety net had decided on a reply for it (reply.go), that reply is
// posted now; otherwise it is prompted again.
func (h *Harness) replayJournal(ctx context.Context) {
	// A batch is one conversation's events marked in flight together: sibling threads of a
	// channel can be in flight in the same second, and one's reply must not close the other.
	type batchKey struct {
		conv convKey
		at   int64
	}
	inflight := map[batchKey][]*nostr.Event{}
	tags := map[string]string{}      // event id → prompt tag, of the in-flight events
	ownSecond := map[batchKey]bool{} // every event of the batch marked so
	decided := map[batchKey]json.RawMessage{}
	var order []batchKey
	n := 0
	for _, e := range h.jrnl.Pending() {
		ev := new(nostr.Event)
		if err := json.Unmarshal(e.Event, ev); err != nil || ev.ID != e.EventID {
			h.log.Warn("journal: skipping unreadable entry", "event", e.EventID)
			h.done(e.EventID)
			continue
		}
		c := h.chans.byID[e.ChannelID]
		if c == nil {
			h.done(e.EventID)
			continue
		}
		if !e.InFlightAt.IsZero() {
			k := batchKey{h.convOf(c, ev), e.InFlightAt.Unix()}
			if inflight[k] == nil {
				order = append(order, k)
				ownSecond[k] = true
			}
			ownSecond[k] = ownSecond[k] && e.InFlightOwnSecond
			if e.Outcome != nil {
				decided[k] = e.Outcome
			}
			inflight[k] = append(inflight[k], ev)
			tags[ev.ID] = e.PromptTag
			continue
		}
		h.seen.Add(ev.ID)
		h.enqueue(h.convOf(c, ev), ev, e.PromptTag)
		h.ack.replayed(e.ChannelID, ev)
		n++
	}
	// In-flight batches go first: they were accepted before anything still waiting.
	for i := len(order) - 1; i >= 0; i-- {
		k := order[i]
		evs := inflight[k]
		if h.relay.answered(ctx, k.conv.Channel, evs, time.Unix(k.at, 0), ownSecond[k]) {
			h.log.Info("journal: batch in flight at the restart was already answered", "channel", k.conv.Channel, "conversation", k.conv.String(), "events", len(evs))
			for _, ev := range evs {
				h.done(ev.ID)
			}
			h.completeReminders(ctx, evs)
			continue
		}
		if out := decided[k]; out != nil && h.postRecorded(ctx, out) {
			h.log.Info("journal: posted the reply decided for a batch in flight at the restart", "channel", k.conv.Channel, "conversation", k.conv.String(), "events", len(evs))
			for _, ev := range evs {
				h.done(ev.ID)
			}
			continue
		}
		for j := len(evs) - 1; j >= 0; j-- {
			h.seen.Add(evs[j].ID)
			h.convs.PushFrontItem(k.conv, queued{Event: evs[j], ReceivedAt: h.clock.Now(), Tag: tags[evs[j].ID]})
			h.ack.replayed(k.conv.Channel, evs[j])
			n++
		}
	}
	if n > 0 {
		h.log.Info("replayed journal", "events", n)
		h.inbox.poke()
	}
}
