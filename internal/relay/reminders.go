package relay

import (
	"context"
	"net/http"
	"time"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/protocol/reminder"
	"github.com/buzz-harness/buzz/internal/relay/store"
)

// NIP-ER private reminders (kind 30300). They are stored like any addressable event, readable
// only by their author (acl.go), and re-sent to the author's live subscriptions when they fall
// due: a due signal, push mode in NIP-11. The store keeps one due row per reminder whose head
// has a not_before; the scheduler below claims due rows (each once, across every node sharing
// a PostgreSQL store) and fans the reminder out here and, through the change feed, on the other
// nodes. A relay restarted after a due time fires what it missed at its first poll.

// DefaultReminderPoll is how often the scheduler looks for due reminders.
const DefaultReminderPoll = time.Second

// reminderBatch bounds one claim.
const reminderBatch = 200

// reminderTags: a reminder's public tags are NIP-ER's (one d, at most one valid not_before, an
// expiration after it).
func reminderTags(_ context.Context, _ *Relay, in *ingest) *result {
	if in.ev.Kind != protocol.KindPrivateReminder {
		return nil
	}
	if in.channel != "" {
		return refuse(http.StatusBadRequest, protocol.ReasonInvalid.Msg("reminders (kind 30300) are private and carry no h tag"))
	}
	if err := reminder.CheckTags(in.ev.Tags); err != nil {
		return refuse(http.StatusBadRequest, protocol.ReasonInvalid.Msg(err.Error()))
	}
	return nil
}

// startReminders runs the scheduler until stop.
func (r *Relay) startReminders(rs store.Reminders) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	poll := r.cfg.ReminderPoll
	if poll <= 0 {
		poll = DefaultReminderPoll
	}
	go func() {
		defer close(done)
		t := time.NewTicker(poll)
		defer t.Stop()
		for {
			r.fireDue(ctx, rs)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() { cancel(); <-done }
}

// fireDue hands every reminder due now to its author's subscriptions, here and on other nodes.
func (r *Relay) fireDue(ctx context.Context, rs store.Reminders) {
	for ctx.Err() == nil {
		// A node cut off from the shared database would claim with nobody to tell.
		if r.shared != nil && !r.shared.Live() {
			return
		}
		evs, err := rs.ClaimDue(ctx, r.now().Unix(), reminderBatch)
		if err != nil {
			if ctx.Err() == nil {
				r.log.Warn("reminders: claim failed", "err", err)
			}
			return
		}
		for i := range evs {
			ev := &evs[i]
			r.broadcast(ev, "")
			if r.shared != nil {
				if err := r.shared.Publish(ctx, ev, ""); err != nil {
					r.log.Warn("reminder not passed to other nodes", "id", ev.ID, "err", err)
				}
			}
		}
		if len(evs) < reminderBatch {
			return
		}
	}
}
