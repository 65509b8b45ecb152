// Package turnmetric implements NIP-AM agent turn metrics: one kind-44200 event per finished turn,
// signed by the agent, tagged only with its owner (p) and itself (agent), its usage numbers NIP-44
// encrypted to the owner so the relay learns nothing but the turn rate. Build is the agent side,
// Decode the owner side, Delta the per-turn arithmetic. Pure functions, no I/O.
package turnmetric

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
)

// Stop reasons NIP-AM allows; a reader maps anything else to StopUnknown.
const (
	StopEndTurn   = "end_turn"
	StopMaxTokens = "max_tokens"
	StopCancelled = "cancelled"
	StopError     = "error"
	StopUnknown   = "unknown"
)

// The outcomes of a turn that ended but whose answer never reached the person who asked (a
// harness's reply safety net): the harness posted the agent's text for it, or only a notice.
// Readers that predate them read "unknown".
const (
	OutcomeFallback = "fallback"
	OutcomeSilent   = "silent"
)

// Outcomes and terminal evidence (newer optional fields); unknown values read as "unknown".
var (
	outcomes  = []string{"success", "cancelled", "failed", OutcomeFallback, OutcomeSilent, "unknown"}
	evidences = []string{"prompt_response", "cancel_response", "agent_exit", "timeout", "error", "unknown"}
	stops     = []string{StopEndTurn, StopMaxTokens, StopCancelled, StopError, StopUnknown}
)

// ErrNoUsage: the turn reported no counter at all, and NIP-AM says not to publish such a metric.
var ErrNoUsage = errors.New("turn metric: no usage was observed")

// Counts is one usage window (the turn, or the session so far). A nil field means "not
// reported", which is never the same as zero and must never be summed as zero.
type Counts struct {
	InputTokens  *uint64  `json:"inputTokens"`
	OutputTokens *uint64  `json:"outputTokens"`
	TotalTokens  *uint64  `json:"totalTokens"` // as reported; never input + output
	CostUSD      *float64 `json:"costUsd"`     // an estimate
	// Informational parts of InputTokens (which already includes them).
	CacheReadTokens  *uint64 `json:"cacheReadTokens,omitempty"`
	CacheWriteTokens *uint64 `json:"cacheWriteTokens,omitempty"`
}

// Known reports whether any counter is set.
func (c *Counts) Known() bool {
	return c != nil && (c.InputTokens != nil || c.OutputTokens != nil || c.TotalTokens != nil ||
		c.CostUSD != nil || c.CacheReadTokens != nil || c.CacheWriteTokens != nil)
}

// PricingIdentity names what a turn was billed as; it is only sent when the publisher can prove it.
type PricingIdentity struct {
	Authority  string `json:"authority"`
	Model      string `json:"model"`
	CacheClass string `json:"cacheClass,omitempty"`
}

// Metric is the decrypted payload. Empty strings for Model, ChannelID, SessionID, TurnID and
// StopReason go on the wire as null; the newer optional fields are left out when empty.
type Metric struct {
	Harness   string // required
	Model     string
	ChannelID string
	SessionID string // required with Cumulative
	TurnID    string
	TurnSeq   *uint64 // required with Cumulative; increases per published metric in a session
	Timestamp string  // required: RFC 3339 end of turn, see FormatTimestamp

	Turn          *Counts
	Cumulative    *Counts
	DeltaReliable bool // false when Turn could not be computed from a known baseline
	StopReason    string

	TriggeringEventIDs []string
	RootEventID        string
	ParentEventID      string
	StartedAt          string
	Outcome            string
	TerminalEvidence   string
	AdapterSessionID   string
	RuntimeSessionID   string
	RuntimeRequestID   string
	NativeStopReason   string
	PricingIdentity    *PricingIdentity
}

// wire is the JSON shape: required-but-nullable fields are pointers without omitempty.
type wire struct {
	Harness            string           `json:"harness"`
	Model              *string          `json:"model"`
	ChannelID          *string          `json:"channelId"`
	SessionID          *string          `json:"sessionId"`
	TurnID             *string          `json:"turnId"`
	TriggeringEventIDs []string         `json:"triggeringEventIds,omitempty"`
	RootEventID        string           `json:"rootEventId,omitempty"`
	ParentEventID      string           `json:"parentEventId,omitempty"`
	StartedAt          string           `json:"startedAt,omitempty"`
	Outcome            string           `json:"outcome,omitempty"`
	TerminalEvidence   string           `json:"terminalEvidence,omitempty"`
	AdapterSessionID   string           `json:"adapterSessionId,omitempty"`
	RuntimeSessionID   string           `json:"runtimeSessionId,omitempty"`
	RuntimeRequestID   string           `json:"runtimeRequestId,omitempty"`
	NativeStopReason   string           `json:"nativeStopReason,omitempty"`
	TurnSeq            *uint64          `json:"turnSeq"`
	Timestamp          string           `json:"timestamp"`
	Turn               *Counts          `json:"turn"`
	Cumulative         *Counts          `json:"cumulative"`
	DeltaReliable      *bool            `json:"deltaReliable,omitempty"`
	StopReason         *string          `json:"stopReason"`
	PricingIdentity    *PricingIdentity `json:"pricingIdentity,omitempty"`
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// MarshalJSON writes the NIP-AM payload.
func (m Metric) MarshalJSON() ([]byte, error) {
	dr := m.DeltaReliable
	return json.Marshal(wire{
		Harness: m.Harness, Model: nullable(m.Model), ChannelID: nullable(m.ChannelID),
		SessionID: nullable(m.SessionID), TurnID: nullable(m.TurnID),
		TriggeringEventIDs: m.TriggeringEventIDs, RootEventID: m.RootEventID, ParentEventID: m.ParentEventID,
		StartedAt: m.StartedAt, Outcome: m.Outcome, TerminalEvidence: m.TerminalEvidence,
		AdapterSessionID: m.AdapterSessionID, RuntimeSessionID: m.RuntimeSessionID,
		RuntimeRequestID: m.RuntimeRequestID, NativeStopReason: m.NativeStopReason,
		TurnSeq: m.TurnSeq, Timestamp: m.Timestamp, Turn: m.Turn, Cumulative: m.Cumulative,
		DeltaReliable: &dr, StopReason: nullable(m.StopReason), PricingIdentity: m.PricingIdentity,
	})
}

// UnmarshalJSON reads a payload leniently, as NIP-AM asks of consumers: unknown fields are
// ignored, deltaReliable defaults to true, and unrecognised enum values read as "unknown".
func (m *Metric) UnmarshalJSON(b []byte) error {
	var w wire
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*m = Metric{
		Harness: w.Harness, Model: deref(w.Model), ChannelID: deref(w.ChannelID),
		SessionID: deref(w.SessionID), TurnID: deref(w.TurnID), TurnSeq: w.TurnSeq, Timestamp: w.Timestamp,
		Turn: w.Turn, Cumulative: w.Cumulative, DeltaReliable: w.DeltaReliable == nil || *w.DeltaReliable,
		StopReason:         known(deref(w.StopReason), stops),
		TriggeringEventIDs: w.TriggeringEventIDs, RootEventID: w.RootEventID, ParentEventID: w.ParentEventID,
		StartedAt: w.StartedAt, Outcome: known(w.Outcome, outcomes),
		TerminalEvidence: known(w.TerminalEvidence, evidences), AdapterSessionID: w.AdapterSessionID,
		RuntimeSessionID: w.RuntimeSessionID, RuntimeRequestID: w.RuntimeRequestID,
		NativeStopReason: w.NativeStopReason, PricingIdentity: w.PricingIdentity,
	}
	return nil
}

func known(v string, allowed []string) string {
	if v == "" {
		return ""
	}
	for _, a := range allowed {
		if v == a {
			return v
		}
	}
	return "unknown"
}

// FormatTimestamp is the payload's timestamp form: RFC 3339 in UTC with milliseconds.
func FormatTimestamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

// Validate checks what a publisher must guarantee and a reader must refuse: harness and an
// RFC 3339 timestamp present, session id and sequence with cumulative counts, costs finite and
// non-negative, enum fields in their sets, and a pricing identity complete when present.
func (m *Metric) Validate() error {
	if strings.TrimSpace(m.Harness) == "" {
		return errors.New("turn metric: harness is required")
	}
	if _, err := time.Parse(time.RFC3339Nano, m.Timestamp); err != nil {
		return fmt.Errorf("turn metric: timestamp %q is not RFC 3339", m.Timestamp)
	}
	if m.Cumulative != nil && (m.SessionID == "" || m.TurnSeq == nil) {
		return errors.New("turn metric: sessionId and turnSeq are required with cumulative counts")
	}
	for name, c := range map[string]*Counts{"turn": m.Turn, "cumulative": m.Cumulative} {
		if c != nil && c.CostUSD != nil && (math.IsNaN(*c.CostUSD) || math.IsInf(*c.CostUSD, 0) || *c.CostUSD < 0) {
			return fmt.Errorf("turn metric: %s.costUsd must be finite and non-negative", name)
		}
	}
	for _, f := range []struct {
		name, v string
		set     []string
	}{{"stopReason", m.StopReason, stops}, {"outcome", m.Outcome, outcomes}, {"terminalEvidence", m.TerminalEvidence, evidences}} {
		if f.v != "" && known(f.v, f.set) != f.v {
			return fmt.Errorf("turn metric: %s %q is not one of %s", f.name, f.v, strings.Join(f.set, ", "))
		}
	}
	if p := m.PricingIdentity; p != nil && (p.Authority == "" || p.Model == "") {
		return errors.New("turn metric: pricingIdentity needs authority and model")
	}
	return nil
}

// Build encrypts and signs the kind-44200 event for one finished turn. created_at is the
// timestamp truncated to seconds. A metric with no counter at all is ErrNoUsage (skip it). The
// NIP-44 nonce and then the signature's aux randomness come from entropy (crypto/rand when nil).
func Build(agentSecret, ownerPubkey string, m Metric, entropy io.Reader) (nostr.Event, error) {
	if !m.Turn.Known() && !m.Cumulative.Known() {
		return nostr.Event{}, ErrNoUsage
	}
	if err := m.Validate(); err != nil {
		return nostr.Event{}, err
	}
	agent, err := protocol.PublicKey(agentSecret)
	if err != nil {
		return nostr.Event{}, fmt.Errorf("turn metric: agent key: %w", err)
	}
	owner := strings.ToLower(ownerPubkey)
	if owner == agent {
		return nostr.Event{}, errors.New("turn metric: owner must differ from the agent")
	}
	key, err := protocol.ConversationKey(agentSecret, owner)
	if err != nil {
		return nostr.Event{}, fmt.Errorf("turn metric: owner: %w", err)
	}
	plain, err := json.Marshal(m)
	if err != nil {
		return nostr.Event{}, fmt.Errorf("turn metric: %w", err)
	}
	content, err := protocol.Encrypt44(string(plain), key, entropy)
	if err != nil {
		return nostr.Event{}, fmt.Errorf("turn metric: %w", err)
	}
	ts, _ := time.Parse(time.RFC3339Nano, m.Timestamp)
	ev := nostr.Event{
		Kind:      protocol.KindTurnMetric,
		CreatedAt: nostr.Timestamp(ts.Unix()),
		Tags:      nostr.Tags{{"p", owner}, {"agent", agent}},
		Content:   content,
	}
	if err := protocol.SignEvent(&ev, agentSecret, entropy); err != nil {
		return nostr.Event{}, err
	}
	return ev, nil
}

// Addressing returns the values of a metric's p tags (its owner: exactly one is valid) and agent
// tags (exactly one, equal to the author, is valid): the envelope the relay and the owner check.
func Addressing(tags nostr.Tags) (ps, agents []string) {
	for _, t := range tags {
		if len(t) >= 2 && t[0] == "p" {
			ps = append(ps, t[1])
		}
		if len(t) >= 2 && t[0] == "agent" {
			agents = append(agents, t[1])
		}
	}
	return ps, agents
}

// Decode is the owner side: it checks the envelope (kind, exactly one p tag naming the owner,
// exactly one agent tag equal to the author, id and signature) before decrypting, then parses
// and validates the payload. Events that fail should be ignored.
func Decode(ownerSecret string, ev *nostr.Event) (Metric, error) {
	if ev.Kind != protocol.KindTurnMetric {
		return Metric{}, fmt.Errorf("turn metric: kind %d, want %d", ev.Kind, protocol.KindTurnMetric)
	}
	owner, err := protocol.PublicKey(ownerSecret)
	if err != nil {
		return Metric{}, fmt.Errorf("turn metric: owner key: %w", err)
	}
	ps, agents := Addressing(ev.Tags)
	if len(ps) != 1 || !strings.EqualFold(ps[0], owner) {
		return Metric{}, errors.New("turn metric: want exactly one p tag naming this owner")
	}
	if len(agents) != 1 || agents[0] != ev.PubKey {
		return Metric{}, errors.New("turn metric: want exactly one agent tag equal to the author")
	}
	if err := protocol.CheckEvent(ev); err != nil {
		return Metric{}, fmt.Errorf("turn metric: %w", err)
	}
	key, err := protocol.ConversationKey(ownerSecret, ev.PubKey)
	if err != nil {
		return Metric{}, fmt.Errorf("turn metric: %w", err)
	}
	plain, err := protocol.Decrypt44(ev.Content, key)
	if err != nil {
		return Metric{}, fmt.Errorf("turn metric: %w", err)
	}
	var m Metric
	if err := json.Unmarshal([]byte(plain), &m); err != nil {
		return Metric{}, fmt.Errorf("turn metric: payload is not valid JSON: %w", err)
	}
	if err := m.Validate(); err != nil {
		return Metric{}, err
	}
	return m, nil
}

// Delta computes a turn's usage from the session's cumulative counts before and after it, as a
// publisher must when the agent reports only running totals. prev nil means the baseline is
// unknown (say, after a harness restart): every counter is then null and reliable is false (so
// too when cur is nil). A
// counter missing on either side is null; one that went down is null and makes reliable false,
// never a negative number. For the first turn of a session pass Zero() as prev.
func Delta(prev, cur *Counts) (turn Counts, reliable bool) {
	if prev == nil || cur == nil {
		return Counts{}, false
	}
	reliable = true
	sub := func(a, b *uint64) *uint64 {
		if a == nil || b == nil {
			return nil
		}
		if *b < *a {
			reliable = false
			return nil
		}
		d := *b - *a
		return &d
	}
	turn = Counts{
		InputTokens:      sub(prev.InputTokens, cur.InputTokens),
		OutputTokens:     sub(prev.OutputTokens, cur.OutputTokens),
		TotalTokens:      sub(prev.TotalTokens, cur.TotalTokens),
		CacheReadTokens:  sub(prev.CacheReadTokens, cur.CacheReadTokens),
		CacheWriteTokens: sub(prev.CacheWriteTokens, cur.CacheWriteTokens),
	}
	if prev.CostUSD != nil && cur.CostUSD != nil {
		if d := *cur.CostUSD - *prev.CostUSD; d >= 0 {
			turn.CostUSD = &d
		} else {
			reliable = false
		}
	}
	return turn, reliable
}

// Zero is the cumulative baseline at the start of a session: every counter known and zero.
func Zero() *Counts {
	return &Counts{InputTokens: U64(0), OutputTokens: U64(0), TotalTokens: U64(0), CostUSD: F64(0),
		CacheReadTokens: U64(0), CacheWriteTokens: U64(0)}
}

// U64 and F64 make optional counters readable at call sites.
func U64(v uint64) *uint64 { return &v }

// F64 returns a pointer to v.
func F64(v float64) *float64 { return &v }
