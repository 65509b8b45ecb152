package harness_test

import (
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/clock"
	"github.com/buzz-harness/buzz/internal/harness"
	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/testwait"
)

// The reply safety net (reply.go) with the real CLI, relay and binary: each test scripts one way
// an answer fails to reach the thread.

// agentMessages are the agent's kind-9 messages in the thread rooted at root (its root included).
func (s *stack) agentMessages(root string) []nostr.Event {
	s.t.Helper()
	var out []nostr.Event
	for _, ev := range s.relay.Query(s.t, s.ownerSK, nostr.Filter{Kinds: []int{9}, Authors: []string{s.agentPK}, Tags: nostr.TagMap{"h": {s.channel}}}) {
		if ref := protocol.ParseThread(ev.Tags); ref.Root == root || ev.ID == root {
			out = append(out, ev)
		}
	}
	return out
}

func marked(ev nostr.Event, marker string) bool {
	for _, t := range ev.Tags {
		if len(t) >= 2 && t[0] == marker && t[1] == "1" {
			return true
		}
	}
	return false
}

// waitMarked waits for the agent's message replying to id that carries marker.
func (s *stack) waitMarked(id, marker string) nostr.Event {
	s.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, ev := range s.relay.Query(s.t, s.ownerSK, nostr.Filter{Kinds: []int{9}, Authors: []string{s.agentPK}, Tags: nostr.TagMap{"e": {id}}}) {
			if marked(ev, marker) {
				return ev
			}
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("no %s reply to %s; buzz-acp output:\n%s", marker, id, s.logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestAnswerOnlyInSessionTextIsPostedOnceAsAFallbackInTheThread(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start(nil, "TESTAGENT_NO_CLI=1")
	m := s.mention(s.ownerSK, "what is two and two")
	fb := s.waitMarked(m.ID, harness.FallbackMarker)
	if fb.Content != "echo: what is two and two" {
		t.Fatalf("fallback content %q, want the agent's text", fb.Content)
	}
	if ref := protocol.ParseThread(fb.Tags); ref.Parent != m.ID || ref.Root != m.ID {
		t.Fatalf("fallback not threaded on the mention: %+v", ref)
	}
	if !protocol.Mentioned(fb.Tags, s.ownerPK) {
		t.Fatal("fallback does not mention the person who asked")
	}
	// A second mention's outcome comes after the first batch finished: by then any second post
	// for the first would be there too.
	next := s.mention(s.ownerSK, "and three and three")
	s.waitMarked(next.ID, harness.FallbackMarker)
	if got := s.agentMessages(m.ID); len(got) != 1 {
		t.Fatalf("%d agent messages in the thread, want the one fallback: %v", len(got), got)
	}
}

func TestStatusCountsSilentTurnsAndPostedFallbacks(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start(nil, "TESTAGENT_NO_CLI=1")
	s.waitMarked(s.mention(s.ownerSK, "hello").ID, harness.FallbackMarker)
	s.waitLogCount("silent turn", 1, 30*time.Second) // counted once its fallback is on the relay
	st, _ := s.waitOutcome(s.mention(s.ownerSK, "!status").ID)["status"].(map[string]any)
	if st["silent_turns"] != 1.0 || st["fallbacks_published"] != 1.0 {
		t.Fatalf("!status %v, want one silent turn and one fallback", st)
	}
}

// The safety net decides, journals the reply and posts it; buzz-acp is SIGKILLed while the post
// is on its way (it never reaches the relay). The next start posts that same reply, once, and
// does not prompt the agent again.
func TestFallbackDecidedBeforeASIGKILLIsPostedOnceByTheNextStart(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	proxy := startStallProxy(t, s.relay.URL)
	proxy.swallow(harness.FallbackMarker)
	s.start([]string{"--relay-url", proxy.url()}, "TESTAGENT_NO_CLI=1")
	m := s.mention(s.ownerSK, "survive the crash")
	s.waitLog("reply check: posting the decided reply", 30*time.Second)
	for deadline := time.Now().Add(20 * time.Second); proxy.swallowedCount() == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the fallback's post never left buzz-acp; output:\n%s", s.logs.String())
		}
	}
	s.kill()
	proxy.drop()
	if got := s.agentMessages(m.ID); len(got) != 0 {
		t.Fatalf("the swallowed post reached the relay: %v", got)
	}

	s.start(nil, "TESTAGENT_NO_CLI=1")
	fb := s.waitMarked(m.ID, harness.FallbackMarker)
	s.waitLog("journal: posted the reply decided for a batch in flight at the restart", 10*time.Second)
	if fb.Content != "echo: survive the crash" {
		t.Fatalf("fallback %q", fb.Content)
	}
	s.waitMarked(s.mention(s.ownerSK, "and now?").ID, harness.FallbackMarker)
	if got := s.agentMessages(m.ID); len(got) != 1 {
		t.Fatalf("%d agent messages in the thread, want one fallback", len(got))
	}
	if n := strings.Count(strings.Join(s.prompts(), "\n"), "Event ID: "+m.ID); n != 1 {
		t.Fatalf("the mention was prompted %d times, want once: the restart must post the decision, not ask again", n)
	}
}

func TestSendWithoutAKeyGetsANoticeNamingTheMissingKeyAndNoFallback(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start(nil, "TESTAGENT_DROP_KEY=1", "TESTAGENT_SEND_FAILS=continue", "TESTAGENT_FINAL_TEXT=")
	m := s.mention(s.ownerSK, "reply please")
	n := s.waitMarked(m.ID, harness.FailureMarker)
	if !strings.Contains(n.Content, "BUZZ_PRIVATE_KEY") {
		t.Fatalf("notice %q does not name the missing key", n.Content)
	}
	s.waitMarked(s.mention(s.ownerSK, "again").ID, harness.FailureMarker)
	if got := s.agentMessages(m.ID); len(got) != 1 {
		t.Fatalf("%d agent messages in the thread, want the notice alone: %v", len(got), got)
	}
}

func TestSendTheRelayRefusesGetsANoticeNamingTheChannel(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	stranger := s.relay.CreateChannel(t, s.ownerSK, "not-joined", true) // private: only members post
	s.start(nil, "TESTAGENT_SEND_CHANNEL="+stranger, "TESTAGENT_SEND_FAILS=continue", "TESTAGENT_FINAL_TEXT=")
	n := s.waitMarked(s.mention(s.ownerSK, "reply please").ID, harness.FailureMarker)
	if !strings.Contains(n.Content, "not a member of channel "+stranger) {
		t.Fatalf("notice %q does not say the agent is not a member of %s", n.Content, stranger)
	}
}

func TestSendDeniedByThePermissionModeGetsANoticeSayingSo(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start(nil, "TESTAGENT_DENY_SEND=1", "TESTAGENT_SEND_FAILS=continue", "TESTAGENT_FINAL_TEXT=")
	n := s.waitMarked(s.mention(s.ownerSK, "reply please").ID, harness.FailureMarker)
	if !strings.Contains(n.Content, "permission mode denied") {
		t.Fatalf("notice %q does not say the permission mode denied the send", n.Content)
	}
}

func TestPublishResponseOffPostsANoticeInsteadOfTheText(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start([]string{"--publish-response", "off"}, "TESTAGENT_NO_CLI=1")
	m := s.mention(s.ownerSK, "hello")
	n := s.waitMarked(m.ID, harness.FailureMarker)
	if strings.Contains(n.Content, "echo: hello") || !strings.Contains(n.Content, "never sent it") {
		t.Fatalf("notice %q: want the reason, not the text", n.Content)
	}
}

// The agent ends its turn with its answer in text and sends the same answer with the CLI a
// moment later: the sent reply is the answer, and no fallback follows it.
func TestAReplyThatLandsLateWinsOverTheFallback(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	// On a fake clock the safety net's settle ends only when the test says so: after the late
	// reply has landed, however slow the machine.
	clk := clock.NewFake(time.Now())
	cancel, _ := s.runInProcess(t, harness.Config{Clock: clk}, "TESTAGENT_REPLY_LATE=300")
	defer cancel()
	s.waitLog("agent ready", 30*time.Second)
	m := s.mention(s.ownerSK, "take your time")
	// The clock moves only while nothing is pending but the safety net's settle: first the
	// same-second hold of the first turn, then (once the late reply is on the relay) the settle.
	testwait.Eventually(t, 30*time.Second, func() bool {
		if strings.Contains(s.logs.String(), `msg="turn done"`) {
			return true
		}
		clk.Advance(200 * time.Millisecond) // less than the settle: never past it unseen
		return false
	}, "the turn to end")
	reply := s.waitReply(m.ID)
	testwait.Eventually(t, 20*time.Second, func() bool {
		clk.Advance(time.Second)
		return strings.Contains(s.logs.String(), "reply check: the answer is there")
	}, `buzz-acp to log "reply check: the answer is there"`)
	if marked(reply, harness.FallbackMarker) {
		t.Fatal("the first reply is the fallback, not the agent's")
	}
	if got := s.agentMessages(m.ID); len(got) != 1 {
		t.Fatalf("%d agent messages in the thread, want the agent's reply alone: %v", len(got), got)
	}
}

// A heartbeat is no one's question: one that ends with text posts nothing. The harness runs on a
// fake clock; a mention afterwards, whose fallback the clock also brings, shows the heartbeat's
// turn is long over.
func TestHeartbeatThatEndsWithTextPostsNothing(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	clk := clock.NewFake(time.Now())
	cancel, _ := s.runInProcess(t, harness.Config{Clock: clk, HeartbeatInterval: 10 * time.Second, HeartbeatAlways: true}, "TESTAGENT_NO_CLI=1")
	defer cancel()
	s.waitLog("agent ready", 30*time.Second)
	for deadline := time.Now().Add(30 * time.Second); len(s.methods("session/prompt")) < 1; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no heartbeat prompt; logs:\n%s", s.logs.String())
		}
		clk.Advance(10 * time.Second)
	}
	m := s.mention(s.ownerSK, "after the heartbeat")
	fallback := nostr.Filter{Kinds: []int{9}, Authors: []string{s.agentPK}, Tags: nostr.TagMap{"e": {m.ID}}}
	for deadline := time.Now().Add(30 * time.Second); len(s.relay.Query(t, s.ownerSK, fallback)) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the mention got no fallback; logs:\n%s", s.logs.String())
		}
		clk.Advance(time.Second) // past the same-second hold, then the safety net's settle
	}
	s.waitLogCount("silent turn", 1, 30*time.Second) // logged once its fallback is on the relay
	all := s.relay.Query(t, s.ownerSK, nostr.Filter{Kinds: []int{9}, Authors: []string{s.agentPK}})
	if len(all) != 1 || !marked(all[0], harness.FallbackMarker) || strings.Count(s.logs.String(), "silent turn") != 1 {
		t.Fatalf("agent messages %v, want only the mention's fallback; logs:\n%s", all, s.logs.String())
	}
}

// The agent answers in another channel: its own-messages subscription brings the post while the
// turn runs, and the check asks the relay who is a member there.
func TestAnAnswerPostedInAnotherChannelTheAskerIsInCountsAndNothingIsPosted(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	other := s.relay.CreateChannel(t, s.ownerSK, "elsewhere", true) // private: its members are listed
	s.relay.AddMember(t, s.ownerSK, other, s.agentPK, "bot")
	s.start([]string{"--log-level", "debug"}, "TESTAGENT_SEND_CHANNEL="+other)
	q := s.mention(s.ownerSK, "answer me over there")
	s.waitLog("reply check: the answer is there", 30*time.Second)
	if got := s.agentMessages(q.ID); len(got) != 0 {
		t.Fatalf("%d agent messages in the asker's thread, want none (the answer is in %s): %v", len(got), other, got)
	}
}

func TestAnAnswerPostedInAChannelTheAskerIsNotInGetsANoticeNamingIt(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	stranger := nostr.GeneratePrivateKey()
	theirs := s.relay.CreateChannel(t, stranger, "theirs", true)
	s.relay.AddMember(t, stranger, theirs, s.agentPK, "bot")
	s.start(nil, "TESTAGENT_SEND_CHANNEL="+theirs, "TESTAGENT_FINAL_TEXT=")
	n := s.waitMarked(s.mention(s.ownerSK, "answer me").ID, harness.FailureMarker)
	if !strings.Contains(n.Content, "I posted it in channel "+theirs) {
		t.Fatalf("notice %q does not name the channel %s the answer went to", n.Content, theirs)
	}
}
