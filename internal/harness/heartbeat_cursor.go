package harness

import (
	"context"
	"slices"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/observer"
	"github.com/buzz-harness/buzz/internal/protocol"
)

// A heartbeat that finds nothing new costs nothing. The cursor is where the agent's view ends:
// the last heartbeat prompt (or the start). At a tick the harness asks the relay, off the loop,
// for the events of its channels dated since the cursor that the agent did not write; those it
// already took in (prompted, or handled as commands) do not count. Only when one is left — a
// message the agent has not seen, a needs_action item among them — does the tick prompt.
// Otherwise it records heartbeat_skipped. Due reminders and queued events never wait for a
// heartbeat: they start turns of their own (and a queue holds heartbeats back anyway).

// heartbeatKinds are the events a heartbeat would look at: chat, forum posts and comments,
// workflow approvals and stream reminders.
var heartbeatKinds = []int{protocol.KindStreamMessage, protocol.KindStreamMessageV2, protocol.KindForumPost,
	protocol.KindForumComment, protocol.KindWorkflowApproval, protocol.KindReminder}

// heartbeatPeekLimit bounds the events one peek reads per channel chunk; a full page whose
// events were all seen still counts as news (older ones may not have been).
const heartbeatPeekLimit = 100

// heartbeatPeek is what one peek found, for the loop.
type heartbeatPeek struct {
	at    time.Time // when the peek started: the next cursor
	ids   []string  // events since the cursor by others
	full  bool      // a chunk filled its page
	error error
}

// peekHeartbeat starts a look for news since the cursor; finishPeek decides.
func (h *Harness) peekHeartbeat(ctx context.Context) {
	h.heartbeatBusy = true // one heartbeat at a time, peek included
	if h.hbCursor.IsZero() {
		h.hbCursor = h.turnEnds.since
	}
	since, now := h.hbCursor, h.clock.Now()
	ids := make([]string, 0, len(h.chans.byID))
	for id := range h.chans.byID {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	h.tasks.Go(func() {
		p := heartbeatPeek{at: now}
		for chunk := range slices.Chunk(ids, 200) {
			evs, err := h.relay.query(ctx, nostr.Filter{Kinds: heartbeatKinds, Tags: nostr.TagMap{"h": chunk}, Since: ptrTS(since), Limit: heartbeatPeekLimit})
			if err != nil {
				p.error = err
				break
			}
			p.full = p.full || len(evs) >= heartbeatPeekLimit
			for _, ev := range evs {
				if ev.PubKey != h.agent {
					p.ids = append(p.ids, ev.ID)
				}
			}
		}
		select {
		case h.inbox.peeks <- p:
		case <-ctx.Done():
		}
	})
}

// finishPeek prompts the heartbeat when the peek found news (or could not look: better a
// prompt than a missed request), and records the skip otherwise.
func (h *Harness) finishPeek(ctx context.Context, p heartbeatPeek) {
	h.heartbeatBusy = false
	unseen := p.full || p.error != nil || slices.ContainsFunc(p.ids, func(id string) bool { return !h.seen.Has(id) })
	if p.error != nil {
		h.log.Warn("heartbeat: could not look for news; prompting", "err", p.error)
	}
	since := h.hbCursor
	h.hbCursor = p.at
	if unseen {
		h.startHeartbeat(ctx)
		return
	}
	h.log.Debug("heartbeat skipped: nothing new", "since", since, "checked", len(p.ids))
	h.bus.Publish(observer.Scope{}, observer.HeartbeatSkipped{Since: since, Checked: len(p.ids)})
}
