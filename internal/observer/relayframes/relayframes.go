// Package relayframes sends the harness's activity to the agent's owner as NIP-AO telemetry
// frames (kind 24200, observerframe): it is one more subscriber of the in-process feed
// (observer.Bus), so frames are built, encrypted, signed and published on its own goroutines,
// never on the harness loop. A subscriber that falls behind loses events (the bus's rule), and a
// frame the relay refuses is logged and dropped: observing never slows or stops the harness.
//
// What it sends: harness_started once; agent_initialized, session_resolved, turn_started,
// turn_completed / turn_error from the feed's events; every ACP line as acp_read / acp_write
// (secrets redacted as in the console, history an agent replays during session/load left out,
// consecutive message chunks coalesced); permission_terminal when the harness answers a
// session/request_permission; turn_liveness every Liveness while a turn runs; control_result
// when the harness answers the owner's control frame (Result).
package relayframes

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/client"
	"github.com/buzz-harness/buzz/internal/clock"
	"github.com/buzz-harness/buzz/internal/observer"
	"github.com/buzz-harness/buzz/internal/protocol/observerframe"
)

// Publisher sends one event over the relay WebSocket and waits for its OK (client.Live).
type Publisher interface {
	Publish(ctx context.Context, ev *nostr.Event) error
}

// Config is what the frames need.
type Config struct {
	AgentSecret string
	Owner       string    // the owner's pubkey: the only recipient
	AuthTag     nostr.Tag // the agent's NIP-OA tag, from which the relay learns the owner (nil: none)
	Clock       clock.Clock
	Liveness    time.Duration // turn_liveness period; 0 = none
	Log         *slog.Logger
}

// Coalescing bounds (upstream's): chunks are flushed every coalesceEvery, at the next other
// event, or before their text reaches coalesceMax bytes.
const (
	coalesceEvery = 500 * time.Millisecond
	coalesceMax   = 60_000
)

// queueLen bounds the frames waiting to be sent; past it they are dropped.
const (
	queueLen       = 1024
	busBuffer      = 4096
	publishTimeout = 10 * time.Second
)

// Sender is a running frame sender.
type Sender struct {
	cfg     Config
	results chan frame
	out     chan observerframe.Event
	wg      sync.WaitGroup

	mu      sync.Mutex
	dropped int
}

// frame is one telemetry frame before its seq and timestamp.
type frame struct {
	kind    string
	scope   observer.Scope
	agent   int
	payload any
}

// Start subscribes to bus and sends frames until ctx ends; Wait waits for its goroutines.
func Start(ctx context.Context, cfg Config, bus *observer.Bus, pub Publisher) *Sender {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	s := &Sender{cfg: cfg, results: make(chan frame, 64), out: make(chan observerframe.Event, queueLen)}
	events, _ := bus.Subscribe(ctx, busBuffer)
	s.wg.Add(2)
	go func() { defer s.wg.Done(); s.translate(ctx, events) }()
	go func() { defer s.wg.Done(); s.send(ctx, pub) }()
	return s
}

// Wait returns once the sender's goroutines have.
func (s *Sender) Wait() { s.wg.Wait() }

// Dropped is how many frames were dropped: the send queue was full, sending was paused after a
// restricted: refusal, or the frame was over the relay's rate (budget).
func (s *Sender) Dropped() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dropped
}

// Result sends a control_result frame for the owner's control frame; it never blocks (a full
// queue drops it).
func (s *Sender) Result(channelID string, payload any) {
	select {
	case s.results <- frame{kind: observerframe.KindControlResult, scope: observer.Scope{ChannelID: channelID}, payload: payload}:
	default:
		s.drop()
	}
}

func (s *Sender) drop() {
	s.mu.Lock()
	s.dropped++
	s.mu.Unlock()
}

// translate turns feed events into frames, in order, on one goroutine: its state (running
// turns, sessions being loaded, pending chunks) needs no lock.
func (s *Sender) translate(ctx context.Context, events <-chan observer.Event) {
	defer close(s.out)
	t := newTranslator(s.cfg.Clock.Now)
	var seq uint64
	emit := func(fs []frame) {
		for _, f := range fs {
			seq++
			e := observerframe.Event{Seq: seq, Timestamp: observerframe.Timestamp(s.cfg.Clock.Now()), Kind: f.kind,
				AgentIndex: f.agent, ChannelID: f.scope.ChannelID, SessionID: f.scope.SessionID, TurnID: f.scope.TurnID}
			e.Payload = payloadJSON(f.payload)
			select {
			case s.out <- trim(e):
			default:
				s.drop()
			}
		}
	}
	emit([]frame{{kind: observerframe.KindHarnessStarted, payload: map[string]any{"livenessSecs": int(s.cfg.Liveness / time.Second)}}})
	var liveness <-chan time.Time
	if s.cfg.Liveness > 0 {
		tk := s.cfg.Clock.NewTicker(s.cfg.Liveness)
		defer tk.Stop()
		liveness = tk.C()
	}
	var flush clock.Timer
	for {
		var flushC <-chan time.Time
		if flush != nil {
			flushC = flush.C()
		}
		select {
		case <-ctx.Done():
			return
		case e, ok := <-events:
			if !ok {
				return
			}
			emit(t.event(e))
		case f := <-s.results:
			emit(append(t.flush(), f))
		case <-liveness:
			emit(t.liveness())
		case <-flushC:
			flush = nil
			emit(t.flush())
		}
		if t.pending != nil && flush == nil {
			flush = s.cfg.Clock.NewTimer(coalesceEvery)
		}
		if t.pending == nil && flush != nil {
			flush.Stop()
			flush = nil
		}
	}
}

// restrictedPause is how long frames are dropped after the relay refused one as restricted.
const restrictedPause = 30 * time.Second

// send encrypts, signs and publishes frames one at a time, so the owner receives them in order,
// within the relay's rate (budget).
// The first refusal is a warning (a relay that cannot tell the owner refuses them all: see
// --relay-observer in the README), later ones are debug lines. A restricted: refusal (the relay
// does not know the agent's owner, or not as this one) refuses every frame alike, so sending
// pauses for restrictedPause, dropping frames, instead of signing and refusing each ACP line.
func (s *Sender) send(ctx context.Context, pub Publisher) {
	warned := false
	var pausedUntil time.Time
	var rate budget
	for e := range s.out {
		if now := s.cfg.Clock.Now(); now.Before(pausedUntil) || !rate.allow(e.Kind, now) {
			s.drop()
			continue
		}
		// Encrypting and signing a frame is ~0.1 ms of CPU, and buzz-acp runs on one P by default:
		// let whatever is ready (the loop, a turn starting) run first, so a burst of frames after
		// a turn does not hold up the next mention.
		runtime.Gosched()
		ev, err := observerframe.BuildTelemetry(s.cfg.AgentSecret, s.cfg.Owner, s.cfg.AuthTag, e, s.cfg.Clock.Now(), nil)
		if err != nil {
			s.cfg.Log.Warn("observer frame not built", "kind", e.Kind, "err", err)
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, publishTimeout)
		err = pub.Publish(pctx, &ev)
		cancel()
		var rej *client.RejectedError
		switch {
		case err == nil || ctx.Err() != nil:
		case errors.As(err, &rej):
			if strings.HasPrefix(rej.Message, "restricted:") {
				pausedUntil = s.cfg.Clock.Now().Add(restrictedPause)
			}
			if !warned {
				warned = true
				s.cfg.Log.Warn("the relay refused an observer frame; the owner may see none", "kind", e.Kind, "reason", rej.Message)
			} else {
				s.cfg.Log.Debug("observer frame refused", "kind", e.Kind, "reason", rej.Message)
			}
		default:
			s.cfg.Log.Debug("observer frame not published", "kind", e.Kind, "err", err)
		}
	}
}

func payloadJSON(p any) json.RawMessage {
	if raw, ok := p.(json.RawMessage); ok {
		return raw
	}
	b, err := json.Marshal(p)
	if err != nil {
		return json.RawMessage(`null`)
	}
	return b
}
