package harness

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/client"
	"github.com/buzz-harness/buzz/internal/clock"
	"github.com/buzz-harness/buzz/internal/observer"
	"github.com/buzz-harness/buzz/internal/protocol"
)

const subMembership = "membership-notif"

// channel is a subscribed channel and what we know about it.
type channel struct {
	ID    string
	Name  string
	Type  protocol.ChannelType
	About string
	// OwnerShared: the owner created the channel or added the agent to it (a DM: opened it with
	// the agent), or it is the home channel; not merely that the owner is listed as a member.
	// Such channels are never the ones left out.
	OwnerShared bool
}

// channelTable is what the harness knows of channels: those it listens to, those it left while
// a turn of theirs ran, their group subscriptions and the membership lookups under way. Only the
// loop touches it.
type channelTable struct {
	byID    map[string]*channel // subscribed channels
	removed map[string]bool     // channels we were removed from while a turn ran
	subs    subGroups           // the channels' group subscriptions
	threads subGroups           // the followed threads' group subscriptions (follow.go)
	lookups memberLookups       // membership lookups running off the loop
}

func newChannelTable() channelTable {
	return channelTable{
		byID:    map[string]*channel{},
		removed: map[string]bool{},
		subs:    newSubGroups(),
		threads: subGroups{pfx: threadSubPfx, of: map[string]int{}},
		lookups: memberLookups{started: map[string]int{}, done: make(chan membershipCheck, 16)},
	}
}

// gone reports whether the agent is no longer in a channel (left it, or never was).
func (t *channelTable) gone(id string) bool { return t.removed[id] || t.byID[id] == nil }

// errLeft stops a running turn of a channel the agent left.
var errLeft = errors.New("agent left the channel")

// discover finds the channels the agent is a member of and subscribes to each from since. It
// retries on the upstream ladder (1, 2, 4, 8, 16 s) before giving up.
func (h *Harness) discover(ctx context.Context, since time.Time) error {
	var err error
	for attempt, delay := 0, time.Second; attempt < 6; attempt, delay = attempt+1, delay*2 {
		var chans []*channel
		if chans, err = h.relay.memberChannels(ctx); err == nil {
			keep, left := keepChannels(chans, maxChannels)
			if left > 0 {
				h.log.Warn("more channels than the harness listens to; the owner's come first",
					"channels", len(chans), "listening", len(keep), "left_out", left)
			}
			for _, c := range keep {
				h.subscribe(c, since)
			}
			h.flushSubs()
			h.log.Info("channels discovered", "channels", len(keep), "subscriptions", h.chans.subs.count())
			return nil
		}
		h.log.Warn("channel discovery failed; retrying", "err", err, "in", delay)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-clock.After(h.clock, delay):
		}
	}
	return fmt.Errorf("discover channels: %w", err)
}

// keepChannels is at most max channels, the owner's (OwnerShared) first (in their given order),
// and how many were left out.
func keepChannels(chans []*channel, max int) ([]*channel, int) {
	out := slices.Clone(chans)
	slices.SortStableFunc(out, func(a, b *channel) int {
		switch {
		case a.OwnerShared == b.OwnerShared:
			return 0
		case a.OwnerShared:
			return -1
		}
		return 1
	})
	if len(out) <= max {
		return out, 0
	}
	return out[:max], len(out) - max
}

func channelFromMeta(m protocol.ChannelMeta) *channel {
	return &channel{ID: m.ID, Name: m.Name, Type: m.ReportedType(), About: m.About}
}

// subscribe starts listening on a channel from since (flushSubs sends the REQ). At the channel
// cap only one of the owner's channels (OwnerShared) gets in, in place of one that is not.
func (h *Harness) subscribe(c *channel, since time.Time) {
	if !h.cfg.Rules.Covers(c.ID) {
		h.log.Info("no subscription rule covers the channel; not listening to it", "channel", c.ID, "name", c.Name)
		return
	}
	if h.chans.byID[c.ID] == nil && len(h.chans.byID) >= maxChannels {
		victim := ""
		if c.OwnerShared {
			for id, other := range h.chans.byID {
				if !other.OwnerShared && (victim == "" || id < victim) {
					victim = id
				}
			}
		}
		if victim == "" {
			h.log.Warn("channel cap reached; not listening to the channel", "channel", c.ID, "cap", maxChannels)
			return
		}
		h.leave(victim, "channel cap: one of the owner's channels takes its place")
	}
	h.chans.byID[c.ID] = c
	delete(h.chans.removed, c.ID)
	h.chans.subs.add(c.ID, since, c.OwnerShared)
	h.directoryChanged()
	h.log.Info("subscribed", "channel", c.ID, "name", c.Name, "type", c.Type)
}

// channelFilter is the live filter of a group of channels: what the subscription rules listen
// to there (listen.go).
func (h *Harness) channelFilter(ids []string) nostr.Filter { return h.cfg.Rules.Filter(ids, h.agent) }

// flushSubs sends the REQs of the channel and thread groups that changed.
func (h *Harness) flushSubs() {
	h.chans.subs.flush(h.live, h.channelFilter)
	h.chans.threads.flush(h.live, h.threadFilter)
}

// leave stops listening on a channel and forgets everything about it: queued events, the
// remembered sessions, live sessions (a running turn's session is dropped when it returns).
func (h *Harness) leave(id, why string) {
	if _, ok := h.chans.byID[id]; !ok {
		return
	}
	h.chans.subs.remove(id)
	delete(h.chans.byID, id)
	h.directoryChanged()
	h.chans.removed[id] = true
	dropped := h.convs.Drain(id)
	for _, ev := range dropped {
		h.done(ev.ID)
	}
	h.store.RemoveChannel(id)
	if h.follows != nil {
		h.unfollow(h.follows.remove(func(t followedThread) bool { return t.Channel == id }))
	}
	h.convs.inChannel(id, func(c *conversation) {
		c.dropSessions()
		c.settings, c.fresh, c.resumeRetried = agentSettings{}, false, false
		if c.turn != nil {
			c.turn.cancel(errLeft)
		}
	})
	h.log.Info("left channel", "channel", id, "why", why, "dropped_events", len(dropped))
}

// handleIncoming routes one message from the live relay connection.
func (h *Harness) handleIncoming(ctx context.Context, in client.Incoming) {
	switch {
	case in.Closed != "":
		n, isGroup := groupOf(in.SubID)
		switch {
		case isGroup && protocol.ReasonOf(in.Closed) == protocol.ReasonRestricted:
			h.groupRestricted(ctx, n, in.Closed, in.Resume)
		default:
			h.log.Warn("relay closed a subscription", "sub", in.SubID, "reason", in.Closed)
		}
	case len(in.Older) > 0:
		h.pageOlder(ctx, in.SubID, in.Older)
	case in.Event == nil:
	case in.SubID == subMembership:
		h.handleMembership(ctx, in.Event)
	case in.SubID == subReminders:
		h.handleReminder(ctx, in.Event)
	case in.SubID == subOwn:
		h.ownMessage(in.Event)
	case in.SubID == subObserver:
		h.observerControl(ctx, in.Event)
	case in.Event.PubKey == h.agent && slices.Contains(protocol.MessageKinds, in.Event.Kind):
		// One of its own messages that came first on a followed thread's subscription: Live
		// delivers an id once, so the own-messages copy will not come.
		h.ownMessage(in.Event)
	default:
		chID, _ := protocol.ChannelID(in.Event.Tags)
		h.bus.Publish(observer.Scope{ChannelID: chID},
			observer.EventReceived{EventID: in.Event.ID, ReceivedAt: in.Received})
		h.handleEvent(ctx, in.Event, true)
	}
}

// groupRestricted handles the relay refusing a group's REQ: one of its channels is private and
// the agent may no longer read it (removed, or the relay revoked access). The group goes on
// at once without its non-open channels, which come back one by one once a membership lookup
// confirms them, from where the subscription would have resumed; the others are left.
func (h *Harness) groupRestricted(ctx context.Context, n int, reason string, resume *nostr.Timestamp) {
	ids := h.chans.subs.members(n)
	if len(ids) == 0 {
		return
	}
	since := h.chans.subs.groups[n].sent
	if resume != nil {
		since = resume.Time()
	}
	h.chans.subs.closed(n, since)
	var check []string
	for _, id := range ids {
		if c := h.chans.byID[id]; c == nil || c.Type != protocol.ChannelStream {
			check = append(check, id)
		}
	}
	if len(check) == 0 { // the relay says an open channel is restricted: believe it, check all
		check = ids
	}
	h.log.Warn("relay closed a channel subscription; checking membership", "sub", groupSubID(n), "reason", reason, "checking", len(check), "of", len(ids))
	// A failed lookup keeps the channel: were it the one taken away, the relay refuses the
	// group again and we look again, whereas leaving would drop channels we are still in.
	for _, id := range check {
		h.chans.subs.remove(id)
		h.lookup(ctx, id, since, true)
	}
}

// handleMembership reacts to a membership notice (44100/44101). Notices of one second can arrive
// in any order, so the notice only says "look again": the channel's current member list decides
// whether we subscribe (replaying from a little before the notice) or leave.
func (h *Harness) handleMembership(ctx context.Context, ev *nostr.Event) {
	id, ok := protocol.ChannelID(ev.Tags)
	if !ok || !protocol.Mentioned(ev.Tags, h.agent) || !h.seen.Add(ev.ID) {
		return
	}
	if h.cfg.Channels != nil && !h.cfg.Channels[id] {
		return
	}
	// A little before the notice: created_at has one-second resolution and clocks differ.
	h.lookup(ctx, id, ev.CreatedAt.Time().Add(-5*time.Second), ev.Kind == protocol.KindMemberAdded)
}

// lookup starts a membership lookup off the loop; only the newest lookup per channel is
// applied. since is where the channel's events start if it is (re)subscribed; assume is what
// to believe when the lookup fails.
func (h *Harness) lookup(ctx context.Context, id string, since time.Time, assume bool) {
	h.chans.lookups.started[id]++
	m := membershipCheck{id: id, seq: h.chans.lookups.started[id], since: since, assume: assume}
	h.tasks.Go(func() {
		m.info, m.err = h.relay.membership(ctx, id)
		select {
		case h.chans.lookups.done <- m:
		case <-ctx.Done():
		}
	})
}

// memberLookups are the membership lookups running off the loop: how many were started per
// channel (only the newest is applied) and where finished ones arrive.
type memberLookups struct {
	started map[string]int
	done    chan membershipCheck
}

// membershipCheck is one finished lookup.
type membershipCheck struct {
	id     string
	seq    int
	since  time.Time
	assume bool
	info   memberInfo
	err    error
}

// applyMembership subscribes to or leaves a channel after a membership lookup.
func (h *Harness) applyMembership(m membershipCheck) {
	if m.seq != h.chans.lookups.started[m.id] {
		return // a newer lookup is on its way
	}
	member := m.info.member
	if m.err != nil {
		h.log.Warn("membership lookup failed", "channel", m.id, "err", m.err, "assuming_member", m.assume)
		member = m.assume
	}
	switch {
	case member && !h.chans.subs.has(m.id):
		c := h.chans.byID[m.id]
		if c == nil {
			c = &channel{ID: m.id, Name: "unknown", Type: protocol.ChannelUnknown}
			if m.info.meta != nil {
				if m.info.meta.Archived {
					return
				}
				c = channelFromMeta(*m.info.meta)
			}
		}
		if m.err == nil {
			c.OwnerShared = m.info.ownerIn
		}
		h.subscribe(c, m.since)
	case !member && h.chans.byID[m.id] != nil:
		h.leave(m.id, "removed from channel")
	}
}
