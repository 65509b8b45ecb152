// Package observer is the harness's activity feed: an in-process bus the harness publishes what
// it does to (ACP lines, session decisions, prompts, turns), read by the --activity-log JSON-lines
// writer and the web console. Observing never changes behaviour: Publish never blocks, and a
// subscriber that falls behind loses events (and is told how many) instead of slowing the harness.
package observer

import (
	"context"
	"sync"
	"time"
)

// Event types the harness publishes. The Data shape of each is given beside it.
const (
	TypeACPLine               = "acp_line"                // ACPLine
	TypeSessionResolved       = "session_resolved"        // SessionResolved
	TypeSessionResumed        = "session_resumed"         // nil
	TypeSessionResumeFailed   = "session_resume_failed"   // SessionResumeFailed
	TypeSystemPrompt          = "system_prompt"           // SystemPrompt
	TypePromptContextDelivery = "prompt_context_delivery" // PromptContextDelivery
	TypePrompt                = "prompt"                  // Prompt
	TypeAgentMessage          = "agent_message"           // AgentMessage
	TypeToolCall              = "tool_call"               // the ACP tool_call / tool_call_update payload
	TypeTurnStarted           = "turn_started"            // nil
	TypeTurnEnded             = "turn_ended"              // TurnEnded
	TypeAgentSpawned          = "agent_spawned"           // AgentSpawned
	TypeAgentExited           = "agent_exited"            // AgentExited
	TypeLog                   = "log"                     // Log
	// TypeGap is sent only to a subscriber that fell behind, in place of the events it missed.
	TypeGap = "gap" // Gap
)

// Event is one entry of the feed.
type Event struct {
	Seq       uint64    `json:"seq"`
	Time      time.Time `json:"time"`
	Type      string    `json:"type"`
	ChannelID string    `json:"channelId,omitempty"`
	SessionID string    `json:"sessionId,omitempty"`
	TurnID    string    `json:"turnId,omitempty"`
	Data      any       `json:"data,omitempty"`
}

// Data payloads for the event types above.
type (
	ACPLine struct {
		Dir  string `json:"dir"` // "in" (agent → harness) or "out" (harness → agent)
		Line string `json:"line"`
	}
	SessionResolved struct {
		SessionID    string `json:"sessionId"`
		IsNewSession bool   `json:"isNewSession"`
	}
	SessionResumeFailed struct {
		Reason string `json:"reason"`
	}
	SystemPrompt struct {
		Route    string   `json:"route"`
		Text     string   `json:"text"`
		Sections []string `json:"sections"`
	}
	PromptContextDelivery struct {
		Route                   string `json:"route"`
		PromptBytes             int    `json:"promptBytes"`
		StandingContextIncluded bool   `json:"standingContextIncluded"`
		EventDeltaCount         int    `json:"eventDeltaCount"`
	}
	Prompt struct {
		Blocks any `json:"blocks"`
	}
	AgentMessage struct {
		Text string `json:"text"`
	}
	TurnEnded struct {
		StopReason string `json:"stopReason"`
		DurationMs int64  `json:"durationMs"`
		Usage      any    `json:"usage,omitempty"`
	}
	AgentSpawned struct {
		PID int `json:"pid"`
	}
	AgentExited struct {
		Reason string `json:"reason"`
	}
	Log struct {
		Level   string `json:"level"`
		Message string `json:"message"`
	}
	Gap struct {
		Missed  uint64 `json:"missed"`  // events this subscriber did not receive
		LastSeq uint64 `json:"lastSeq"` // Seq of the newest missed event
	}
)

// DefaultBuffer is the subscription buffer used when Subscribe is given buf ≤ 0.
const DefaultBuffer = 256

// Bus fans published events out to subscribers and keeps recent history for late ones.
// The zero value is not usable; call NewBus. A nil *Bus ignores Publish.
type Bus struct {
	mu      sync.Mutex
	seq     uint64
	history []Event // ring buffer of the last cap(history) events
	start   int     // index of the oldest event in history when full
	subs    map[*subscriber]struct{}
	now     func() time.Time
}

type subscriber struct {
	ch      chan Event
	missed  uint64
	lastSeq uint64
}

// NewBus returns a bus remembering the last history events (0: none).
func NewBus(history int) *Bus {
	return &Bus{history: make([]Event, 0, max(history, 0)), subs: map[*subscriber]struct{}{}, now: time.Now}
}

// Publish stamps e with the next Seq and the current Time (a Time already set is kept) and hands
// it to every subscriber that has room. It never blocks on a subscriber.
func (b *Bus) Publish(e Event) {
	if b == nil { // a nil bus is "no observer"; callers need not check
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seq++
	e.Seq = b.seq
	if e.Time.IsZero() {
		e.Time = b.now()
	}
	if c := cap(b.history); c > 0 {
		if len(b.history) < c {
			b.history = append(b.history, e)
		} else {
			b.history[b.start] = e
			b.start = (b.start + 1) % c
		}
	}
	for s := range b.subs {
		s.deliver(e)
	}
}

// deliver sends e without blocking. A subscriber that missed events first gets a gap marker;
// while even that does not fit, the misses accumulate.
func (s *subscriber) deliver(e Event) {
	if s.missed > 0 {
		gap := Event{Seq: s.lastSeq, Time: e.Time, Type: TypeGap, Data: Gap{Missed: s.missed, LastSeq: s.lastSeq}}
		select {
		case s.ch <- gap:
			s.missed = 0
		default:
			s.missed++
			s.lastSeq = e.Seq
			return
		}
	}
	select {
	case s.ch <- e:
	default:
		s.missed++
		s.lastSeq = e.Seq
	}
}

// Subscribe returns a channel of events published from now on and a snapshot of the history
// before them (no event is in both, none falls between). The channel is closed after ctx ends;
// events already buffered can still be read. buf ≤ 0 means DefaultBuffer.
func (b *Bus) Subscribe(ctx context.Context, buf int) (<-chan Event, []Event) {
	if buf <= 0 {
		buf = DefaultBuffer
	}
	s := &subscriber{ch: make(chan Event, buf)}
	b.mu.Lock()
	snap := b.snapshotLocked()
	b.subs[s] = struct{}{}
	b.mu.Unlock()
	context.AfterFunc(ctx, func() {
		b.mu.Lock()
		delete(b.subs, s)
		close(s.ch) // under the lock, so Publish never sends on a closed channel
		b.mu.Unlock()
	})
	return s.ch, snap
}

// History returns the remembered events, oldest first.
func (b *Bus) History() []Event {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.snapshotLocked()
}

func (b *Bus) snapshotLocked() []Event {
	out := make([]Event, 0, len(b.history))
	out = append(out, b.history[b.start:]...)
	return append(out, b.history[:b.start]...)
}

// Subscribers is the number of live subscriptions.
func (b *Bus) Subscribers() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.subs)
}
