package postgres

import (
	"context"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/relay/store"
)

var _ store.Reminders = (*Store)(nil)

// schedule keeps the due row of a reminder's address in step with its new head (SaveEvent holds
// the address's lock, so versions of one reminder never race here).
func (t *pgTx) schedule(ev *nostr.Event) error {
	d := text(protocol.TagValue(ev.Tags, "d"))
	nb, ok := store.DueOf(ev)
	if !ok {
		_, err := t.tx.Exec(t.ctx, `DELETE FROM reminders_due WHERE pubkey = $1 AND d = $2`, text(ev.PubKey), d)
		return err
	}
	_, err := t.tx.Exec(t.ctx, `INSERT INTO reminders_due (pubkey, d, event_id, not_before, fired) VALUES ($1, $2, $3, $4, false)
		ON CONFLICT (pubkey, d) DO UPDATE SET event_id = excluded.event_id, not_before = excluded.not_before, fired = false`,
		text(ev.PubKey), d, text(ev.ID), nb)
	return err
}

// ClaimDue implements store.Reminders. Rows are claimed with FOR UPDATE SKIP LOCKED and marked
// fired in the same statement: of nodes claiming at once, each row goes to exactly one.
func (s *Store) ClaimDue(ctx context.Context, now int64, limit int) ([]nostr.Event, error) {
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	rows, err := s.pool.Query(ctx, `UPDATE reminders_due r SET fired = true FROM (
			SELECT pubkey, d FROM reminders_due WHERE NOT fired AND not_before <= $1
			ORDER BY not_before LIMIT $2 FOR UPDATE SKIP LOCKED) due
		WHERE r.pubkey = due.pubkey AND r.d = due.d RETURNING r.event_id`, now, limit)
	if err != nil {
		return nil, s.wrap(err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, err
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, s.wrap(err)
	}
	var out []nostr.Event
	for _, id := range ids {
		if ev, _, err := s.Event(ctx, id); err == nil && ev != nil {
			out = append(out, *ev)
		}
	}
	return out, nil
}
