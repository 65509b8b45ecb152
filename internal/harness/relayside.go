package harness

import (
	"context"
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

// discover finds the channels the agent is a member of (39002 #p self → 39000 #d) and subscribes
// to each. It retries on the upstream ladder (1, 2, 4, 8, 16 s) before giving up.
func (h *Harness) discover(ctx context.Context) error {
	var err error
	for attempt, delay := 0, time.Second; attempt < 6; attempt, delay = attempt+1, delay*2 {
		var chans []*channel
		if chans, err = h.memberChannels(ctx); err == nil {
			for _, c := range chans {
				h.subscribe(c, h.watermark)
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

func (h *Harness) memberChannels(ctx context.Context) ([]*channel, error) {
	lists, err := h.bridge.Query(ctx, client.Filter{Filter: nostr.Filter{
		Kinds: []int{protocol.KindGroupMembers}, Tags: nostr.TagMap{"p": {h.agent}}, Limit: 1000}})
	if err != nil {
		return nil, err
	}
	var ids []string
	seen := map[string]bool{}
	for i := range lists {
		d := protocol.TagValue(lists[i].Tags, "d")
		if protocol.IsUUID(d) && !seen[d] && protocol.IsMember(&lists[i], h.agent) {
			seen[d] = true
			ids = append(ids, d)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	metas, err := h.bridge.Query(ctx, client.Filter{Filter: nostr.Filter{
		Kinds: []int{protocol.KindGroupMetadata}, Tags: nostr.TagMap{"d": ids}, Limit: len(ids) * 2}})
	if err != nil {
		return nil, err
	}
	byID := map[string]protocol.ChannelMeta{}
	for i := range metas {
		m := protocol.ParseChannelMeta(&metas[i])
		if _, dup := byID[m.ID]; !dup { // newest first
			byID[m.ID] = m
		}
	}
	var out []*channel
	for _, id := range ids {
		if h.cfg.Channels != nil && !h.cfg.Channels[id] {
			continue
		}
		m, ok := byID[id]
		switch {
		case !ok:
			out = append(out, &channel{ID: id, Name: "unknown", Type: "unknown"})
		case m.Archived:
			continue
		default:
			out = append(out, channelFromMeta(m))
		}
	}
	return out, nil
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
	if err := h.store.Remove(id); err != nil {
		h.log.Warn("session store", "err", err)
	}
	for _, s := range h.slots {
		s.invalidateChannel(id, s.busy)
	}
	if stop := h.inflight[id]; stop != nil {
		stop(errLeft)
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
	h.memberSeq[id]++
	m := membershipCheck{id: id, seq: h.memberSeq[id], notice: ev}
	go func() {
		m.member, m.meta, m.err = h.membership(ctx, id)
		select {
		case h.metas <- m:
		case <-ctx.Done():
		}
	}()
}

type membershipCheck struct {
	id     string
	seq    int
	notice *nostr.Event
	member bool
	meta   *protocol.ChannelMeta
	err    error
}

// membership reads whether the agent is in a channel now, and the channel's metadata.
func (h *Harness) membership(ctx context.Context, id string) (bool, *protocol.ChannelMeta, error) {
	evs, err := h.query(ctx,
		nostr.Filter{Kinds: []int{protocol.KindGroupMembers}, Tags: nostr.TagMap{"d": {id}}, Limit: 1},
		nostr.Filter{Kinds: []int{protocol.KindGroupMetadata}, Tags: nostr.TagMap{"d": {id}}, Limit: 1})
	if err != nil {
		return false, nil, err
	}
	var member bool
	var meta *protocol.ChannelMeta
	for i := range evs {
		switch evs[i].Kind {
		case protocol.KindGroupMembers:
			member = protocol.IsMember(&evs[i], h.agent)
		case protocol.KindGroupMetadata:
			m := protocol.ParseChannelMeta(&evs[i])
			meta = &m
		}
	}
	return member, meta, nil
}

// applyMembership subscribes to or leaves a channel after a membership lookup.
func (h *Harness) applyMembership(m membershipCheck) {
	if m.seq != h.memberSeq[m.id] {
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
