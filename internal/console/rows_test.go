package console_test

import (
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/console"
	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/protocol/turnmetric"
	"github.com/buzz-harness/buzz/internal/relay/relaytest"
)

func getJSON(t *testing.T, url, token string, v any) {
	t.Helper()
	resp := get(t, url, map[string]string{"X-Buzz-Token": token})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: status %d", url, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

// A row shows when the relay signed it or the agent it names as target did; a member forging a
// row about the agent (or any row not about themselves) is not shown.
func TestConsoleShowsSystemRowsOnlyFromTheRelayOrTheirTargetAgent(t *testing.T) {
	relay := relaytest.Start(t)
	ownerSK, agentSK, memberSK := nostr.GeneratePrivateKey(), nostr.GeneratePrivateKey(), nostr.GeneratePrivateKey()
	ownerPK, _ := protocol.PublicKey(ownerSK)
	agentPK, _ := protocol.PublicKey(agentSK)
	memberPK, _ := protocol.PublicKey(memberSK)
	ch := relay.CreateChannel(t, ownerSK, "general", false)
	relay.AddMember(t, ownerSK, ch, agentPK, "bot")
	relay.AddMember(t, ownerSK, ch, memberPK, "member")
	row := func(sk, typ, target string) nostr.Event {
		body, _ := json.Marshal(map[string]string{"type": typ, "actor": ownerPK, "target": target})
		ev := nostr.Event{Kind: protocol.KindSystemMessage, Content: string(body), Tags: nostr.Tags{{"h", ch}}, CreatedAt: nostr.Now()}
		relay.Publish(t, sk, ev)
		return ev
	}
	row(agentSK, "agent_turn_cancel_noop", agentPK)   // shown: the agent about itself
	row(memberSK, "agent_shutdown", agentPK)          // forged: a member speaking for the agent
	row(agentSK, "agent_session_rotated", memberPK)   // the agent speaking for someone else
	row(memberSK, "agent_turn_cancel_noop", memberPK) // shown: signed by its target

	s, err := console.New(console.Config{RelayURL: relay.URL, OwnerKey: ownerSK, AgentPubkey: agentPK})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	var msgs []struct {
		Pubkey string `json:"pubkey"`
		System *struct {
			Type   string `json:"type"`
			Target string `json:"target"`
		} `json:"system"`
	}
	getJSON(t, ts.URL+"/api/messages?channel="+ch, s.Token(), &msgs)
	var fromRelay, fromTargets int
	for _, m := range msgs {
		if m.System == nil {
			continue
		}
		switch {
		case m.System.Target == m.Pubkey:
			fromTargets++
		case m.Pubkey != agentPK && m.Pubkey != memberPK:
			fromRelay++ // the relay's own rows (channel created, members added)
		default:
			t.Errorf("row %q signed by %s about %s was shown", m.System.Type, m.Pubkey[:8], m.System.Target[:8])
		}
	}
	if fromTargets != 2 || fromRelay == 0 {
		t.Fatalf("%d rows from their targets (want 2), %d from the relay (want some)", fromTargets, fromRelay)
	}
}

func TestConsoleListsTheAgentsTurnsWithTokensAndCost(t *testing.T) {
	relay := relaytest.Start(t)
	ownerSK, agentSK := nostr.GeneratePrivateKey(), nostr.GeneratePrivateKey()
	ownerPK, _ := protocol.PublicKey(ownerSK)
	agentPK, _ := protocol.PublicKey(agentSK)
	ev, err := turnmetric.Build(agentSK, ownerPK, turnmetric.Metric{Harness: "test", Timestamp: turnmetric.FormatTimestamp(time.Now()),
		Turn: &turnmetric.Counts{InputTokens: turnmetric.U64(1200), OutputTokens: turnmetric.U64(34), TotalTokens: turnmetric.U64(1234), CostUSD: turnmetric.F64(0.25)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	relay.Publish(t, agentSK, ev)
	s, err := console.New(console.Config{RelayURL: relay.URL, OwnerKey: ownerSK, AgentPubkey: agentPK})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	var turns []struct {
		TotalTokens *uint64  `json:"totalTokens"`
		CostUSD     *float64 `json:"costUsd"`
	}
	getJSON(t, ts.URL+"/api/turns", s.Token(), &turns)
	if len(turns) != 1 || turns[0].TotalTokens == nil || *turns[0].TotalTokens != 1234 || turns[0].CostUSD == nil || math.Abs(*turns[0].CostUSD-0.25) > 1e-9 {
		t.Fatalf("turns = %+v, want one with 1234 tokens and $0.25", turns)
	}
}
