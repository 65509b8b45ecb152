package relay

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/protocol/observerframe"
	"github.com/buzz-harness/buzz/internal/protocol/ownerauth"
)

// observerKeys is an agent, its owner (who attested it) and a stranger, with real keys: the
// owner rule verifies the NIP-OA signature.
type observerKeys struct {
	agentSK, agent, ownerSK, owner, strangerSK, stranger string
	auth                                                 nostr.Tag
}

func newObserverKeys(t *testing.T) observerKeys {
	t.Helper()
	var k observerKeys
	k.agentSK, k.ownerSK, k.strangerSK = nostr.GeneratePrivateKey(), nostr.GeneratePrivateKey(), nostr.GeneratePrivateKey()
	k.agent, _ = protocol.PublicKey(k.agentSK)
	k.owner, _ = protocol.PublicKey(k.ownerSK)
	k.stranger, _ = protocol.PublicKey(k.strangerSK)
	tag, err := ownerauth.Issue(k.ownerSK, k.agent, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	k.auth = tag.NostrTag()
	return k
}

func telemetryTo(t *testing.T, agentSK, to string, auth nostr.Tag) *nostr.Event {
	t.Helper()
	ev, err := observerframe.BuildTelemetry(agentSK, to, auth, observerframe.Event{Kind: observerframe.KindTurnLiveness, Payload: []byte(`{}`)}, time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return &ev
}

func TestObserverFrameAddressingRefusesAChannelOrAWrongEnvelope(t *testing.T) {
	for name, tc := range map[string]struct {
		tags nostr.Tags
		want string
	}{
		"h tag":                        {nostr.Tags{{"p", pkOwner}, {"agent", pkAgent}, {"frame", "telemetry"}, {"h", testChannel}}, "invalid: observer frames (kind 24200) are global and carry no h tag"},
		"no p":                         {nostr.Tags{{"agent", pkAgent}, {"frame", "telemetry"}}, "invalid: an observer frame needs exactly one p tag naming its recipient"},
		"no frame":                     {nostr.Tags{{"p", pkOwner}, {"agent", pkAgent}}, `invalid: an observer frame needs one frame tag, "telemetry" or "control"`},
		"odd frame":                    {nostr.Tags{{"p", pkOwner}, {"agent", pkAgent}, {"frame", "chatter"}}, `invalid: an observer frame needs one frame tag, "telemetry" or "control"`},
		"telemetry of another agent":   {nostr.Tags{{"p", pkOwner}, {"agent", pkMember}, {"frame", "telemetry"}}, "invalid: a telemetry frame's agent tag must be its author"},
		"control naming another agent": {nostr.Tags{{"p", pkOwner}, {"agent", pkMember}, {"frame", "control"}}, "invalid: a control frame's agent tag must be its recipient"},
	} {
		t.Run(name, func(t *testing.T) {
			ev := ruleEvent(protocol.KindObserverFrame, pkAgent, tc.tags...)
			wantRefusal(t, observerFrameAddressing(t.Context(), nil, wsIngest(ev)), 400, tc.want)
		})
	}
	ok := ruleEvent(protocol.KindObserverFrame, pkAgent, nostr.Tag{"p", pkOwner}, nostr.Tag{"agent", pkAgent}, nostr.Tag{"frame", "telemetry"})
	wantPass(t, observerFrameAddressing(t.Context(), nil, wsIngest(ok)))
}

func TestObserverTelemetryToANonOwnerIsRefused(t *testing.T) {
	r := openTestRelay(t)
	k := newObserverKeys(t)
	wantRefusal(t, observerBetweenAgentAndOwner(t.Context(), r, wsIngest(telemetryTo(t, k.agentSK, k.stranger, k.auth))),
		403, "restricted: telemetry frames go only to the agent's owner")
	wantPass(t, observerBetweenAgentAndOwner(t.Context(), r, wsIngest(telemetryTo(t, k.agentSK, k.owner, k.auth))))
}

func TestObserverTelemetryWithoutAProvenOwnerIsRefused(t *testing.T) {
	r := openTestRelay(t)
	k := newObserverKeys(t)
	wantRefusal(t, observerBetweenAgentAndOwner(t.Context(), r, wsIngest(telemetryTo(t, k.agentSK, k.owner, nil))),
		403, "restricted: observer frames need the agent's owner proven by a NIP-OA auth tag")
	// An attestation the owner gave someone else proves nothing for this agent.
	other, _ := ownerauth.Issue(k.ownerSK, k.stranger, "", nil)
	wantRefusal(t, observerBetweenAgentAndOwner(t.Context(), r, wsIngest(telemetryTo(t, k.agentSK, k.owner, other.NostrTag()))),
		403, "restricted: observer frames need the agent's owner proven by a NIP-OA auth tag")
}

func TestObserverControlFromANonOwnerIsRefused(t *testing.T) {
	r := openTestRelay(t)
	k := newObserverKeys(t)
	// The agent's attested frame teaches the relay its owner.
	wantPass(t, observerBetweenAgentAndOwner(t.Context(), r, wsIngest(telemetryTo(t, k.agentSK, k.owner, k.auth))))
	control := func(sk string) *ingest {
		ev, err := observerframe.BuildControl(sk, k.agent, observerframe.Command{Type: observerframe.CancelTurn}, time.Now(), nil)
		if err != nil {
			t.Fatal(err)
		}
		return wsIngest(&ev)
	}
	wantRefusal(t, observerBetweenAgentAndOwner(t.Context(), r, control(k.strangerSK)), 403, "restricted: control frames come only from the agent's owner")
	wantPass(t, observerBetweenAgentAndOwner(t.Context(), r, control(k.ownerSK)))
}

func TestObserverOwnerIsLearnedFromTheAgentsAttestedProfile(t *testing.T) {
	r := openTestRelay(t)
	k := newObserverKeys(t)
	profile := nostr.Event{Kind: protocol.KindProfile, CreatedAt: nostr.Now(), Tags: nostr.Tags{k.auth}, Content: `{"name":"agent"}`}
	if err := protocol.Sign(&profile, k.agentSK); err != nil {
		t.Fatal(err)
	}
	if res := r.submit(t.Context(), &profile, fromBridge(k.agent)); !res.OK {
		t.Fatalf("profile refused: %s", res.Msg)
	}
	ev, _ := observerframe.BuildControl(k.ownerSK, k.agent, observerframe.Command{Type: observerframe.CancelTurn}, time.Now(), nil)
	wantPass(t, observerBetweenAgentAndOwner(t.Context(), r, wsIngest(&ev)))
}

func TestObserverTelemetryOverTheRateIsDroppedAndCounted(t *testing.T) {
	var now atomic.Int64 // seconds; the relay's other goroutines read the clock too
	now.Store(1_700_000_000)
	r := openTestRelayWith(t, Config{Now: func() time.Time { return time.Unix(now.Load(), 0) }})
	ev := ruleEvent(protocol.KindObserverFrame, pkAgent, nostr.Tag{"p", pkOwner}, nostr.Tag{"agent", pkAgent}, nostr.Tag{"frame", "telemetry"})
	for range ObserverTelemetryPerSecond {
		wantPass(t, observerTelemetryRate(t.Context(), r, wsIngest(ev)))
	}
	wantRefusal(t, observerTelemetryRate(t.Context(), r, wsIngest(ev)), 429, "rate-limited: observer telemetry over 100 frames/s per agent")
	if got := r.ObserverFramesDropped(); got != 1 {
		t.Fatalf("dropped = %d, want 1", got)
	}
	other := ruleEvent(protocol.KindObserverFrame, pkMember, nostr.Tag{"p", pkOwner}, nostr.Tag{"agent", pkMember}, nostr.Tag{"frame", "telemetry"})
	wantPass(t, observerTelemetryRate(t.Context(), r, wsIngest(other))) // per agent
	control := ruleEvent(protocol.KindObserverFrame, pkOwner, nostr.Tag{"p", pkAgent}, nostr.Tag{"agent", pkAgent}, nostr.Tag{"frame", "control"})
	wantPass(t, observerTelemetryRate(t.Context(), r, wsIngest(control))) // control is not limited
	now.Add(1)
	wantPass(t, observerTelemetryRate(t.Context(), r, wsIngest(ev)))
}
