package store

import (
	"context"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/protocol/reminder"
)

// Reminders is what a store adds for NIP-ER's due-time delivery: both stores keep a due row per
// reminder address while its head has a not_before (SaveEvent maintains it), and ClaimDue hands
// each due head out once, across every node sharing the store.
type Reminders interface {
	// ClaimDue marks up to limit reminders due at now as fired and returns their events.
	ClaimDue(ctx context.Context, now int64, limit int) ([]nostr.Event, error)
}

// DueOf is what a stored reminder head schedules: its due time, or ok false when it has none
// (done, cancelled, or not a reminder) and any due row of its address must go.
func DueOf(ev *nostr.Event) (notBefore int64, ok bool) {
	if ev.Kind != protocol.KindPrivateReminder {
		return 0, false
	}
	return reminder.NotBefore(ev)
}
