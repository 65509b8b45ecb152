package harness_test

import (
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr"
)

func TestAgentCrashMidTurnIsRespawnedAndMentionStillAnswered(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start(nil, "TESTAGENT_CRASH_ON=1")
	m := s.mention(s.ownerSK, "survive this")
	reply := s.waitReply(m.ID)
	if !strings.Contains(reply.Content, "survive this") {
		t.Fatalf("reply %q", reply.Content)
	}
	if n := strings.Count(s.logs.String(), "agent ready"); n < 2 {
		t.Fatalf("agent became ready %d times, want a respawn", n)
	}
}

func TestIdleTimeoutCancelsTurnRespawnsAgentAndRetries(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start([]string{"--idle-timeout", "1", "--max-turn-duration", "60"}, "TESTAGENT_HANG_ON=1")
	m := s.mention(s.ownerSK, "are you stuck")
	s.waitReply(m.ID)
	if len(s.methods("session/cancel")) == 0 {
		t.Fatal("the hung turn was not cancelled with session/cancel")
	}
	if !strings.Contains(s.logs.String(), "idle timeout") {
		t.Fatalf("no idle timeout logged")
	}
}

func TestRelayRestartMidRunLosesNoMention(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start(nil)
	first := s.mention(s.ownerSK, "before restart")
	s.waitReply(first.ID)
	s.relay.Stop()
	s.relay.Restart(t)
	// Posted as soon as the relay is back, possibly before the harness has resubscribed: the
	// resubscription's since must cover it.
	second := s.mention(s.ownerSK, "after restart")
	reply := s.waitReply(second.ID)
	if !strings.Contains(reply.Content, "after restart") {
		t.Fatalf("reply %q", reply.Content)
	}
}

// With two agents, a second channel is answered while the first channel's turn is still running
// (its prompt hangs until cancelled): with one agent it would wait behind it.
func TestTwoChannelsRunInParallelWithTwoAgents(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	other := s.relay.CreateChannel(t, s.ownerSK, "second", false)
	s.relay.AddMember(t, s.ownerSK, other, s.agentPK, "bot")
	s.start([]string{"--agents", "2"}, "TESTAGENT_HANG_ON=1") // the first prompt overall hangs
	stuck := s.mention(s.ownerSK, "in general")
	s.waitRecorded("session/prompt", 1)
	b := nostr.Event{Kind: 9, Content: "in second", CreatedAt: nostr.Now(), Tags: nostr.Tags{{"h", other}, {"p", s.agentPK}}}
	if err := b.Sign(s.ownerSK); err != nil {
		t.Fatal(err)
	}
	s.relay.Publish(t, s.ownerSK, b)
	s.waitReply(b.ID)
	if len(s.methods("session/cancel")) != 0 {
		t.Fatal("the first channel's turn ended before the second channel was answered")
	}
	s.waitOutcome(s.mention(s.ownerSK, "!cancel").ID) // the stuck turn, cleaned up
	_ = stuck
}
