package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/acp"
	"github.com/buzz-harness/buzz/internal/prompt"
)

// A new event for a conversation whose turn is running (--multiple-event-handling):
//
//   - queue: it waits for the next turn.
//   - steer: it is handed to the running turn through the agent's native steering method when
//     there is one; otherwise the turn is cancelled and the same session is prompted with the
//     turn's events and the new ones together, framed so the agent carries on and folds it in.
//   - interrupt: cancel and re-prompt, framed so the new request supersedes the old.
//   - owner-interrupt: interrupt for the owner, steer for everyone else the gate admits.
//
// Nothing is lost or answered twice: a carried batch is journalled in flight again, as one, when
// its merged turn starts, and a steered event is journalled in flight with the turn it joined.

// EventHandling is --multiple-event-handling.
type EventHandling string

const (
	HandleQueue          EventHandling = "queue"
	HandleSteer          EventHandling = "steer"
	HandleInterrupt      EventHandling = "interrupt"
	HandleOwnerInterrupt EventHandling = "owner-interrupt"
)

// Dedup is --dedup.
type Dedup string

const (
	DedupQueue Dedup = "queue"
	DedupDrop  Dedup = "drop"
)

func (c *Config) validateEventHandling() error {
	switch c.MultipleEventHandling {
	case "":
		c.MultipleEventHandling = HandleSteer
	case HandleQueue, HandleSteer, HandleInterrupt, HandleOwnerInterrupt:
	default:
		return fmt.Errorf("--multiple-event-handling must be queue, steer, interrupt or owner-interrupt, got %q", c.MultipleEventHandling)
	}
	switch c.Dedup {
	case "":
		c.Dedup = DedupQueue
	case DedupQueue, DedupDrop:
	default:
		return fmt.Errorf("--dedup must be queue or drop, got %q", c.Dedup)
	}
	if c.Dedup == DedupDrop && c.MultipleEventHandling != HandleQueue {
		return fmt.Errorf("--dedup drop needs --multiple-event-handling queue (got %s): a dropped event cannot steer", c.MultipleEventHandling)
	}
	return nil
}

// errMerge is the cause of a turn cancelled so that newer events can join it.
var errMerge = errors.New("cancelled to merge a new message")

// Native steering methods (see docs/steer.md for what is and is not verified upstream).
const (
	methodSteering   = "_session/steering"
	methodGooseSteer = "_goose/unstable/session/steer"
)

// steerTimeout bounds one native steer call; an agent that does not answer is treated as not
// supporting it (the event goes back to the queue and the turn is cancelled and merged).
const steerTimeout = 30 * time.Second

// steerResult is a native steer call's answer, for the loop.
type steerResult struct {
	conv convKey
	turn *turn
	item queued
	err  error
	ok   bool // the agent took the message into the running turn
}

// runIDs tracks goose's active run id per session (session_info_update _meta.goose.activeRunId):
// its steer method names the run it means, so a steer never lands in a later run.
type runIDs struct {
	mu  sync.Mutex
	ids map[string]string
}

func (r *runIDs) observe(u acp.SessionUpdate) {
	if u.Kind != "session_info_update" {
		return
	}
	var p struct {
		Update struct {
			Meta struct {
				Goose struct {
					ActiveRunID *string `json:"activeRunId"`
				} `json:"goose"`
			} `json:"_meta"`
		} `json:"update"`
	}
	if json.Unmarshal(u.Raw, &p) != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ids == nil {
		r.ids = map[string]string{}
	}
	if id := p.Update.Meta.Goose.ActiveRunID; id != nil && *id != "" {
		r.ids[u.SessionID] = *id
	} else {
		delete(r.ids, u.SessionID) // null (or empty) clears it: no run is active
	}
}

func (r *runIDs) get(sessionID string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ids[sessionID]
}

// advertisesSteering reports initialize's _meta.steering.supported.
func advertisesSteering(init *acp.InitializeResult) bool {
	var s struct {
		Supported bool `json:"supported"`
	}
	return init != nil && json.Unmarshal(init.Meta["steering"], &s) == nil && s.Supported
}

// dropWhileBusy applies --dedup drop: an event for a conversation whose turn runs is finished
// unanswered. It reports whether the event was dropped.
func (h *Harness) dropWhileBusy(k convKey, ev *nostr.Event) bool {
	if c := h.convs.get(k); h.cfg.Dedup != DedupDrop || c == nil || c.turn == nil {
		return false
	}
	h.done(ev.ID)
	h.log.Info("dropped: its conversation's turn is running (--dedup drop)", "channel", k.Channel, "conversation", k.String(), "event", ev.ID)
	return true
}

// midTurn applies --multiple-event-handling to an event just queued for conversation k.
func (h *Harness) midTurn(ctx context.Context, k convKey, ev *nostr.Event) {
	c := h.convs.get(k)
	if c == nil || c.turn == nil {
		return
	}
	t := c.turn
	reason := prompt.ReasonSteer
	switch h.cfg.MultipleEventHandling {
	case HandleQueue:
		return
	case HandleInterrupt:
		reason = prompt.ReasonInterrupt
	case HandleOwnerInterrupt:
		if h.cfg.Owner != "" && ev.PubKey == h.cfg.Owner {
			reason = prompt.ReasonInterrupt
		}
	}
	if reason == prompt.ReasonSteer && t.merge == nil && h.steerNatively(ctx, k, t, ev) {
		return
	}
	h.cancelToMerge(k, t, reason)
}

// cancelToMerge stops the running turn so its events and the new ones go out as one prompt on
// the same session. The event that asked stays queued: it joins the carried batch.
func (h *Harness) cancelToMerge(k convKey, t *turn, reason prompt.MergeReason) {
	if t.merge == nil || reason == prompt.ReasonInterrupt {
		t.merge = &reason
	}
	h.log.Info("new message during a turn: cancelling it to merge", "channel", k.Channel, "conversation", k.String(), "interrupt", reason == prompt.ReasonInterrupt)
	t.cancel(errMerge)
}

// steerNatively hands ev to the running turn when its agent has a steering method and the turn's
// prompt is out. The event leaves the queue; it is journalled in flight with the turn's batch
// only once the agent took it (finishSteer), so a crash during the call replays it on its own
// (at worst answered twice, never lost). It reports whether a steer call was started.
func (h *Harness) steerNatively(ctx context.Context, k convKey, t *turn, ev *nostr.Event) bool {
	sid := t.session.Load()
	if sid == nil {
		return false
	}
	method, params := "", map[string]any{"sessionId": *sid}
	if run := h.runIDs.get(*sid); run != "" {
		method, params["expectedRunId"] = methodGooseSteer, run
	} else if t.steerable {
		method = methodSteering
	} else {
		return false
	}
	it, ok := h.convs.Take(k, ev.ID)
	if !ok {
		return false
	}
	params["prompt"] = []acp.ContentBlock{acp.TextBlock(prompt.SteerText(*ev, it.Tag))}
	proc := t.proc
	h.log.Info("steering the running turn", "channel", k.Channel, "conversation", k.String(), "event", ev.ID, "method", method)
	h.tasks.Go(func() {
		cctx, cancel := context.WithTimeout(ctx, steerTimeout)
		defer cancel()
		var res struct {
			Outcome string `json:"outcome"`
		}
		err := proc.Call(cctx, method, params, &res)
		r := steerResult{conv: k, turn: t, item: it, err: err}
		// _session/steering names its outcome; goose's method answers an empty success.
		r.ok = err == nil && (method == methodGooseSteer || res.Outcome == "injected" || res.Outcome == "startedNewTurn")
		if err == nil && !r.ok {
			r.err = fmt.Errorf("steer outcome %q", res.Outcome)
		}
		select {
		case h.inbox.steers <- r:
		case <-ctx.Done():
		}
	})
	return true
}

// finishSteer acts on a native steer's answer. Taken by a turn still running: the event is
// journalled in flight with the turn's batch and shares its fate. Otherwise it goes back to the
// queue's front, to be answered by the next turn (the turn ended first, so its answer cannot be
// assumed to cover it). Not supported (method missing, transport failure, an outcome we do not
// know) also cancels the turn to merge; any other agent error does not.
func (h *Harness) finishSteer(r steerResult) {
	t, k := r.turn, r.conv
	c := h.convs.get(k)
	live := c != nil && c.turn == t
	if r.ok && live {
		if err := h.jrnl.InFlight(t.startedAt, t.ownSecond, r.item.Event.ID); err != nil {
			h.log.Warn("journal", "err", err)
		}
		t.steered = append(t.steered, r.item)
		h.log.Info("steered into the running turn", "channel", k.Channel, "conversation", k.String(), "event", r.item.Event.ID)
		return
	}
	if r.err == nil {
		r.err = errors.New("the turn ended before the steer was answered")
	}
	h.log.Info("native steer not taken; the event goes back to the queue", "channel", k.Channel, "conversation", k.String(), "event", r.item.Event.ID, "err", r.err)
	h.convs.PushFrontItem(k, r.item)
	// A transport failure, an outcome we do not know, or no such method: not supported.
	var rpc *acp.RPCError
	unsupported := !errors.As(r.err, &rpc) || rpc.Code == acp.CodeMethodNotFound
	if live && unsupported {
		h.cancelToMerge(k, t, prompt.ReasonSteer)
	}
	h.inbox.poke()
}

// absorbSteered folds the events a turn took natively into its batch (the turn goroutine is done
// with it): whatever the turn's outcome does to its batch, it does to them.
func absorbSteered(r *turnResult, t *turn) {
	if t == nil || len(t.steered) == 0 {
		return
	}
	b := *r.in.batch
	b.Items = append(append([]queued(nil), b.Items...), t.steered...)
	r.in.batch = &b
	for _, it := range t.steered {
		r.delivered = append(r.delivered, it.Event.ID)
	}
}

// carryTurn ends a turn cancelled to merge: unless it finished on its own first or its reply
// had already landed (then its answer stands and the new events go next as usual), its events
// lead the conversation's next batch on the same session.
func (h *Harness) carryTurn(r turnResult, t *turn) {
	if r.err == nil && (r.stop != "cancelled" || r.answered) {
		h.finishBatch(r)
		h.commitTurn(r)
		return
	}
	if isTransport(r.err) && !errors.Is(r.err, context.Canceled) {
		h.crashed(r.in.slot) // it did not answer the cancel: respawn; the batch still carries
	}
	reason := prompt.ReasonSteer
	if t != nil && t.merge != nil {
		reason = *t.merge
	}
	h.convs.Carry(r.in.batch, reason)
	h.log.Info("turn cancelled; its events join the new ones", "channel", r.in.conv.Channel, "conversation", r.in.conv.String(), "carried", len(r.in.batch.Items))
}
