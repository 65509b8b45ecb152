package harness

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/client"
	"github.com/buzz-harness/buzz/internal/observer"
	"github.com/buzz-harness/buzz/internal/protocol"
)

const (
	subMembership = "membership-notif"
	subChannelPfx = "ch-"
)

// channel is a subscribed channel and what we know about it.
type channel struct {
	ID    string
	Name  string
	Type  string // stream | private | dm | unknown
	About string
}

// errLeft stops a running turn of a channel the agent left.
var errLeft = errors.New("agent left the channel")

// discover finds the channels the agent is a member of and subscribes to each from since. It
// retries on the upstream ladder (1, 2, 4, 8, 16 s) before giving up.
func (h *Harness) discover(ctx context.Context, since time.Time) error {
	var err error
	for attempt, delay := 0, time.Second; attempt < 6; attempt, delay = attempt+1, delay*2 {
		var chans []*channel
		if chans, err = h.relay.memberChannels(ctx); err == nil {
			for _, c := range chans {
				h.subscribe(c, since)
			}
			return nil
		}
		h.log.Warn("channel discovery failed; retrying", "err", err, "in", delay)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
	}
	return fmt.Errorf("discover channels: %w", err)
}

func channelFromMeta(m protocol.ChannelMeta) *channel {
	return &channel{ID: m.ID, Name: m.Name, Type: m.HarnessType(), About: m.About}
}

// subscribe starts listening on a channel from since.
func (h *Harness) subscribe(c *channel, since time.Time) {
	h.channels[c.ID] = c
	delete(h.removed, c.ID)
	f := nostr.Filter{Tags: nostr.TagMap{"h": {c.ID}}, Since: ptrTS(since)}
	if len(h.cfg.Kinds) > 0 {
		f.Kinds = h.cfg.Kinds
	}
	if !h.cfg.NoMentionFilter {
		f.Tags["p"] = []string{h.agent}
	}
	h.live.Subscribe(subChannelPfx+c.ID, f)
	h.log.Info("subscribed", "channel", c.ID, "name", c.Name, "type", c.Type)
}

// leave stops listening on a channel and forgets everything about it: queued events, the
// remembered session, live sessions (a running turn's session is dropped when it returns).
func (h *Harness) leave(id, why string) {
	if _, ok := h.channels[id]; !ok {
		return
	}
	h.live.Unsubscribe(subChannelPfx + id)
	delete(h.channels, id)
	h.removed[id] = true
	dropped := h.queue.Drain(id)
	for _, ev := range dropped {
		h.done(ev.ID)
	}
	if err := h.store.RemoveIf(func(key string) bool { return key == id || strings.HasPrefix(key, id+":") }); err != nil {
		h.log.Warn("session store", "err", err)
	}
	h.pool.dropChannel(id)
	for k, stop := range h.inflight {
		if k.channelID() == id {
			stop(errLeft)
		}
	}
	h.log.Info("left channel", "channel", id, "why", why, "dropped_events", len(dropped))
}

// handleIncoming routes one message from the live relay connection.
func (h *Harness) handleIncoming(ctx context.Context, in client.Incoming) {
	switch {
	case in.Closed != "":
		id, isChannel := strings.CutPrefix(in.SubID, subChannelPfx)
		switch {
		case isChannel && strings.HasPrefix(in.Closed, "restricted:"):
			h.leave(id, in.Closed)
		default:
			h.log.Warn("relay closed a subscription", "sub", in.SubID, "reason", in.Closed)
		}
	case in.Event == nil:
	case in.SubID == subMembership:
		h.handleMembership(ctx, in.Event)
	default:
		h.bus.Publish(observer.Scope{ChannelID: strings.TrimPrefix(in.SubID, subChannelPfx)},
			observer.EventReceived{EventID: in.Event.ID, ReceivedAt: in.Received})
		h.handleEvent(ctx, in.Event)
	}
}

// handleMembership reacts to a membership notice (44100/44101). Notices of one second can arrive
// in any order, so the notice only says "look again": the channel's current member list decides
// whether we subscribe (replaying from a little before the notice) or leave. The lookup runs off
// the loop; only the newest lookup per channel is applied.
func (h *Harness) handleMembership(ctx context.Context, ev *nostr.Event) {
	id, ok := protocol.ChannelID(ev.Tags)
	if !ok || !protocol.Mentioned(ev.Tags, h.agent) || !h.seen.Add(ev.ID) {
		return
	}
	if h.cfg.Channels != nil && !h.cfg.Channels[id] {
		return
	}
	h.lookups.started[id]++
	m := membershipCheck{id: id, seq: h.lookups.started[id], notice: ev}
	h.tasks.Go(func() {
		m.member, m.meta, m.err = h.relay.membership(ctx, id)
		select {
		case h.lookups.done <- m:
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
	notice *nostr.Event
	member bool
	meta   *protocol.ChannelMeta
	err    error
}

// applyMembership subscribes to or leaves a channel after a membership lookup.
func (h *Harness) applyMembership(m membershipCheck) {
	if m.seq != h.lookups.started[m.id] {
		return // a newer notice's lookup is on its way
	}
	member := m.member
	if m.err != nil {
		h.log.Warn("membership lookup failed; trusting the notice", "channel", m.id, "err", m.err)
		member = m.notice.Kind == protocol.KindMemberAdded
	}
	switch {
	case member && h.channels[m.id] == nil:
		c := &channel{ID: m.id, Name: "unknown", Type: "unknown"}
		if m.meta != nil {
			if m.meta.Archived {
				return
			}
			c = channelFromMeta(*m.meta)
		}
		// A little before the notice: created_at has one-second resolution and clocks differ.
		h.subscribe(c, m.notice.CreatedAt.Time().Add(-5*time.Second))
	case !member && h.channels[m.id] != nil:
		h.leave(m.id, "removed from channel")
	}
}
