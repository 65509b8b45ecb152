package cli

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/spf13/cobra"

	"github.com/buzz-harness/buzz/internal/client"
	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/protocol/reminder"
)

// reminders is `buzz reminders`: your own NIP-ER private reminders (kind 30300), as upstream's
// CLI has them. The relay sees when one is due, not what it is about.
func (a *app) remindersCommand() *cobra.Command {
	var at, after, note, link string
	create := a.leaf("create", "Schedule a private follow-up (--at RFC3339 or --after 30s|20m|4h|7d) with a --note; --link an event it is about", func(ctx context.Context, cmd *cobra.Command) (any, error) {
		due, err := dueTime(at, after, time.Now())
		if err != nil {
			return nil, err
		}
		text, err := a.readContent("note", note)
		if err != nil {
			return nil, err
		}
		if strings.TrimSpace(text) == "" {
			return nil, usageError("--note is blank")
		}
		b, err := a.bridge()
		if err != nil {
			return nil, err
		}
		c := reminder.Content{Status: reminder.Pending, Note: text}
		if link != "" {
			if c.Target, err = linkTarget(ctx, b, link); err != nil {
				return nil, err
			}
		}
		return publishReminder(ctx, b, reminder.NewID(), c, &due, time.Now())
	})
	create.Flags().StringVar(&at, "at", "", "due time, RFC3339 with a timezone (2026-09-14T14:00:00Z)")
	create.Flags().StringVar(&after, "after", "", "due after a delay: 30s, 20m, 4h or 7d")
	requiredString(create, &note, "note", "why and what to look at; - reads stdin")
	create.Flags().StringVar(&link, "link", "", "id of the message the reminder is about (its channel and thread are where it wakes you)")
	create.MarkFlagsMutuallyExclusive("at", "after")
	create.MarkFlagsOneRequired("at", "after")

	var all, due bool
	list := a.leaf("list", "Your pending reminders (--due: only those due now; --all: done and cancelled too)", func(ctx context.Context, cmd *cobra.Command) (any, error) {
		b, err := a.bridge()
		if err != nil {
			return nil, err
		}
		heads, err := reminderHeads(ctx, b, "")
		if err != nil {
			return nil, err
		}
		out := []reminder.Reminder{}
		for _, r := range heads {
			if (all || r.Content.Status == reminder.Pending) && (!due || r.Due(time.Now())) {
				out = append(out, r)
			}
		}
		return out, nil
	})
	list.Flags().BoolVar(&all, "all", false, "also done and cancelled reminders")
	list.Flags().BoolVar(&due, "due", false, "only reminders due now")
	list.MarkFlagsMutuallyExclusive("all", "due")

	get := &cobra.Command{Use: "get ID", Short: "One reminder's current version", Args: cobra.ExactArgs(1),
		RunE: a.run(func(ctx context.Context, cmd *cobra.Command) (any, error) {
			b, err := a.bridge()
			if err != nil {
				return nil, err
			}
			return reminderHead(ctx, b, cmd.Flags().Arg(0))
		})}

	update := func(use, short, status string, withTime bool) *cobra.Command {
		var at, after, note, ifEvent string
		cmd := &cobra.Command{Use: use + " ID", Short: short, Args: cobra.ExactArgs(1),
			RunE: a.run(func(ctx context.Context, cmd *cobra.Command) (any, error) {
				b, err := a.bridge()
				if err != nil {
					return nil, err
				}
				r, err := reminderHead(ctx, b, cmd.Flags().Arg(0))
				if err != nil {
					return nil, err
				}
				if ifEvent != "" && ifEvent != r.EventID {
					return nil, conflict("reminder changed; inspect its current version")
				}
				if r.Content.Status != reminder.Pending {
					return nil, usageError("reminder is already %s; create a new one if needed", r.Content.Status)
				}
				now := time.Now()
				if status == reminder.Done && r.NotBefore != nil && *r.NotBefore > now.Unix() {
					return nil, usageError("reminder is not due yet; cancel it if it no longer applies")
				}
				c := r.Content
				c.Status = status
				var nb *int64
				if withTime {
					d, err := dueTime(at, after, now)
					if err != nil {
						return nil, err
					}
					nb = &d
					if note != "" {
						if c.Note, err = a.readContent("note", note); err != nil {
							return nil, err
						}
					}
				}
				// A replacement must be newer than the version it replaces.
				created := now
				if next := time.Unix(r.CreatedAt+1, 0); next.After(now) {
					created = next
				}
				return publishReminder(ctx, b, r.D, c, nb, created)
			})}
		cmd.Flags().StringVar(&ifEvent, "if-event", "", "refuse if the reminder's current event is not this one")
		if withTime {
			cmd.Flags().StringVar(&at, "at", "", "new due time, RFC3339")
			cmd.Flags().StringVar(&after, "after", "", "new delay: 30s, 20m, 4h or 7d")
			cmd.Flags().StringVar(&note, "note", "", "replace the note")
			cmd.MarkFlagsMutuallyExclusive("at", "after")
			cmd.MarkFlagsOneRequired("at", "after")
		}
		return cmd
	}
	return group("reminders", "Private reminders (NIP-ER, kind 30300): only you can read them; the relay re-sends one when it is due",
		create, list, get,
		update("snooze", "Move a reminder later (--at/--after), optionally with a new --note", reminder.Pending, true),
		update("complete", "Mark a due reminder done", reminder.Done, false),
		update("cancel", "Cancel a reminder that no longer applies", reminder.Cancelled, false))
}

// dueTime resolves --at or --after against now; the result must be in the future.
func dueTime(at, after string, now time.Time) (int64, error) {
	var t int64
	switch {
	case at != "":
		p, err := time.Parse(time.RFC3339, at)
		if err != nil {
			return 0, usageError("--at needs an RFC3339 timestamp with timezone")
		}
		t = p.Unix()
	case after != "":
		n, unit := after[:len(after)-1], after[len(after)-1:]
		mult := map[string]int64{"s": 1, "m": 60, "h": 3600, "d": 86400}[unit]
		v, err := strconv.ParseInt(n, 10, 64)
		if mult == 0 || err != nil || v < 0 || v > 1<<40 {
			return 0, usageError("--after needs a duration such as 30s, 20m, 4h or 7d")
		}
		t = now.Unix() + v*mult
	default:
		return 0, usageError("give --at or --after")
	}
	if t <= now.Unix() {
		return 0, usageError("choose a future reminder time")
	}
	return t, nil
}

// linkTarget reads the message a reminder is about: its channel and thread root.
func linkTarget(ctx context.Context, b *client.Bridge, link string) (*reminder.Target, error) {
	id, err := eventIDArg("link", link)
	if err != nil {
		return nil, err
	}
	ev, err := queryOne(ctx, b, nostr.Filter{IDs: []string{id}})
	if err != nil {
		return nil, err
	}
	if ev == nil {
		return nil, notFound("--link event %s not found (or not visible to you)", id)
	}
	ch, _ := protocol.ChannelID(ev.Tags)
	preview := []rune(ev.Content)
	if len(preview) > 500 {
		preview = preview[:500]
	}
	return &reminder.Target{ID: ev.ID, EventID: ev.ID, ChannelID: ch, AuthorPubkey: ev.PubKey,
		RootID: threadRoot(ev), Preview: string(preview)}, nil
}

type reminderResult struct {
	Accepted   bool   `json:"accepted"`
	EventID    string `json:"event_id"`
	ReminderID string `json:"reminder_id"`
	NotBefore  *int64 `json:"not_before"`
	Status     string `json:"status"`
}

func publishReminder(ctx context.Context, b *client.Bridge, d string, c reminder.Content, due *int64, at time.Time) (any, error) {
	ev, err := reminder.Build(b.SecretKey(), d, c, due, at)
	if err != nil {
		return nil, usageError("%s", err)
	}
	if _, err := publish(ctx, b, ev); err != nil {
		return nil, err
	}
	return reminderResult{Accepted: true, EventID: ev.ID, ReminderID: d, NotBefore: due, Status: c.Status}, nil
}

// reminderHeads reads your reminders' current versions (d "" = all).
func reminderHeads(ctx context.Context, b *client.Bridge, d string) ([]reminder.Reminder, error) {
	f := nostr.Filter{Kinds: []int{reminder.Kind}, Authors: []string{b.PublicKey()}, Limit: 1000}
	if d != "" {
		f.Tags = nostr.TagMap{"d": {d}}
	}
	evs, err := b.Query(ctx, client.Filter{Filter: f})
	if err != nil {
		return nil, err
	}
	return reminder.Heads(b.SecretKey(), evs), nil
}

func reminderHead(ctx context.Context, b *client.Bridge, d string) (reminder.Reminder, error) {
	heads, err := reminderHeads(ctx, b, d)
	if err != nil {
		return reminder.Reminder{}, err
	}
	if len(heads) == 0 {
		return reminder.Reminder{}, notFound("no reminder %s for this key", d)
	}
	return heads[0], nil
}
