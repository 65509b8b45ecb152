// Package observer is the harness's activity feed: an in-process bus the harness publishes what
// it does to (ACP lines, session decisions, prompts, turns), read by the --activity-log JSON-lines
// writer and the web console. Observing never changes behaviour: Publish never blocks, and a
// subscriber that falls behind loses events (and is told how many) instead of slowing the harness.
package observer

import (
	"context"
	"encoding/json"
	"sync"
	"time"
)

// Type names an activity event. The console's app.js handles every one of these names and no
// other (TestAppHandlesExactlyTheObserverTypes in internal/console keeps the two in step).
type Type string

// Event types. Each is published only with its payload struct below: Publish takes the payload
// and asks it for its type, so no event can carry a payload of another type.
const (
	TypeACPLine               Type = "acp_line"                // ACPLine
	TypeEventReceived         Type = "event_received"          // EventReceived
	TypeAgentSpawned          Type = "agent_spawned"           // AgentSpawned
	TypeAgentExited           Type = "agent_exited"            // AgentExited
	TypeTurnStarted           Type = "turn_started"            // TurnStarted
	TypeSessionResolved       Type = "session_resolved"        // SessionResolved
	TypeSessionResumed        Type = "session_resumed"         // SessionResumed
	TypeSessionResumeFailed   Type = "session_resume_failed"   // SessionResumeFailed
	TypeSystemPrompt          Type = "system_prompt"           // SystemPrompt
	TypePromptContextDelivery Type = "prompt_context_delivery" // PromptContextDelivery
	TypePrompt                Type = "prompt"                  // Prompt
	TypeAgentUpdate           Type = "agent_update"            // AgentUpdate (live)
	TypeHistory               Type = "history"                 // AgentUpdate with Replay set
	TypeTurnEnded             Type = "turn_ended"              // TurnEnded
	TypeDeadLetter            Type = "dead_letter"             // DeadLetter
	TypeHeartbeatSkipped      Type = "heartbeat_skipped"       // HeartbeatSkipped
	TypeSilentTurn            Type = "silent_turn"             // SilentTurn
	TypeFallbackPublished     Type = "fallback_published"      // FallbackPublished
	// TypeGap is sent only to a subscriber that fell behind, in place of the events it missed.
	TypeGap Type = "gap" // Gap
)

// Payload is the data of one event type.
type Payload interface{ Type() Type }

// Scope places an event: the channel, session and turn it belongs to. The zero Scope is
// harness-wide (agent processes, raw ACP lines).
type Scope struct {
	ChannelID string `json:"channelId,omitempty"`
	// ThreadID is the root event of the thread a turn belongs to (thread sessions); empty for a
	// conversation spanning the whole channel.
	ThreadID  string `json:"threadId,omitempty"`
	SessionID string `json:"sessionId,omitempty"`
	TurnID    string `json:"turnId,omitempty"`
}

// Event is one entry of the feed. Readers of its JSON form decode Data by Type with their own
// structs (an interface field cannot be decoded into).
type Event struct {
	Seq  uint64    `json:"seq"`
	Time time.Time `json:"time"`
	Type Type      `json:"type"`
	Scope
	Data Payload `json:"data,omitempty"`
}

// Payloads, one per event type, with exactly the fields the harness fills.
type (
	// ACPLine is one raw JSON-RPC line, secrets redacted and long lines clipped.
	ACPLine struct {
		Dir   string `json:"dir"`   // "send" (harness → agent) or "recv" (agent → harness)
		Bytes int    `json:"bytes"` // length of the original line
		Line  string `json:"line"`
	}
	// EventReceived: a channel event came off the relay socket (for latency figures).
	EventReceived struct {
		EventID    string    `json:"eventId"`
		ReceivedAt time.Time `json:"receivedAt"`
	}
	AgentSpawned struct {
		Slot         int    `json:"slot"`
		PID          int    `json:"pid"`
		AgentName    string `json:"agentName"`
		AgentVersion string `json:"agentVersion"`
		Route        string `json:"route"`
	}
	AgentExited struct {
		Slot   int    `json:"slot"`
		Reason string `json:"reason,omitempty"` // set when the agent failed to start
	}
	TurnStarted struct {
		Events  []string `json:"events"`
		Attempt int      `json:"attempt"`
	}
	SessionResolved struct {
		SessionID    string `json:"sessionId"`
		IsNewSession bool   `json:"isNewSession"`
	}
	SessionResumed struct {
		SessionID string `json:"sessionId"`
		Method    string `json:"method"` // the ACP method: "session/resume" or "session/load"
	}
	SessionResumeFailed struct {
		SessionID string `json:"sessionId"`
		Reason    string `json:"reason"`
		Retry     bool   `json:"retry,omitempty"` // the agent is respawned and resume tried once more
	}
	SystemPrompt struct {
		Route    string          `json:"route"`
		Text     string          `json:"text"`
		Sections []PromptSection `json:"sections"`
	}
	// PromptContextDelivery describes the prompt about to be sent.
	PromptContextDelivery struct {
		Route                   string `json:"route"`
		PromptBytes             int    `json:"promptBytes"`
		StandingContextIncluded bool   `json:"standingContextIncluded"`
		EventDeltaCount         int    `json:"eventDeltaCount"`
		// ContextIncomplete says why the agent may lack conversation context it would need
		// (truncated thread, missing root, fetch failed); "" when nothing is missing.
		ContextIncomplete string `json:"contextIncomplete,omitempty"`
	}
	Prompt struct {
		SessionID string   `json:"sessionId"`
		Blocks    []string `json:"blocks"`
		Heartbeat bool     `json:"heartbeat,omitempty"`
	}
	// AgentUpdate is one session/update notification; Replay marks history an agent replays
	// on session/load, which is published as TypeHistory.
	AgentUpdate struct {
		Kind       string `json:"kind"`
		Replay     bool   `json:"replay"`
		Text       string `json:"text,omitempty"`
		ToolCallID string `json:"toolCallId,omitempty"`
		Title      string `json:"title,omitempty"`
		Status     string `json:"status,omitempty"`
	}
	// TurnEnded carries StopReason and Usage when the prompt returned, Error when it failed.
	TurnEnded struct {
		StopReason string          `json:"stopReason,omitempty"`
		Error      string          `json:"error,omitempty"`
		DurationMs int64           `json:"durationMs"`
		Usage      json.RawMessage `json:"usage,omitempty"`
	}
	DeadLetter struct {
		Events []string `json:"events"`
		Reason string   `json:"reason"`
	}
	// HeartbeatSkipped: a heartbeat tick found nothing new for the agent since Since, so no
	// prompt was sent (--heartbeat-always sends one anyway).
	HeartbeatSkipped struct {
		Since   time.Time `json:"since"`
		Checked int       `json:"checked"` // events since then, all already seen by the agent
	}
	// SilentTurn: a turn asked by a person ended and no answer from the agent reached them.
	// Action is what the harness did about it: "fallback" (posted the agent's final text) or
	// "notice" (posted a failure notice saying Reason).
	SilentTurn struct {
		Events []string `json:"events"`
		Reason string   `json:"reason"`
		Action string   `json:"action"`
	}
	// FallbackPublished: the harness posted the agent's final text as its reply.
	FallbackPublished struct {
		EventID string `json:"eventId"` // the reply's id
		Bytes   int    `json:"bytes"`
	}
	Gap struct {
		Missed  uint64 `json:"missed"`  // events this subscriber did not receive
		LastSeq uint64 `json:"lastSeq"` // Seq of the newest missed event
	}
)

// PromptSection is one labelled standing-context section of a SystemPrompt.
type PromptSection struct {
	Label string `json:"label"`
	Body  string `json:"body"`
}

func (ACPLine) Type() Type               { return TypeACPLine }
func (EventReceived) Type() Type         { return TypeEventReceived }
func (AgentSpawned) Type() Type          { return TypeAgentSpawned }
func (AgentExited) Type() Type           { return TypeAgentExited }
func (TurnStarted) Type() Type           { return TypeTurnStarted }
func (SessionResolved) Type() Type       { return TypeSessionResolved }
func (SessionResumed) Type() Type        { return TypeSessionResumed }
func (SessionResumeFailed) Type() Type   { return TypeSessionResumeFailed }
func (SystemPrompt) Type() Type          { return TypeSystemPrompt }
func (PromptContextDelivery) Type() Type { return TypePromptContextDelivery }
func (Prompt) Type() Type                { return TypePrompt }
func (TurnEnded) Type() Type             { return TypeTurnEnded }
func (DeadLetter) Type() Type            { return TypeDeadLetter }
func (HeartbeatSkipped) Type() Type      { return TypeHeartbeatSkipped }
func (SilentTurn) Type() Type            { return TypeSilentTurn }
func (FallbackPublished) Type() Type     { return TypeFallbackPublished }
func (Gap) Type() Type                   { return TypeGap }

func (u AgentUpdate) Type() Type {
	if u.Replay {
		return TypeHistory
	}
	return TypeAgentUpdate
}

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

// Publish records p as the next event of scope, stamped with the next Seq and the current time,
// and hands it to every subscriber that has room. It never blocks on a subscriber.
func (b *Bus) Publish(scope Scope, p Payload) {
	if b == nil { // a nil bus is "no observer"; callers need not check
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seq++
	e := Event{Seq: b.seq, Time: b.now(), Type: p.Type(), Scope: scope, Data: p}
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
