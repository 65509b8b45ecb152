package storetest

import (
	"sync"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol/reminder"
	"github.com/buzz-harness/buzz/internal/relay/store"
)

func init() {
	cases = append(cases,
		struct {
			name string
			fn   func(t *testing.T, s store.Store)
		}{"DueReminderIsClaimedOnceOfManyConcurrent", testDueReminderIsClaimedOnce},
		struct {
			name string
			fn   func(t *testing.T, s store.Store)
		}{"ReminderReplacementReschedulesOrUnschedules", testReminderReplacementReschedules})
}

func reminderVersion(t *testing.T, sk, d string, status string, due *int64, at time.Time) *nostr.Event {
	t.Helper()
	ev, err := reminder.Build(sk, d, reminder.Content{Status: status, Note: "n"}, due, at)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

func testDueReminderIsClaimedOnce(t *testing.T, s store.Store) {
	rs := s.(store.Reminders)
	sk := nostr.GeneratePrivateKey()
	due := int64(1000)
	ev := reminderVersion(t, sk, "a", reminder.Pending, &due, time.Unix(500, 0))
	mustSave(t, s, "", ev)
	if got, err := rs.ClaimDue(ctx, 999, 10); err != nil || len(got) != 0 {
		t.Fatalf("claimed before due: %v %v", got, err)
	}
	var mu sync.Mutex
	claimed := 0
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			got, err := rs.ClaimDue(ctx, 1000, 10)
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			claimed += len(got)
			mu.Unlock()
		})
	}
	wg.Wait()
	if claimed != 1 {
		t.Fatalf("claimed %d times, want once", claimed)
	}
}

func testReminderReplacementReschedules(t *testing.T, s store.Store) {
	rs := s.(store.Reminders)
	sk := nostr.GeneratePrivateKey()
	first, later := int64(1000), int64(2000)
	mustSave(t, s, "", reminderVersion(t, sk, "a", reminder.Pending, &first, time.Unix(500, 0)))
	snoozed := reminderVersion(t, sk, "a", reminder.Pending, &later, time.Unix(600, 0))
	mustSave(t, s, "", snoozed)
	if got, _ := rs.ClaimDue(ctx, 1500, 10); len(got) != 0 {
		t.Fatalf("the snoozed reminder fired at its old time: %v", got)
	}
	if got, _ := rs.ClaimDue(ctx, 2000, 10); len(got) != 1 || got[0].ID != snoozed.ID {
		t.Fatalf("the snoozed reminder did not fire at its new time: %v", got)
	}
	mustSave(t, s, "", reminderVersion(t, sk, "b", reminder.Pending, &first, time.Unix(500, 0)))
	mustSave(t, s, "", reminderVersion(t, sk, "b", reminder.Done, nil, time.Unix(700, 0)))
	if got, _ := rs.ClaimDue(ctx, 5000, 10); len(got) != 0 {
		t.Fatalf("a completed reminder fired: %v", got)
	}
}
