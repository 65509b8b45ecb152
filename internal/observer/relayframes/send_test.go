package relayframes

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/client"
	"github.com/buzz-harness/buzz/internal/clock"
	"github.com/buzz-harness/buzz/internal/observer"
	"github.com/buzz-harness/buzz/internal/protocol/observerframe"
	"github.com/buzz-harness/buzz/internal/testwait"
)

// refusingRelay refuses every frame with reason, counting the attempts.
type refusingRelay struct {
	reason string
	tries  atomic.Int32
}

func (r *refusingRelay) Publish(_ context.Context, ev *nostr.Event) error {
	r.tries.Add(1)
	return &client.RejectedError{EventID: ev.ID, Message: r.reason}
}

// A relay that does not know the agent's owner refuses every frame: the sender stops signing and
// sending each ACP line for a while, and tries again once the pause is over.
func TestARestrictedRefusalPausesSendingThenItTriesAgain(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	clk := clock.NewFake(time.Now())
	bus := observer.NewBus(0)
	relay := &refusingRelay{reason: "restricted: observer frames need the agent's owner proven by a NIP-OA auth tag"}
	s := Start(ctx, Config{AgentSecret: nostr.GeneratePrivateKey(), Owner: someKey(t), Clock: clk}, bus, relay)
	defer s.Wait()
	defer cancel()

	testwait.Eventually(t, 10*time.Second, func() bool { return relay.tries.Load() == 1 }, "harness_started sent and refused")
	for range 20 {
		bus.Publish(observer.Scope{}, observer.ACPLine{Dir: "recv", Line: `{"jsonrpc":"2.0","id":1,"result":{}}`, Bytes: 36})
	}
	testwait.Eventually(t, 10*time.Second, func() bool { return s.Dropped() == 20 }, "the 20 lines dropped during the pause")
	if n := relay.tries.Load(); n != 1 {
		t.Fatalf("%d frames sent to a relay that refuses them all, want only the first", n)
	}
	clk.Advance(restrictedPause + time.Second)
	bus.Publish(observer.Scope{}, observer.ACPLine{Dir: "recv", Line: `{"jsonrpc":"2.0","id":2,"result":{}}`, Bytes: 36})
	testwait.Eventually(t, 10*time.Second, func() bool { return relay.tries.Load() == 2 }, "a frame tried again after the pause")
}

// Other refusals (a rate limit, say) are per frame: nothing pauses.
func TestARateLimitRefusalDoesNotPauseSending(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	bus := observer.NewBus(0)
	relay := &refusingRelay{reason: "rate-limited: observer telemetry over 100 frames/s per agent"}
	s := Start(ctx, Config{AgentSecret: nostr.GeneratePrivateKey(), Owner: someKey(t), Clock: clock.NewFake(time.Now())}, bus, relay)
	defer s.Wait()
	defer cancel()
	testwait.Eventually(t, 10*time.Second, func() bool { return relay.tries.Load() == 1 }, "harness_started sent")
	for range 5 {
		bus.Publish(observer.Scope{}, observer.ACPLine{Dir: "recv", Line: `{"jsonrpc":"2.0","id":1,"result":{}}`, Bytes: 36})
	}
	testwait.Eventually(t, 10*time.Second, func() bool { return relay.tries.Load() == 6 }, "every frame tried")
}

func someKey(t *testing.T) string {
	pk, err := nostr.GetPublicKey(nostr.GeneratePrivateKey())
	if err != nil {
		t.Fatal(err)
	}
	return pk
}

// acceptingRelay takes every frame, keeping their kinds in order.
type acceptingRelay struct {
	owner string // the owner's secret key, to open the frames
	mu    sync.Mutex
	kinds []string
}

func (r *acceptingRelay) Publish(_ context.Context, ev *nostr.Event) error {
	e, err := observerframe.OpenTelemetry(r.owner, ev)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.kinds = append(r.kinds, e.Kind)
	r.mu.Unlock()
	return nil
}

func (r *acceptingRelay) sent() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.kinds)
}

// A burst of ACP lines past the relay's rate is dropped here, before it is encrypted and signed
// for a relay that would refuse it, and leaves room in the same second for the frames a client's
// state depends on (a control_result); the next second takes lines again.
func TestABurstOfACPLinesStaysUnderTheRelayRateAndLeavesRoomForControlResults(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	clk := clock.NewFake(time.Now())
	bus := observer.NewBus(0)
	ownerSK := nostr.GeneratePrivateKey()
	ownerPK, _ := nostr.GetPublicKey(ownerSK)
	relay := &acceptingRelay{owner: ownerSK}
	s := Start(ctx, Config{AgentSecret: nostr.GeneratePrivateKey(), Owner: ownerPK, Clock: clk}, bus, relay)
	defer s.Wait()
	defer cancel()

	const burst = 3 * observerframe.TelemetryPerSecond
	for range burst {
		bus.Publish(observer.Scope{}, observer.ACPLine{Dir: "recv", Line: `{"jsonrpc":"2.0","id":1,"result":{}}`, Bytes: 36})
	}
	settled := func(n int) func() bool { return func() bool { return len(relay.sent())+s.Dropped() == n } }
	testwait.Eventually(t, 10*time.Second, settled(1+burst), "the burst sent or dropped")
	if got := len(relay.sent()); got != budgetBulk {
		t.Fatalf("%d frames sent in the burst's second (harness_started and lines), want %d (the bulk's share of the relay's %d/s)", got, budgetBulk, observerframe.TelemetryPerSecond)
	}
	s.Result("ch", map[string]any{"type": observerframe.CancelTurn, "status": "sent"})
	testwait.Eventually(t, 10*time.Second, settled(2+burst), "the control result sent or dropped")
	if got := relay.sent(); got[len(got)-1] != observerframe.KindControlResult {
		t.Fatalf("last frame sent %q, want the control_result, past the lines' share of the second", got[len(got)-1])
	}

	clk.Advance(budgetWindow)
	bus.Publish(observer.Scope{}, observer.ACPLine{Dir: "recv", Line: `{"jsonrpc":"2.0","id":2,"result":{}}`, Bytes: 36})
	testwait.Eventually(t, 10*time.Second, settled(3+burst), "the next second's line sent or dropped")
	if got := relay.sent(); got[len(got)-1] != observerframe.KindACPRead {
		t.Fatalf("last frame sent %q a second later, want the ACP line", got[len(got)-1])
	}
}
