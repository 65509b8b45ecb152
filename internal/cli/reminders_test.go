package cli_test

import (
	"testing"

	"github.com/buzz-harness/buzz/internal/relay/relaytest"
)

type reminderOut struct {
	ReminderID string `json:"reminder_id"`
	EventID    string `json:"event_id"`
	NotBefore  *int64 `json:"not_before"`
	Status     string `json:"status"`
	Content    struct {
		Status string `json:"status"`
		Note   string `json:"note"`
		Target *struct {
			ChannelID string `json:"channelId"`
			RootID    string `json:"rootId"`
		} `json:"target"`
	} `json:"content"`
}

func TestRemindersCreateListSnoozeCancel(t *testing.T) {
	r := relaytest.Start(t)
	me, other := newUser(t, r.HTTPURL), newUser(t, r.HTTPURL)
	ch := me.createChannel("work", false)
	var sent struct {
		EventID string `json:"event_id"`
	}
	me.ok(&sent, "", "messages", "send", "--channel", ch, "--content", "the build is red")

	var made reminderOut
	me.ok(&made, "", "reminders", "create", "--after", "1h", "--note", "look at the build", "--link", sent.EventID)
	if made.Status != "pending" || made.NotBefore == nil {
		t.Fatalf("create: %+v", made)
	}
	var got reminderOut
	me.ok(&got, "", "reminders", "get", made.ReminderID)
	if got.Content.Note != "look at the build" || got.Content.Target == nil || got.Content.Target.ChannelID != ch || got.Content.Target.RootID != sent.EventID {
		t.Fatalf("get: %+v", got)
	}
	var due []reminderOut
	me.ok(&due, "", "reminders", "list", "--due")
	if len(due) != 0 {
		t.Fatalf("list --due lists a reminder due in an hour: %+v", due)
	}
	if e := me.fails(1, "reminders", "complete", made.ReminderID); e.Error != "user_error" {
		t.Fatalf("completing a reminder not yet due: %+v", e)
	}
	var snoozed reminderOut
	me.ok(&snoozed, "", "reminders", "snooze", made.ReminderID, "--after", "2h", "--if-event", made.EventID)
	if *snoozed.NotBefore <= *made.NotBefore {
		t.Fatalf("snooze did not move the due time: %d → %d", *made.NotBefore, *snoozed.NotBefore)
	}
	if e := me.fails(5, "reminders", "cancel", made.ReminderID, "--if-event", made.EventID); e.Error != "conflict" {
		t.Fatalf("a stale --if-event: %+v", e)
	}
	me.ok(nil, "", "reminders", "cancel", made.ReminderID)
	var pending, all []reminderOut
	me.ok(&pending, "", "reminders", "list")
	me.ok(&all, "", "reminders", "list", "--all")
	if len(pending) != 0 || len(all) != 1 || all[0].Content.Status != "cancelled" {
		t.Fatalf("after cancel: pending %+v, all %+v", pending, all)
	}
	// Nobody else reads them.
	var theirs []reminderOut
	other.ok(&theirs, "", "reminders", "list", "--all")
	if len(theirs) != 0 {
		t.Fatalf("another key lists my reminders: %+v", theirs)
	}
	if e := other.fails(1, "reminders", "get", made.ReminderID); e.Error != "not_found" {
		t.Fatalf("another key gets my reminder: %+v", e)
	}
}

func TestRemindersCreateRefusesAPastTime(t *testing.T) {
	r := relaytest.Start(t)
	me := newUser(t, r.HTTPURL)
	if e := me.fails(1, "reminders", "create", "--at", "2001-01-01T00:00:00Z", "--note", "x"); e.Error != "user_error" {
		t.Fatalf("%+v", e)
	}
}
