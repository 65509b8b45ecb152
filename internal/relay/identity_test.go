package relay_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/protocol/turnmetric"
	"github.com/buzz-harness/buzz/internal/relay/relaytest"
)

func metricEvent(t *testing.T, agentSK, owner string) nostr.Event {
	t.Helper()
	ev, err := turnmetric.Build(agentSK, owner, turnmetric.Metric{Harness: "test", Timestamp: turnmetric.FormatTimestamp(time.Now()),
		Turn: &turnmetric.Counts{InputTokens: turnmetric.U64(10)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

func TestTurnMetricIsReadableOnlyByItsOwnerAndAgent(t *testing.T) {
	s := relaytest.Start(t)
	agentSK, _ := keypair(t)
	ownerSK, ownerPK := keypair(t)
	otherSK, _ := keypair(t)
	ev := metricEvent(t, agentSK, ownerPK)
	s.Publish(t, agentSK, ev)
	f := nostr.Filter{Kinds: []int{protocol.KindTurnMetric}}
	if got := s.Query(t, ownerSK, f); len(got) != 1 {
		t.Fatalf("owner sees %d metrics, want 1", len(got))
	}
	if got := s.Query(t, agentSK, f); len(got) != 1 {
		t.Fatalf("agent sees %d metrics, want 1", len(got))
	}
	if got := s.Query(t, otherSK, f); len(got) != 0 {
		t.Fatalf("a stranger sees %d metrics, want 0", len(got))
	}
	if got := s.Query(t, otherSK, nostr.Filter{IDs: []string{ev.ID}}); len(got) != 0 {
		t.Fatal("a stranger read a metric by id")
	}
}

func TestTurnMetricWithAChannelTagOrWrongEnvelopeIsRefused(t *testing.T) {
	s := relaytest.Start(t)
	agentSK, agentPK := keypair(t)
	_, ownerPK := keypair(t)
	ch := s.CreateChannel(t, agentSK, "general", false)
	cases := map[string]nostr.Tags{
		"h tag":          {{"p", ownerPK}, {"agent", agentPK}, {"h", ch}},
		"no p":           {{"agent", agentPK}},
		"two p":          {{"p", ownerPK}, {"p", agentPK}, {"agent", agentPK}},
		"agent not self": {{"p", ownerPK}, {"agent", ownerPK}},
	}
	for name, tags := range cases {
		ev := nostr.Event{Kind: protocol.KindTurnMetric, Content: "x", Tags: tags}
		if status, res := s.TryPublish(t, agentSK, &ev); status == http.StatusOK || res.Accepted {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestSystemRowFromANonMemberOfAnOpenChannelIsRefused(t *testing.T) {
	s := relaytest.Start(t)
	ownerSK, _ := keypair(t)
	memberSK, memberPK := keypair(t)
	strangerSK, _ := keypair(t)
	ch := s.CreateChannel(t, ownerSK, "open", false)
	s.AddMember(t, ownerSK, ch, memberPK, "bot")
	row := func() nostr.Event {
		body, _ := json.Marshal(map[string]string{"type": "agent_shutdown"})
		return nostr.Event{Kind: protocol.KindSystemMessage, Content: string(body), Tags: nostr.Tags{{"h", ch}}}
	}
	ev := row()
	status, res := s.TryPublish(t, strangerSK, &ev)
	if status == http.StatusOK || res.Accepted || !strings.Contains(res.Error, "member") {
		t.Fatalf("stranger's 40099: status %d %+v, want refused as a non-member", status, res)
	}
	s.Publish(t, memberSK, row())
	// Ordinary messages in the open channel stay open to anyone.
	s.Publish(t, strangerSK, nostr.Event{Kind: 9, Content: "hi", Tags: nostr.Tags{{"h", ch}}})
}
