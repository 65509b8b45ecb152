package harness_test

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/testwait"
)

// The agent replies with the ids of every event its prompt showed, so a reply tells which
// events one turn answered.
const replyEvents = "TESTAGENT_REPLY=answered {events}"

// threadReplies returns the agent's kind-9 replies in root's thread.
func (s *stack) threadReplies(root string) []nostr.Event {
	return s.relay.Query(s.t, s.ownerSK, nostr.Filter{Kinds: []int{9}, Authors: []string{s.agentPK}, Tags: nostr.TagMap{"e": {root}}})
}

// promptSessions returns the session id of every session/prompt the agent received, in order.
func (s *stack) promptSessions() []string {
	var out []string
	for _, r := range s.methods("session/prompt") {
		var p struct {
			SessionID string `json:"sessionId"`
		}
		_ = json.Unmarshal(r.Params, &p)
		out = append(out, p.SessionID)
	}
	return out
}

// busyThread starts a turn that hangs (until cancelled or steered) on a top-level mention, then
// sends a second message into that thread while it runs. It returns both events.
func (s *stack) busyThread() (first, second nostr.Event) {
	s.t.Helper()
	first = s.mention(s.ownerSK, "first job: summarise the release")
	s.waitRecorded("session/prompt", 1)
	second = s.mention(s.ownerSK, "also list the open bugs", replyTo(first.ID))
	return first, second
}

// answeredOnce waits for the turn that answers both events, then checks it was the only reply
// in the thread and that it covered both.
func (s *stack) answeredOnce(first, second nostr.Event) nostr.Event {
	s.t.Helper()
	reply := s.waitNewReply(first.ID)
	s.waitLog("turn done", 20*time.Second)
	if !strings.Contains(reply.Content, first.ID) || !strings.Contains(reply.Content, second.ID) {
		s.t.Fatalf("reply %q does not answer both %s and %s", reply.Content, first.ID, second.ID)
	}
	if n := len(s.threadReplies(first.ID)); n != 1 {
		s.t.Fatalf("%d replies in the thread, want exactly one", n)
	}
	return reply
}

func TestSteerWithoutNativeSupportCancelsAndPromptsOneMergedPromptOnTheSameSession(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start(nil, "TESTAGENT_HANG_ON=1", replyEvents) // default mode: steer
	first, second := s.busyThread()
	s.answeredOnce(first, second)

	if n := len(s.methods("session/cancel")); n != 1 {
		t.Fatalf("%d session/cancel, want one", n)
	}
	ps := s.prompts()
	if len(ps) != 2 {
		t.Fatalf("%d prompts, want the cancelled one and one merged prompt", len(ps))
	}
	merged := ps[1]
	for _, want := range []string{"[Earlier request — you were still working on it]", "[New message — sent while you were working]",
		"Carry on with that work", "Event ID: " + first.ID, "Event ID: " + second.ID} {
		if !strings.Contains(merged, want) {
			t.Fatalf("merged prompt lacks %q:\n%s", want, merged)
		}
	}
	if strings.Index(merged, first.ID) > strings.Index(merged, second.ID) {
		t.Fatal("the new message is framed before what the agent was working on")
	}
	if ss := s.promptSessions(); ss[0] != ss[1] {
		t.Fatalf("merged prompt went to session %s, the cancelled turn ran in %s", ss[1], ss[0])
	}
	if n := len(s.methods("session/new")); n != 1 {
		t.Fatalf("%d session/new, want the one session kept across the cancel", n)
	}
}

func TestInterruptCancelsAndFramesTheNewRequestAsSupersedingTheOld(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start([]string{"--multiple-event-handling", "interrupt"}, "TESTAGENT_HANG_ON=1", replyEvents)
	first, second := s.busyThread()
	s.answeredOnce(first, second)

	if n := len(s.methods("session/cancel")); n != 1 {
		t.Fatalf("%d session/cancel, want one", n)
	}
	ps := s.prompts()
	if len(ps) != 2 {
		t.Fatalf("%d prompts, want 2", len(ps))
	}
	for _, want := range []string{"[Earlier request — stopped before you finished it]", "[New request — it replaces the earlier one]",
		"Your previous request was interrupted", "Event ID: " + second.ID} {
		if !strings.Contains(ps[1], want) {
			t.Fatalf("interrupt prompt lacks %q:\n%s", want, ps[1])
		}
	}
}

func TestQueueModeLeavesTheRunningTurnAloneAndPromptsTheNewMessageAfterIt(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start([]string{"--multiple-event-handling", "queue"}, "TESTAGENT_HANG_ON=1", replyEvents)
	first, second := s.busyThread()
	// The loop handles events in order: once !status is answered, second was queued and its
	// mode applied. Then the owner ends the running turn.
	s.waitOutcome(s.mention(s.ownerSK, "!status", replyTo(first.ID)).ID)
	if out := s.waitOutcome(s.mention(s.ownerSK, "!cancel", replyTo(first.ID)).ID); out["type"] != "agent_turn_cancelled" {
		t.Fatalf("the hung turn was not running when the owner cancelled it: %v", out)
	}
	reply := s.waitNewReply(first.ID)
	if !strings.Contains(reply.Content, second.ID) || strings.Contains(reply.Content, first.ID) {
		t.Fatalf("reply %q: want the queued message alone answered", reply.Content)
	}
	ps := s.prompts()
	if len(ps) != 2 || strings.Contains(ps[1], "sent while you were working") {
		t.Fatalf("%d prompts; the second must be a plain prompt, not a merge:\n%s", len(ps), strings.Join(ps, "\n====\n"))
	}
	if n := len(s.methods("session/cancel")); n != 1 {
		t.Fatalf("%d session/cancel, want only the owner's", n)
	}
}

func TestSteerUsesTheAgentsNativeSteeringWithoutCancellingTheTurn(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start(nil, "TESTAGENT_HANG_ON=1", "TESTAGENT_STEERING=1", replyEvents)
	first, second := s.busyThread()
	s.answeredOnce(first, second)

	steers := s.methods("_session/steering")
	if len(steers) != 1 {
		t.Fatalf("%d _session/steering calls, want one", len(steers))
	}
	if p := string(steers[0].Params); !strings.Contains(p, second.ID) || !strings.Contains(p, "sent while you were working") {
		t.Fatalf("steer params %s do not carry the framed new message", p)
	}
	if n := len(s.methods("session/cancel")); n != 0 {
		t.Fatalf("%d session/cancel: a native steer must not cancel", n)
	}
	if n := len(s.methods("session/prompt")); n != 1 {
		t.Fatalf("%d prompts, want the one the message was steered into", n)
	}
}

func TestGooseSteerNamesTheActiveRunAndDoesNotCancel(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start([]string{"--activity-log", s.stateDir + "-activity.jsonl"}, "TESTAGENT_HANG_ON=1", "TESTAGENT_GOOSE_STEER=1", replyEvents)
	first := s.mention(s.ownerSK, "first job: summarise the release")
	s.waitRecorded("session/prompt", 1)
	// The run id reaches the harness as a session/update; wait until the harness has seen it.
	s.waitFile(s.stateDir+"-activity.jsonl", "session_info_update")
	second := s.mention(s.ownerSK, "also list the open bugs", replyTo(first.ID))
	s.answeredOnce(first, second)

	steers := s.methods("_goose/unstable/session/steer")
	if len(steers) != 1 || !strings.Contains(string(steers[0].Params), `"expectedRunId":"run-1"`) {
		t.Fatalf("goose steer calls %v, want one naming run-1", steers)
	}
	if n := len(s.methods("session/cancel")); n != 0 {
		t.Fatalf("%d session/cancel: a native steer must not cancel", n)
	}
}

func TestCrashRightAfterASteerCancelAnswersTheMergedEventsOnceAfterRestart(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	// Both the first prompt and the merged one hang, so nothing is answered before the kill.
	s.start(nil, "TESTAGENT_HANG_ON=1,2", replyEvents)
	first, second := s.busyThread()
	s.waitRecorded("session/cancel", 1)
	s.kill() // SIGKILL: no shutdown path runs

	s.start(nil, replyEvents)
	s.answeredOnce(first, second)
}

func TestDedupDropFinishesAMessageForABusyConversationUnanswered(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start([]string{"--multiple-event-handling", "queue", "--dedup", "drop"}, "TESTAGENT_HANG_ON=1", replyEvents)
	first, second := s.busyThread()
	s.waitLog("dropped: its conversation's turn is running", 20*time.Second)
	if out := s.waitOutcome(s.mention(s.ownerSK, "!cancel", replyTo(first.ID)).ID); out["type"] != "agent_turn_cancelled" {
		t.Fatalf("outcome %v", out)
	}
	// A later message in the thread is answered alone: the dropped one never comes back.
	third := s.mention(s.ownerSK, "now this", replyTo(first.ID))
	reply := s.waitNewReply(first.ID)
	if !strings.Contains(reply.Content, third.ID) || strings.Contains(reply.Content, second.ID) {
		t.Fatalf("reply %q: want the later message alone", reply.Content)
	}
}

// waitFile waits until the file at path contains substr.
func (s *stack) waitFile(path, substr string) {
	s.t.Helper()
	testwait.Eventually(s.t, 20*time.Second, func() bool {
		b, _ := os.ReadFile(path)
		return strings.Contains(string(b), substr)
	}, fmt.Sprintf("%s to contain %q", path, substr))
}

func TestSteerAfterTheReplyLandedDoesNotAnswerTheFirstMessageAgain(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	// The first turn posts its reply, then keeps working until cancelled.
	s.start(nil, "TESTAGENT_HANG_AFTER_REPLY=1", replyEvents)
	first := s.mention(s.ownerSK, "first job: summarise the release")
	r1 := s.waitReply(first.ID)
	second := s.mention(s.ownerSK, "also list the open bugs", replyTo(first.ID))
	r2 := s.waitNewReply(first.ID, r1)
	s.waitRecorded("session/cancel", 1)
	if !strings.Contains(r2.Content, second.ID) || strings.Contains(r2.Content, first.ID) {
		t.Fatalf("second reply %q: want the new message alone", r2.Content)
	}
	ps := s.prompts()
	if len(ps) != 2 || strings.Contains(ps[1], "Event ID: "+first.ID) || strings.Contains(ps[1], "Earlier request") {
		t.Fatalf("the answered message was carried into the next prompt:\n%s", strings.Join(ps, "\n====\n"))
	}
}

func TestOwnerInterruptInterruptsForTheOwnerAndSteersForOthers(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	otherSK, otherPK := newKey(t)
	s.relay.AddMember(t, s.ownerSK, s.channel, otherPK, "member")
	// Prompts 1 and 3 (the first turn of each thread) hang until cancelled.
	s.start([]string{"--multiple-event-handling", "owner-interrupt", "--respond-to", "anyone"}, "TESTAGENT_HANG_ON=1,3", replyEvents)

	first := s.mention(s.ownerSK, "first job")
	s.waitRecorded("session/prompt", 1)
	s.mention(otherSK, "a colleague adds a detail", replyTo(first.ID))
	s.waitNewReply(first.ID)

	second := s.mention(otherSK, "second job")
	s.waitRecorded("session/prompt", 3)
	s.mention(s.ownerSK, "owner: drop that, do this", replyTo(second.ID))
	s.waitNewReply(second.ID)

	ps := s.prompts()
	if len(ps) != 4 {
		t.Fatalf("%d prompts, want 4", len(ps))
	}
	if !strings.Contains(ps[1], "[New message — sent while you were working]") {
		t.Fatalf("a non-owner's message did not steer:\n%s", ps[1])
	}
	if !strings.Contains(ps[3], "[New request — it replaces the earlier one]") {
		t.Fatalf("the owner's message did not interrupt:\n%s", ps[3])
	}
}
