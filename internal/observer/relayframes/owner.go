package relayframes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/client"
	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/protocol/observerframe"
)

// The owner's side of NIP-AO: a WebSocket session as the owner that receives its agents'
// telemetry frames, decrypted, and sends an agent control frames, pairing each with the
// control_result that answers it. `buzz observe` and the console's remote mode read frames
// through it; the console's Stop and model controls send through it.

// OwnerConfig configures an Owner.
type OwnerConfig struct {
	RelayURL    string
	OwnerSecret string // hex
	// Agent (hex) narrows the frames to one agent's and is where Control sends; "" takes every
	// agent's frames and cannot send.
	Agent  string
	Logger *slog.Logger
	// OnSkip, if set, hears of each frame addressed to the owner that did not open (bad
	// signature, not decryptable, not JSON); such frames are dropped.
	OnSkip func(eventID string, err error)
}

// Frame is one telemetry frame as the owner reads it: the agent that sent it, the event that
// carried it, and its decrypted payload.
type Frame struct {
	Agent   string `json:"agent"`
	EventID string `json:"eventId"`
	observerframe.Event
}

// ClosedError is the relay ending the frame subscription (a CLOSED), which it does not retry.
type ClosedError struct{ Reason string }

func (e *ClosedError) Error() string { return "relay closed the subscription: " + e.Reason }

// ErrNoResult is Control's error when no control_result came back in time.
var ErrNoResult = errors.New("no control_result from the agent in time")

const ownerSubID = "observer-frames"

// Owner is a running owner session; make one with NewOwner, then call Run.
type Owner struct {
	cfg    OwnerConfig
	sk, pk string
	live   *client.Live
	frames chan Frame
	ready  chan struct{} // closed at the subscription's first EOSE

	mu      sync.Mutex
	waiting map[string]chan Frame // control event id → its result's waiter
}

// NewOwner checks the keys and prepares the session.
func NewOwner(cfg OwnerConfig) (*Owner, error) {
	sk, err := protocol.ParseSecretKey(cfg.OwnerSecret)
	if err != nil {
		return nil, fmt.Errorf("owner key: %w", err)
	}
	pk, _ := protocol.PublicKey(sk)
	if cfg.Agent != "" && !protocol.IsHex64(cfg.Agent) {
		return nil, fmt.Errorf("agent %q: want a 64-hex pubkey", cfg.Agent)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	o := &Owner{cfg: cfg, sk: sk, pk: pk, frames: make(chan Frame, 256), ready: make(chan struct{}),
		waiting: map[string]chan Frame{}}
	o.live = client.NewLive(client.LiveConfig{RelayURL: cfg.RelayURL, SecretKey: sk, Logger: cfg.Logger})
	return o, nil
}

// Frames delivers every frame, in the order received. Whoever runs the Owner must read it:
// Run waits for room, and control results are matched on the same goroutine.
func (o *Owner) Frames() <-chan Frame { return o.frames }

// Ready is closed once the relay has taken the frame subscription (its first EOSE): frames
// sent from then on reach this owner.
func (o *Owner) Ready() <-chan struct{} { return o.ready }

// Run holds the session until ctx ends (nil) or the relay refuses it for good: a
// *ClosedError, or the connection's error. Frames is closed when it returns.
func (o *Owner) Run(ctx context.Context) error {
	defer close(o.frames)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- o.live.Run(ctx) }()
	f := nostr.Filter{Kinds: []int{protocol.KindObserverFrame}, Tags: nostr.TagMap{"p": {o.pk}}}
	if o.cfg.Agent != "" {
		f.Authors = []string{o.cfg.Agent}
	}
	o.live.Subscribe(ownerSubID, f)
	fail := func(err error) error {
		cancel()
		<-ran
		return err
	}
	for {
		select {
		case <-ctx.Done():
			<-ran
			return nil
		case err := <-ran:
			if ctx.Err() != nil {
				return nil
			}
			return err
		case in, ok := <-o.live.Events():
			if !ok {
				return fail(nil)
			}
			if in.SubID != ownerSubID {
				continue
			}
			if in.Closed != "" {
				return fail(&ClosedError{Reason: in.Closed})
			}
			if in.EOSE {
				select {
				case <-o.ready:
				default:
					close(o.ready)
				}
			}
			if in.Event == nil {
				continue
			}
			e, err := observerframe.OpenTelemetry(o.sk, in.Event)
			if err != nil {
				if o.cfg.OnSkip != nil {
					o.cfg.OnSkip(in.Event.ID, err)
				}
				continue
			}
			fr := Frame{Agent: in.Event.PubKey, EventID: in.Event.ID, Event: e}
			if e.Kind == observerframe.KindControlResult {
				o.answer(fr)
			}
			select {
			case o.frames <- fr:
			case <-ctx.Done():
				<-ran
				return nil
			}
		}
	}
}

// answer hands a control_result to the Control call waiting for it, if any.
func (o *Owner) answer(fr Frame) {
	var p struct {
		FrameID string `json:"frameId"`
	}
	if json.Unmarshal(fr.Payload, &p) != nil || p.FrameID == "" {
		return
	}
	o.mu.Lock()
	w := o.waiting[p.FrameID]
	delete(o.waiting, p.FrameID)
	o.mu.Unlock()
	if w != nil {
		w <- fr // buffered, one result per waiter
	}
}

// Control sends c to the agent and returns the control_result answering it (its payload
// carries the control event's id as frameId). It waits for the subscription first, so the
// answer cannot slip past; ctx bounds the whole exchange, and without an answer by then the
// error is ErrNoResult.
func (o *Owner) Control(ctx context.Context, c observerframe.Command) (Frame, error) {
	if o.cfg.Agent == "" {
		return Frame{}, errors.New("no agent to send control frames to")
	}
	select {
	case <-o.ready:
	case <-ctx.Done():
		return Frame{}, fmt.Errorf("frame subscription not ready: %w", ErrNoResult)
	}
	ev, err := observerframe.BuildControl(o.sk, o.cfg.Agent, c, time.Now(), nil)
	if err != nil {
		return Frame{}, err
	}
	w := make(chan Frame, 1)
	o.mu.Lock()
	o.waiting[ev.ID] = w
	o.mu.Unlock()
	defer func() {
		o.mu.Lock()
		delete(o.waiting, ev.ID)
		o.mu.Unlock()
	}()
	if err := o.live.Publish(ctx, &ev); err != nil {
		if ctx.Err() != nil {
			return Frame{}, ErrNoResult
		}
		return Frame{}, fmt.Errorf("control frame not published: %w", err)
	}
	select {
	case fr := <-w:
		return fr, nil
	case <-ctx.Done():
		return Frame{}, ErrNoResult
	}
}
