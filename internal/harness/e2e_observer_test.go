package harness_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/client"
	"github.com/buzz-harness/buzz/internal/clock"
	"github.com/buzz-harness/buzz/internal/harness"
	"github.com/buzz-harness/buzz/internal/observer/relayframes"
	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/protocol/observerframe"
	"github.com/buzz-harness/buzz/internal/protocol/ownerauth"
	"github.com/buzz-harness/buzz/internal/testwait"
)

// ownerWatch is the owner's side of the relay observer: a real WebSocket subscription as the
// owner that decrypts every telemetry frame, and the owner's key for sending control frames.
type ownerWatch struct {
	t    *testing.T
	live *client.Live
	sk   string

	mu     sync.Mutex
	frames []observerframe.Event
}

func watchAsOwner(t *testing.T, s *stack) *ownerWatch {
	t.Helper()
	w := &ownerWatch{t: t, sk: s.ownerSK}
	w.live = client.NewLive(client.LiveConfig{RelayURL: s.relay.URL, SecretKey: s.ownerSK})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.live.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	w.live.Subscribe("frames", nostr.Filter{Kinds: []int{protocol.KindObserverFrame}, Tags: nostr.TagMap{"p": {s.ownerPK}}})
	eose := make(chan struct{})
	go func() {
		for in := range w.live.Events() {
			if in.EOSE {
				select {
				case <-eose:
				default:
					close(eose)
				}
			}
			if in.Event == nil {
				continue
			}
			e, err := observerframe.OpenTelemetry(s.ownerSK, in.Event)
			if err != nil {
				t.Errorf("a frame the owner cannot open: %v", err)
				continue
			}
			w.mu.Lock()
			w.frames = append(w.frames, e)
			w.mu.Unlock()
		}
	}()
	select {
	case <-eose:
	case <-time.After(10 * time.Second):
		t.Fatal("the owner's subscription got no EOSE")
	}
	return w
}

func (w *ownerWatch) all() []observerframe.Event {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.frames)
}

// waitKind waits until n frames of kind arrived and returns them all.
func (w *ownerWatch) waitKind(kind string, n int) []observerframe.Event {
	w.t.Helper()
	var got []observerframe.Event
	testwait.Eventually(w.t, 30*time.Second, func() bool {
		got = nil
		for _, e := range w.all() {
			if e.Kind == kind {
				got = append(got, e)
			}
		}
		return len(got) >= n
	}, kind+" frames")
	return got
}

// control sends one control frame as the owner, dated at.
func (w *ownerWatch) control(agent string, c observerframe.Command, at time.Time) nostr.Event {
	w.t.Helper()
	ev, err := observerframe.BuildControl(w.sk, agent, c, at, nil)
	if err != nil {
		w.t.Fatal(err)
	}
	w.send(ev)
	return ev
}

func (w *ownerWatch) send(ev nostr.Event) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.live.Publish(ctx, &ev); err != nil {
		w.t.Fatalf("control frame refused: %v", err)
	}
}

// observedStack runs the harness in process on a fake clock, attested by the owner (NIP-OA), with
// the relay observer on and liveness every 5 s; its first prompt hangs until cancelled.
func observedStack(t *testing.T) (*stack, *ownerWatch, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(time.Now())
	s, w := observedStackWith(t, harness.Config{Clock: clk, TurnLiveness: 5 * time.Second}, "TESTAGENT_HANG_ON=1")
	return s, w, clk
}

// observedStackWith runs the harness in process with cfg, attested by the owner, the owner
// watching its frames.
func observedStackWith(t *testing.T, cfg harness.Config, env ...string) (*stack, *ownerWatch) {
	t.Helper()
	s := newStack(t)
	w := watchAsOwner(t, s)
	tag, err := ownerauth.Issue(s.ownerSK, s.agentPK, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.AuthTag = tag.JSON()
	cancel, _ := s.runInProcess(t, cfg, env...)
	t.Cleanup(cancel)
	s.waitLog("agent ready", 30*time.Second)
	return s, w
}

func TestObserverOwnerDecryptsEveryFrameOfATurnInOrderWithLivenessTicks(t *testing.T) {
	t.Parallel()
	s, w, clk := observedStack(t)
	w.waitKind(observerframe.KindAgentInitialized, 1)
	s.mention(s.ownerSK, "long job")
	promptOnFakeClock(t, s, clk)
	started := w.waitKind(observerframe.KindTurnStarted, 1)[0]
	testwait.Eventually(t, 30*time.Second, func() bool {
		for _, e := range w.all() {
			if e.Kind == observerframe.KindTurnLiveness {
				return true
			}
		}
		clk.Advance(5 * time.Second) // one liveness tick
		return false
	}, "a turn_liveness frame")
	w.control(s.agentPK, observerframe.Command{Type: observerframe.CancelTurn, ChannelID: s.channel}, clk.Now())
	w.waitKind(observerframe.KindControlResult, 1)
	testwait.Eventually(t, 30*time.Second, func() bool {
		for _, e := range w.all() {
			if e.Kind == observerframe.KindTurnCompleted || e.Kind == observerframe.KindTurnError {
				return true
			}
		}
		return false
	}, "the turn's end")

	frames := w.all()
	first := map[string]int{}
	for i, e := range frames {
		if i > 0 && e.Seq <= frames[i-1].Seq {
			t.Fatalf("frame %d has seq %d after %d: out of order", i, e.Seq, frames[i-1].Seq)
		}
		if _, ok := first[e.Kind]; !ok {
			first[e.Kind] = i
		}
	}
	end, ok := first[observerframe.KindTurnCompleted]
	if !ok {
		end = first[observerframe.KindTurnError]
	}
	order := []string{observerframe.KindHarnessStarted, observerframe.KindAgentInitialized, observerframe.KindSessionResolved,
		observerframe.KindTurnStarted, observerframe.KindTurnLiveness, observerframe.KindControlResult}
	for i, k := range order {
		at, ok := first[k]
		if !ok {
			t.Fatalf("no %s frame; got %v", k, kinds(frames))
		}
		if i > 0 && at < first[order[i-1]] {
			t.Fatalf("%s before %s: %v", k, order[i-1], kinds(frames))
		}
	}
	if end < first[observerframe.KindTurnLiveness] {
		t.Fatalf("the turn ended before its liveness tick: %v", kinds(frames))
	}
	for _, k := range []string{observerframe.KindACPWrite, observerframe.KindACPRead} {
		if _, ok := first[k]; !ok {
			t.Fatalf("no %s frame: %v", k, kinds(frames))
		}
	}
	for _, e := range frames {
		if e.Kind == observerframe.KindTurnLiveness && (e.TurnID != started.TurnID || e.ChannelID != s.channel) {
			t.Fatalf("liveness for turn %q channel %q, want %q %q", e.TurnID, e.ChannelID, started.TurnID, s.channel)
		}
	}
}

// promptOnFakeClock moves the clock past the same-second hold until the mention is prompted.
func promptOnFakeClock(t *testing.T, s *stack, clk *clock.Fake) {
	t.Helper()
	testwait.Eventually(t, 30*time.Second, func() bool {
		if len(s.methods("session/prompt")) > 0 {
			return true
		}
		clk.Advance(time.Second)
		return false
	}, "the mention's prompt")
}

func kinds(frames []observerframe.Event) []string {
	out := make([]string, len(frames))
	for i, e := range frames {
		out[i] = e.Kind
	}
	return out
}

func TestObserverCancelTurnStopsTheRunningTurnAndAnswersControlResult(t *testing.T) {
	t.Parallel()
	s, w, clk := observedStack(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(s.logs.String())
		}
	})
	w.waitKind(observerframe.KindHarnessStarted, 1)
	s.mention(s.ownerSK, "long job")
	promptOnFakeClock(t, s, clk)
	w.control(s.agentPK, observerframe.Command{Type: observerframe.CancelTurn, ChannelID: s.channel}, clk.Now())
	res := w.waitKind(observerframe.KindControlResult, 1)[0]
	if string(res.Payload) == "" || !strings.Contains(string(res.Payload), `"status":"sent"`) || !strings.Contains(string(res.Payload), `"type":"cancel_turn"`) {
		t.Fatalf("control_result %s", res.Payload)
	}
	s.waitRecorded("session/cancel", 1)
	// Nothing runs now: a second cancel finds no turn.
	testwait.Eventually(t, 30*time.Second, func() bool {
		for _, e := range w.all() {
			if e.Kind == observerframe.KindTurnCompleted || e.Kind == observerframe.KindTurnError {
				return true
			}
		}
		return false
	}, "the turn's end")
	w.control(s.agentPK, observerframe.Command{Type: observerframe.CancelTurn, ChannelID: s.channel}, clk.Now())
	if got := w.waitKind(observerframe.KindControlResult, 2)[1]; !strings.Contains(string(got.Payload), `"status":"no_active_turn"`) {
		t.Fatalf("second control_result %s", got.Payload)
	}
}

func TestObserverStaleOrReplayedControlFrameIsRefused(t *testing.T) {
	t.Parallel()
	s, w, clk := observedStack(t)
	w.waitKind(observerframe.KindHarnessStarted, 1)
	s.mention(s.ownerSK, "long job")
	promptOnFakeClock(t, s, clk)
	// Dated 301 s ago: past the ±300 s window.
	w.control(s.agentPK, observerframe.Command{Type: observerframe.CancelTurn, ChannelID: s.channel}, clk.Now().Add(-301*time.Second))
	res := w.waitKind(observerframe.KindControlResult, 1)[0]
	if !strings.Contains(string(res.Payload), `"status":"rejected"`) {
		t.Fatalf("stale frame answered %s", res.Payload)
	}
	// A fresh one is taken; the same frame sent again is not.
	ok := w.control(s.agentPK, observerframe.Command{Type: observerframe.SwitchModel, ChannelID: s.channel, ModelID: "nope"}, clk.Now())
	w.waitKind(observerframe.KindControlResult, 2)
	w.send(ok)
	w.control(s.agentPK, observerframe.Command{Type: observerframe.CancelTurn, ChannelID: s.channel}, clk.Now())
	got := w.waitKind(observerframe.KindControlResult, 3)
	if !strings.Contains(string(got[2].Payload), `"type":"cancel_turn"`) || !strings.Contains(string(got[2].Payload), `"status":"sent"`) {
		t.Fatalf("third result %s: the replay was answered", got[2].Payload)
	}
	if len(s.methods("session/cancel")) == 0 {
		s.waitRecorded("session/cancel", 1)
	}
	for _, e := range w.all() {
		if e.Kind == observerframe.KindControlResult && strings.Contains(string(e.Payload), `"status":"sent"`) && e.Seq < got[2].Seq {
			t.Fatal("the stale frame cancelled the turn")
		}
	}
}

func TestObserverPermissionDecisionAnswersTheOwnersQuestion(t *testing.T) {
	t.Parallel()
	s, w := observedStackWith(t, harness.Config{Permissions: harness.PermissionsAsk}, "TESTAGENT_PERMISSION=1")
	m := s.mention(s.ownerSK, "deploy it")
	s.waitQuestion(m.ID)
	w.control(s.agentPK, observerframe.Command{Type: observerframe.PermissionDecision, ChannelID: s.channel, OptionID: "opt-c42", RequestNonce: "n1"}, time.Now())
	if got := s.permissionAnswer(); got != "opt-c42" {
		t.Fatalf("answered %q, want the owner's opt-c42", got)
	}
	res := w.waitKind(observerframe.KindControlResult, 1)[0]
	if p := string(res.Payload); !strings.Contains(p, `"status":"answered"`) || !strings.Contains(p, `"requestNonce":"n1"`) {
		t.Fatalf("control_result %s", p)
	}
	term := w.waitKind(observerframe.KindPermissionTerminal, 1)[0]
	if p := string(term.Payload); !strings.Contains(p, `"optionId":"opt-c42"`) {
		t.Fatalf("permission_terminal %s", p)
	}
}

func TestOwnerClientReceivesTheTurnsFramesAndGetsItsCancelsControlResult(t *testing.T) {
	t.Parallel()
	s, _ := observedStackWith(t, harness.Config{}, "TESTAGENT_HANG_ON=1")
	o, err := relayframes.NewOwner(relayframes.OwnerConfig{RelayURL: s.relay.URL, OwnerSecret: s.ownerSK, Agent: s.agentPK})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- o.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-ran; err != nil {
			t.Errorf("owner Run: %v", err)
		}
	})
	<-o.Ready()
	s.mention(s.ownerSK, "long job")
	var started relayframes.Frame
	deadline := time.After(30 * time.Second)
	for started.Kind != observerframe.KindTurnStarted {
		select {
		case started = <-o.Frames():
		case <-deadline:
			t.Fatal("no turn_started frame")
		}
	}
	if started.Agent != s.agentPK || started.ChannelID != s.channel || started.TurnID == "" || started.EventID == "" {
		t.Fatalf("turn_started %+v", started)
	}
	// Frames keep coming while Control waits: read them, as every Owner user must.
	go func() {
		for range o.Frames() {
		}
	}()
	cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer ccancel()
	res, err := o.Control(cctx, observerframe.Command{Type: observerframe.CancelTurn, ChannelID: s.channel})
	if err != nil {
		t.Fatal(err)
	}
	if p := string(res.Payload); res.Kind != observerframe.KindControlResult || !strings.Contains(p, `"status":"sent"`) {
		t.Fatalf("control answered %s %s", res.Kind, p)
	}
	s.waitRecorded("session/cancel", 1)
}
