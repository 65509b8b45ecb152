package console_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/console"
	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/protocol/engram"
	"github.com/buzz-harness/buzz/internal/relay/relaytest"
)

type memoryState struct {
	State   string `json:"state"`
	Profile string `json:"profile"`
	EventID string `json:"eventId"`
}

func readMemory(t *testing.T, url, token string) memoryState {
	t.Helper()
	resp := get(t, url+"/api/memory", map[string]string{"X-Buzz-Token": token})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/api/memory: status %d", resp.StatusCode)
	}
	var m memoryState
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestConsoleShowsTheAgentsCoreMemoryToTheOwner(t *testing.T) {
	relay := relaytest.Start(t)
	ownerSK, agentSK := nostr.GeneratePrivateKey(), nostr.GeneratePrivateKey()
	ownerPK, _ := protocol.PublicKey(ownerSK)
	agentPK, _ := protocol.PublicKey(agentSK)
	s, err := console.New(console.Config{RelayURL: relay.URL, OwnerKey: ownerSK, AgentPubkey: agentPK})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)

	if m := readMemory(t, ts.URL, s.Token()); m.State != "absent" {
		t.Fatalf("before any write: %+v, want absent", m)
	}
	pair, err := engram.AgentSide(agentSK, ownerPK)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := pair.Build(engram.CoreBody("I am Hexa."), nostr.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	relay.Publish(t, agentSK, ev)
	if m := readMemory(t, ts.URL, s.Token()); m.State != "found" || m.Profile != "I am Hexa." || m.EventID != ev.ID {
		t.Fatalf("after the agent wrote core: %+v", m)
	}

	// A newer record under the same d tag replaces the good one at the relay (addressable kind);
	// it cannot be decrypted, and the console must say so rather than show "none yet".
	bad := nostr.Event{Kind: protocol.KindEngram, Content: "garbage", CreatedAt: ev.CreatedAt + 5,
		Tags: nostr.Tags{{"d", pair.DTag(engram.CoreSlug)}, {"p", ownerPK}}}
	relay.Publish(t, agentSK, bad)
	if m := readMemory(t, ts.URL, s.Token()); m.State != "unreadable" {
		t.Fatalf("with only an unreadable record left: %+v", m)
	}
}

func TestConsoleMemoryWithoutAnAgentSaysNone(t *testing.T) {
	ts, token := activityServer(t, nil)
	if m := readMemory(t, ts.URL, token); m.State != "none" {
		t.Fatalf("activity-only console memory: %+v", m)
	}
}
