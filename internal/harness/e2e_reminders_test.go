package harness_test

import (
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol/reminder"
)

// agentReminder publishes a reminder of the agent's, due in 2 s, about the owner's message m.
func (s *stack) agentReminder(m nostr.Event, note string) *nostr.Event {
	s.t.Helper()
	return s.agentReminderDue(m, note, time.Now().Unix()+2)
}

func (s *stack) agentReminderDue(m nostr.Event, note string, due int64) *nostr.Event {
	s.t.Helper()
	ev, err := reminder.Build(s.agentSK, reminder.NewID(), reminder.Content{Status: reminder.Pending, Note: note,
		Target: &reminder.Target{ID: m.ID, ChannelID: s.channel, RootID: m.ID, AuthorPubkey: m.PubKey}}, &due, time.Now())
	if err != nil {
		s.t.Fatal(err)
	}
	s.relay.Publish(s.t, s.agentSK, *ev)
	return ev
}

// waitReminderDone waits until the reminder's current version is done.
func (s *stack) waitReminderDone(ev *nostr.Event) {
	s.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		heads := reminder.Heads(s.agentSK, s.relay.Query(s.t, s.agentSK, nostr.Filter{Kinds: []int{reminder.Kind}, Authors: []string{s.agentPK}}))
		for _, h := range heads {
			if h.D == ev.Tags.GetD() && h.Content.Status == reminder.Done {
				return
			}
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("the reminder was never marked done; buzz-acp output:\n%s", s.logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// promptsWith counts the prompts that showed text.
func (s *stack) promptsWith(text string) int {
	n := 0
	for _, p := range s.prompts() {
		if strings.Contains(p, text) {
			n++
		}
	}
	return n
}

func TestDueReminderWakesItsConversationOnceAndIsMarkedDone(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start(nil)
	m := s.mention(s.ownerSK, "remind yourself to check the build")
	first := s.waitReply(m.ID)
	ev := s.agentReminder(m, "check the build")
	reply := s.waitNewReply(m.ID, first)
	if !strings.Contains(reply.Content, "check the build") {
		t.Fatalf("the reminder turn's reply %q does not answer the reminder", reply.Content)
	}
	s.waitReminderDone(ev)
	if n := s.promptsWith("Event ID: " + ev.ID); n != 1 {
		t.Fatalf("the reminder was prompted %d times, want once", n)
	}
	all := strings.Join(s.prompts(), "\n")
	if !strings.Contains(all, "[Buzz event: reminder]") || !strings.Contains(all, "Your reminder is due") {
		t.Fatalf("the reminder prompt does not say what it is:\n%s", all)
	}
}

// Killed while the reminder's turn runs (before the agent answered), buzz-acp answers it once
// after the restart: the journal replays it, and the due reminder the relay still holds is not
// queued a second time.
func TestDueReminderIsAnsweredOnceWhenBuzzACPIsKilledDuringItsTurn(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start(nil, "TESTAGENT_HANG_ON=2")
	m := s.mention(s.ownerSK, "hello")
	first := s.waitReply(m.ID)
	ev := s.agentReminder(m, "check the deploy")
	s.waitPrompted(ev.ID) // the second prompt hangs
	s.kill()
	s.start(nil)
	reply := s.waitNewReply(m.ID, first)
	if !strings.Contains(reply.Content, "check the deploy") {
		t.Fatalf("reply %q", reply.Content)
	}
	s.waitReminderDone(ev)
	replies := s.relay.Query(t, s.ownerSK, nostr.Filter{Kinds: []int{9}, Authors: []string{s.agentPK}, Tags: nostr.TagMap{"e": {m.ID}}})
	if len(replies) != 2 {
		t.Fatalf("%d agent replies in the thread, want 2 (the mention's and the reminder's)", len(replies))
	}
}

// Killed before the reminder fell due, buzz-acp finds it due in its backlog on restart.
func TestReminderDueWhileBuzzACPWasDownWakesItOnRestart(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start(nil)
	m := s.mention(s.ownerSK, "hello")
	first := s.waitReply(m.ID)
	s.kill()
	ev := s.agentReminderDue(m, "look again", time.Now().Unix()-1) // fell due while it was down
	s.start(nil)
	s.waitNewReply(m.ID, first)
	s.waitReminderDone(ev)
	if n := s.promptsWith("Event ID: " + ev.ID); n != 1 {
		t.Fatalf("prompted %d times, want once", n)
	}
}
