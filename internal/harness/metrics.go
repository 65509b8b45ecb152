package harness

import (
	"cmp"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/buzz-harness/buzz/internal/acp"
	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/protocol/turnmetric"
)

// Turn metrics (NIP-AM): after every turn where the agent reported usage, the harness publishes
// a kind-44200 event NIP-44-encrypted to the owner. Per-turn tokens come from the prompt
// response's usage; cost comes from the session's usage_update notifications, which carry the
// session's running cost. Nothing is published without an owner or without any usage.

// sessionUsage is a session's metric bookkeeping, kept on its convSession and touched only by
// the loop.
type sessionUsage struct {
	started    bool               // the baseline below has been set
	cumulative *turnmetric.Counts // nil: the baseline is unknown (a resumed or loaded session)
	cost       *float64           // the session's running cost at the last metric
	seq        uint64             // metrics published for this session
}

// acpUsage is ACP's PromptResponse.usage (unstable in the schema, sent by claude and codex).
type acpUsage struct {
	TotalTokens       *uint64 `json:"totalTokens"`
	InputTokens       *uint64 `json:"inputTokens"`
	OutputTokens      *uint64 `json:"outputTokens"`
	CachedReadTokens  *uint64 `json:"cachedReadTokens"`
	CachedWriteTokens *uint64 `json:"cachedWriteTokens"`
}

// turnCounts reads a prompt response's usage; ok is false when there is none (or it is not the
// documented shape: a number we cannot read is never guessed).
func turnCounts(raw json.RawMessage) (turnmetric.Counts, bool) {
	var u acpUsage
	if len(raw) == 0 || json.Unmarshal(raw, &u) != nil {
		return turnmetric.Counts{}, false
	}
	c := turnmetric.Counts{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, TotalTokens: u.TotalTokens,
		CacheReadTokens: u.CachedReadTokens, CacheWriteTokens: u.CachedWriteTokens}
	return c, c.Known()
}

// costTracker holds each ACP session's latest running cost in USD from usage_update
// notifications. Agent reader goroutines write it; the loop reads it when a turn ends (an
// agent writes a turn's updates before its response, so the turn's cost is in by then).
type costTracker struct {
	mu   sync.Mutex
	cost map[string]float64
}

// maxTrackedCosts bounds the map; it is simply cleared when full (a cleared session's next
// turn publishes no cost, never a wrong one).
const maxTrackedCosts = 4096

func (t *costTracker) observe(u acp.SessionUpdate) {
	if u.Kind != "usage_update" || u.Replay {
		return
	}
	var p struct {
		Update struct {
			Cost *struct {
				Amount   *float64 `json:"amount"`
				Currency string   `json:"currency"`
			} `json:"cost"`
		} `json:"update"`
	}
	if json.Unmarshal(u.Raw, &p) != nil || p.Update.Cost == nil || p.Update.Cost.Amount == nil ||
		!strings.EqualFold(p.Update.Cost.Currency, "USD") || *p.Update.Cost.Amount < 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cost == nil || len(t.cost) >= maxTrackedCosts {
		t.cost = map[string]float64{}
	}
	t.cost[u.SessionID] = *p.Update.Cost.Amount
}

func (t *costTracker) get(sessionID string) (float64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c, ok := t.cost[sessionID]
	return c, ok
}

// turnMetric builds the metric for a finished turn, advancing the session's bookkeeping; ok is
// false when the turn reported no usage at all.
func turnMetric(r turnResult, harness string, cost *float64, end time.Time) (turnmetric.Metric, bool) {
	sess := r.session
	u := &sess.usage
	if !u.started {
		u.started = true
		if !sess.Resumed {
			// A session we created starts from zero, so its first delta is reliable; a resumed
			// one has history we never saw.
			u.cumulative, u.cost = turnmetric.Zero(), turnmetric.F64(0)
		}
	}
	turn, hasTokens := turnCounts(r.usage)
	reliable := u.cumulative != nil
	if cost != nil {
		if u.cost != nil && *cost >= *u.cost {
			turn.CostUSD = turnmetric.F64(*cost - *u.cost)
		} else {
			reliable = false
		}
		u.cost = turnmetric.F64(*cost)
	}
	if !hasTokens && turn.CostUSD == nil {
		return turnmetric.Metric{}, false
	}
	if u.cumulative != nil {
		u.cumulative = addCounts(u.cumulative, &turn, cost)
	}
	u.seq++
	m := turnmetric.Metric{
		Harness:            harness,
		ChannelID:          r.in.channel.ID,
		SessionID:          sess.ID,
		TurnID:             r.in.turnID,
		TurnSeq:            turnmetric.U64(u.seq),
		Timestamp:          turnmetric.FormatTimestamp(end),
		StartedAt:          turnmetric.FormatTimestamp(r.started),
		Turn:               &turn,
		DeltaReliable:      reliable,
		StopReason:         metricStop(r),
		Outcome:            metricOutcome(r),
		TerminalEvidence:   metricEvidence(r),
		TriggeringEventIDs: r.in.batch.IDs(),
		NativeStopReason:   r.stop,
	}
	if u.cumulative != nil {
		c := *u.cumulative
		m.Cumulative = &c
	}
	if last := r.in.batch.Last(); last != nil {
		m.RootEventID, m.ParentEventID = cmp.Or(protocol.ParseThread(last.Tags).Root, last.ID), last.ID
	}
	return m, true
}

// addCounts adds a turn to running totals; a counter the turn did not report makes the total
// unknown from then on (null, never a silent undercount). The cost total is the agent's own
// running cost when it reports one.
func addCounts(total, turn *turnmetric.Counts, cost *float64) *turnmetric.Counts {
	add := func(a, b *uint64) *uint64 {
		if a == nil || b == nil {
			return nil
		}
		return turnmetric.U64(*a + *b)
	}
	out := &turnmetric.Counts{
		InputTokens:      add(total.InputTokens, turn.InputTokens),
		OutputTokens:     add(total.OutputTokens, turn.OutputTokens),
		TotalTokens:      add(total.TotalTokens, turn.TotalTokens),
		CacheReadTokens:  add(total.CacheReadTokens, turn.CacheReadTokens),
		CacheWriteTokens: add(total.CacheWriteTokens, turn.CacheWriteTokens),
	}
	if cost != nil {
		out.CostUSD = turnmetric.F64(*cost)
	}
	return out
}

func metricStop(r turnResult) string {
	switch {
	case r.cause != nil && r.cause != errShutdown, r.stop == "cancelled":
		return turnmetric.StopCancelled
	case r.err != nil:
		return turnmetric.StopError
	case r.stop == turnmetric.StopEndTurn, r.stop == turnmetric.StopMaxTokens:
		return r.stop
	}
	return turnmetric.StopUnknown
}

func metricOutcome(r turnResult) string {
	switch metricStop(r) {
	case turnmetric.StopCancelled:
		return "cancelled"
	case turnmetric.StopError:
		return "failed"
	}
	switch r.reply {
	case replyFallback:
		return turnmetric.OutcomeFallback
	case replyNotice:
		return turnmetric.OutcomeSilent
	}
	return "success"
}

func metricEvidence(r turnResult) string {
	if r.err != nil {
		return "error"
	}
	return "prompt_response"
}

// harnessName names us in metrics: buzz-acp and the agent command it drives.
func harnessName(agentCommand string) string {
	return "buzz-acp/" + filepath.Base(agentCommand)
}

// publishTurnMetric counts a finished turn's usage (Prometheus, the spend caps) and publishes
// its metric, if the agent reported usage and there is an owner to encrypt it to. Best effort:
// a failure is logged, never retried.
func (h *Harness) publishTurnMetric(ctx context.Context, r turnResult) {
	if r.session == nil || r.in.heartbeat {
		return
	}
	var cost *float64
	if c, ok := h.costs.get(r.session.ID); ok {
		cost = &c
	}
	m, ok := turnMetric(r, harnessName(h.cfg.AgentCommand), cost, h.clock.Now())
	if !ok {
		return
	}
	h.metrics.used(agentLabel(r.in.ident, h.cfg.AgentCommand), m.Turn)
	h.spend(ctx, r, m.Turn)
	if h.cfg.Owner == "" {
		return
	}
	// Encrypting and signing cost four curve multiplications: not on the loop.
	chID := r.in.channel.ID
	h.tasks.Go(func() {
		ev, err := turnmetric.Build(h.cfg.SecretKey, h.cfg.Owner, m, nil)
		if err != nil {
			h.log.Warn("turn metric not built", "channel", chID, "err", err)
			return
		}
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		h.relay.publish(pctx, &ev)
	})
}
