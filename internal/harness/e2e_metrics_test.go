package harness_test

import (
	"math"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/protocol/turnmetric"
	"github.com/buzz-harness/buzz/internal/testwait"
)

func TestTurnWithUsagePublishesAMetricOnlyTheOwnerCanRead(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	otherSK, otherPK := newKey(t)
	s.relay.AddMember(t, s.ownerSK, s.channel, otherPK, "member")
	s.start(nil, "TESTAGENT_COST_PER_TURN=0.25")
	m := s.mention(s.ownerSK, "count my tokens")
	s.waitReply(m.ID)
	f := nostr.Filter{Kinds: []int{protocol.KindTurnMetric}, Authors: []string{s.agentPK}}
	ev := s.waitEvent(20*time.Second, f)
	got, err := turnmetric.Decode(s.ownerSK, &ev)
	if err != nil {
		t.Fatalf("owner cannot decode the metric: %v", err)
	}
	if got.Turn == nil || got.Turn.InputTokens == nil || *got.Turn.InputTokens == 0 || got.Turn.TotalTokens == nil {
		t.Fatalf("turn counts %+v, want the agent's reported tokens", got.Turn)
	}
	if got.Turn.CostUSD == nil || math.Abs(*got.Turn.CostUSD-0.25) > 1e-9 {
		t.Fatalf("turn cost %v, want 0.25 from the agent's usage_update", got.Turn.CostUSD)
	}
	if got.ChannelID != s.channel || got.SessionID == "" || got.TurnSeq == nil || *got.TurnSeq != 1 || !got.DeltaReliable ||
		got.Cumulative == nil || got.StopReason != "end_turn" || len(got.TriggeringEventIDs) != 1 || got.TriggeringEventIDs[0] != m.ID {
		t.Fatalf("metric %+v", got)
	}
	if evs := s.relay.Query(t, otherSK, f); len(evs) != 0 {
		t.Fatalf("another channel member read %d metrics", len(evs))
	}
	if _, err := turnmetric.Decode(otherSK, &ev); err == nil {
		t.Fatal("another key decoded the owner's metric")
	}

	// The second turn of the session: the delta is this turn's alone, the totals run on.
	m2 := s.mention(s.ownerSK, "again", replyTo(m.ID))
	s.waitPrompted(m2.ID)
	var second *turnmetric.Metric
	testwait.Eventually(t, 20*time.Second, func() bool {
		for _, e := range s.relay.Query(t, s.ownerSK, f) {
			if mm, err := turnmetric.Decode(s.ownerSK, &e); err == nil && mm.TurnSeq != nil && *mm.TurnSeq == 2 {
				second = &mm
			}
		}
		return second != nil
	}, "the second turn's metric")
	if second.Turn.CostUSD == nil || math.Abs(*second.Turn.CostUSD-0.25) > 1e-9 || math.Abs(*second.Cumulative.CostUSD-0.5) > 1e-9 {
		t.Fatalf("second metric turn %+v cumulative %+v, want 0.25 and 0.5", second.Turn, second.Cumulative)
	}
}

func TestTurnWithoutUsagePublishesNoMetric(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start(nil, "TESTAGENT_NO_USAGE=1")
	m := s.mention(s.ownerSK, "no usage here")
	s.waitReply(m.ID)
	// A marker after the turn: the owner's own message, published once the reply is in; any
	// metric from the turn would have been published before the harness answered the next one.
	m2 := s.mention(s.ownerSK, "and again")
	s.waitReply(m2.ID)
	if evs := s.relay.Query(t, s.ownerSK, nostr.Filter{Kinds: []int{protocol.KindTurnMetric}}); len(evs) != 0 {
		t.Fatalf("%d metrics for turns that reported no usage", len(evs))
	}
}
