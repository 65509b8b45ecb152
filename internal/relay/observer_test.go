package relay_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/protocol/observerframe"
	"github.com/buzz-harness/buzz/internal/protocol/ownerauth"
	"github.com/buzz-harness/buzz/internal/relay"
	"github.com/buzz-harness/buzz/internal/relay/relaytest"
)

func TestObserverFrameReachesOnlyItsOwnersSubscriptionAndIsNotStored(t *testing.T) {
	s := sharedRelay
	agentSK, agentPK := keypair(t)
	ownerSK, ownerPK := keypair(t)
	strangerSK, _ := keypair(t)
	tag, err := ownerauth.Issue(ownerSK, agentPK, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	ownerSub := subscribe(t, s.Connect(t, ownerSK), nostr.Filter{Kinds: []int{protocol.KindObserverFrame}, Tags: nostr.TagMap{"p": {ownerPK}}})
	// The stranger follows everything the agent signs: the note published after the frame is
	// the first thing it may see. (Asking for kind 24200 by the owner's p is refused outright.)
	strangerSub := subscribe(t, s.Connect(t, strangerSK), nostr.Filter{Authors: []string{agentPK}})
	agent := s.Connect(t, agentSK)

	frame, err := observerframe.BuildTelemetry(agentSK, ownerPK, tag.NostrTag(),
		observerframe.Event{Seq: 1, Kind: observerframe.KindHarnessStarted, Payload: []byte(`{}`)}, time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := agent.Publish(context.Background(), frame); err != nil {
		t.Fatalf("frame refused: %v", err)
	}
	got := nextEvent(t, ownerSub)
	e, err := observerframe.OpenTelemetry(ownerSK, got)
	if err != nil || e.Kind != observerframe.KindHarnessStarted {
		t.Fatalf("owner opened %+v, %v", e, err)
	}
	note := nostr.Event{Kind: protocol.KindTextNote, Content: "after", CreatedAt: nostr.Now(), Tags: nostr.Tags{{"p", ownerPK}}}
	note.Sign(agentSK)
	if err := agent.Publish(context.Background(), note); err != nil {
		t.Fatal(err)
	}
	if ev := nextEvent(t, strangerSub); ev.ID != note.ID {
		t.Fatalf("the stranger received kind %d before the note", ev.Kind)
	}
	if evs := s.Query(t, ownerSK, nostr.Filter{Kinds: []int{protocol.KindObserverFrame}, Tags: nostr.TagMap{"p": {ownerPK}}}); len(evs) != 0 {
		t.Fatalf("%d observer frames stored", len(evs))
	}
}

func TestObserverTelemetryToAStrangerIsRefusedOverTheSocket(t *testing.T) {
	s := sharedRelay
	agentSK, agentPK := keypair(t)
	ownerSK, _ := keypair(t)
	_, strangerPK := keypair(t)
	tag, _ := ownerauth.Issue(ownerSK, agentPK, "", nil)
	frame, err := observerframe.BuildTelemetry(agentSK, strangerPK, tag.NostrTag(),
		observerframe.Event{Kind: observerframe.KindHarnessStarted, Payload: []byte(`{}`)}, time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	err = s.Connect(t, agentSK).Publish(context.Background(), frame)
	if err == nil || !strings.Contains(err.Error(), "restricted: telemetry frames go only to the agent's owner") {
		t.Fatalf("publish = %v, want the owner refusal", err)
	}
}

func TestObserverTelemetryOverTheRateIsRefusedAndTheConnectionStays(t *testing.T) {
	frozen := time.Now() // one rate window for the whole test, however slow the machine
	s := relaytest.StartWith(t, func(c *relay.Config) { c.Now = func() time.Time { return frozen } })
	agentSK, agentPK := keypair(t)
	ownerSK, ownerPK := keypair(t)
	tag, _ := ownerauth.Issue(ownerSK, agentPK, "", nil)
	c := dialRaw(t, s.URL)
	c.mustAuth(agentSK, s.URL)
	send := func(seq uint64) []any {
		frame, err := observerframe.BuildTelemetry(agentSK, ownerPK, tag.NostrTag(),
			observerframe.Event{Seq: seq, Kind: observerframe.KindTurnLiveness, Payload: []byte(`{}`)}, frozen, nil)
		if err != nil {
			t.Fatal(err)
		}
		c.send("EVENT", frame)
		return c.readUntil("OK")
	}
	for i := range relay.ObserverTelemetryPerSecond {
		if ok := send(uint64(i)); ok[2] != true {
			t.Fatalf("frame %d refused: %v", i, ok)
		}
	}
	ok := send(1000)
	if ok[2] != false || !hasPrefix(ok[3], "rate-limited:") {
		t.Fatalf("frame over the rate: %v", ok)
	}
	// Still connected and authenticated: a note goes through.
	if ok := c.publish(agentSK, nostr.Event{Kind: protocol.KindTextNote, Content: "still here", CreatedAt: nostr.Timestamp(frozen.Unix())}); ok[2] != true {
		t.Fatalf("after the refusal: %v", ok)
	}
}
