package harness_test

import (
	"context"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/clock"
	"github.com/buzz-harness/buzz/internal/harness"
	"github.com/buzz-harness/buzz/internal/observer"
	"github.com/buzz-harness/buzz/internal/protocol"
)

// heartbeats runs the harness in process with 10 s heartbeats on a fake clock and counts the
// skips it reports on the activity feed.
type heartbeats struct {
	s     *stack
	clk   *clock.Fake
	skips <-chan observer.Event
}

func startHeartbeats(t *testing.T, s *stack) *heartbeats {
	bus := observer.NewBus(1000)
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	feed, _ := bus.Subscribe(ctx, 1000)
	skips := make(chan observer.Event, 100)
	go func() {
		for e := range feed {
			if e.Type == observer.TypeHeartbeatSkipped {
				skips <- e
			}
		}
	}()
	clk := clock.NewFake(time.Now())
	cancel, _ := s.runInProcess(t, harness.Config{Clock: clk, HeartbeatInterval: 10 * time.Second, Observer: bus}, "TESTAGENT_NO_CLI=1")
	t.Cleanup(cancel)
	s.waitLog("agent ready", 30*time.Second)
	return &heartbeats{s: s, clk: clk, skips: skips}
}

// tick advances one heartbeat interval until the tick is either skipped or prompted (prompts
// counts the heartbeat prompts so far) and reports which.
func (hb *heartbeats) tick(t *testing.T, prompts int) (skipped bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		hb.clk.Advance(10 * time.Second)
		select {
		case <-hb.skips:
			return true
		case <-time.After(50 * time.Millisecond):
		}
		if len(hb.s.methods("session/prompt")) > prompts {
			return false
		}
	}
	t.Fatalf("a heartbeat tick was neither skipped nor prompted; logs:\n%s", hb.s.logs.String())
	return false
}

// drainSkips forgets skips reported so far (ticks the test's own clock moves caused).
func (hb *heartbeats) drainSkips() {
	for {
		select {
		case <-hb.skips:
		default:
			return
		}
	}
}

func TestHeartbeatWithNothingNewSendsNoPrompt(t *testing.T) {
	s := newStack(t)
	hb := startHeartbeats(t, s)
	for i := range 3 {
		if !hb.tick(t, 0) {
			t.Fatalf("tick %d prompted with nothing new", i+1)
		}
	}
	if n := len(s.methods("session/prompt")); n != 0 {
		t.Fatalf("%d prompts, want none", n)
	}
}

// A message nobody mentioned the agent in is news the harness never received: the next tick
// prompts, and the one after (nothing newer) does not.
func TestHeartbeatPromptsOnceForAnUnseenMessage(t *testing.T) {
	s := newStack(t)
	hb := startHeartbeats(t, s)
	if !hb.tick(t, 0) {
		t.Fatal("the first tick prompted with nothing new")
	}
	// Dated on the harness's clock, which the ticks moved ahead of the relay's.
	ev := nostr.Event{Kind: protocol.KindStreamMessage, Content: "a message for whoever reads the channel",
		CreatedAt: nostr.Timestamp(hb.clk.Now().Unix()), Tags: nostr.Tags{{"h", s.channel}}}
	if err := ev.Sign(s.ownerSK); err != nil {
		t.Fatal(err)
	}
	s.relay.Publish(t, s.ownerSK, ev)
	if hb.tick(t, 0) {
		t.Fatal("a tick after an unseen message was skipped")
	}
	if !hb.tick(t, 1) {
		t.Fatal("the tick after the heartbeat prompt prompted again with nothing newer")
	}
}

// A mention the agent already answered in a turn is not news for a heartbeat.
func TestHeartbeatSkipsWhatATurnAlreadyShowedTheAgent(t *testing.T) {
	s := newStack(t)
	hb := startHeartbeats(t, s)
	s.mention(s.ownerSK, "hello")
	deadline := time.Now().Add(30 * time.Second)
	for len(s.methods("session/prompt")) < 1 { // the same-second hold waits on the fake clock
		if time.Now().After(deadline) {
			t.Fatalf("the mention was never prompted; logs:\n%s", s.logs.String())
		}
		hb.clk.Advance(time.Second)
		time.Sleep(20 * time.Millisecond)
	}
	hb.drainSkips()
	if !hb.tick(t, 1) {
		t.Fatal("a tick prompted for a mention the agent was already prompted with")
	}
}
