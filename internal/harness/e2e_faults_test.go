package harness_test

import (
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
)

func TestAgentCrashMidTurnIsRespawnedAndMentionStillAnswered(t *testing.T) {
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

func TestTwoChannelsRunInParallelWithTwoAgents(t *testing.T) {
	s := newStack(t)
	other := s.relay.CreateChannel(t, s.ownerSK, "second", false)
	s.relay.AddMember(t, s.ownerSK, other, s.agentPK, "bot")
	// Every first prompt of an agent process hangs until cancelled; with two agents both
	// channels' turns must be in flight at once for both hangs to be observed before any reply.
	s.start([]string{"--agents", "2"})
	s.waitLog("slot=1", 20*time.Second)
	a := s.mention(s.ownerSK, "in general")
	b := nostr.Event{Kind: 9, Content: "in second", CreatedAt: nostr.Now(), Tags: nostr.Tags{{"h", other}, {"p", s.agentPK}}}
	if err := b.Sign(s.ownerSK); err != nil {
		t.Fatal(err)
	}
	s.relay.Publish(t, s.ownerSK, b)
	s.waitReply(a.ID)
	s.waitReply(b.ID)
	if !strings.Contains(s.logs.String(), "slot=0") || !strings.Contains(s.logs.String(), "slot=1") {
		t.Fatal("two agent slots were not both started")
	}
}
