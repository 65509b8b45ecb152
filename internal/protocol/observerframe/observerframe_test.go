package observerframe

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
)

func keys(t *testing.T) (string, string) {
	t.Helper()
	sk := nostr.GeneratePrivateKey()
	pk, _ := protocol.PublicKey(sk)
	return sk, pk
}

func TestTelemetryOpensOnlyForItsOwnerWithTheExactTags(t *testing.T) {
	agentSK, agent := keys(t)
	ownerSK, owner := keys(t)
	otherSK, _ := keys(t)
	now := time.Unix(1_800_000_000, 0)
	ev, err := BuildTelemetry(agentSK, owner, nil, Event{Seq: 7, Kind: KindTurnStarted, Payload: []byte(`{"a":1}`)}, now, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := nostr.Tags{{"p", owner}, {"agent", agent}, {"frame", "telemetry"}}
	if !reflect.DeepEqual(ev.Tags, want) || ev.Kind != 24200 {
		t.Fatalf("kind %d tags %v", ev.Kind, ev.Tags)
	}
	e, err := OpenTelemetry(ownerSK, &ev)
	if err != nil || e.Seq != 7 || e.Kind != KindTurnStarted || string(e.Payload) != `{"a":1}` {
		t.Fatalf("opened %+v, %v", e, err)
	}
	if _, err := OpenTelemetry(otherSK, &ev); err == nil {
		t.Fatal("a stranger opened the frame")
	}
	if _, err := OpenControl(agentSK, &ev); err == nil {
		t.Fatal("telemetry opened as control")
	}
}

func TestGuardRefusesAStrangerAStaleFrameAndAReplay(t *testing.T) {
	agentSK, agent := keys(t)
	ownerSK, owner := keys(t)
	strangerSK, _ := keys(t)
	now := time.Unix(1_800_000_000, 0)
	g := &Guard{Owner: owner}
	control := func(sk string, at time.Time) *nostr.Event {
		ev, err := BuildControl(sk, agent, Command{Type: CancelTurn, ChannelID: "c"}, at, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := OpenControl(agentSK, &ev); err != nil {
			t.Fatal(err)
		}
		return &ev
	}
	ok := control(ownerSK, now.Add(-299*time.Second))
	if err := g.Check(ok, now); err != nil {
		t.Fatalf("fresh owner frame: %v", err)
	}
	if err := g.Check(ok, now); !errors.Is(err, ErrReplay) {
		t.Fatalf("replay: %v", err)
	}
	if err := g.Check(control(strangerSK, now), now); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("stranger: %v", err)
	}
	if err := g.Check(control(ownerSK, now.Add(-301*time.Second)), now); !errors.Is(err, ErrStale) {
		t.Fatalf("stale: %v", err)
	}
	if err := g.Check(control(ownerSK, now.Add(301*time.Second)), now); !errors.Is(err, ErrStale) {
		t.Fatalf("future: %v", err)
	}
}
