package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/atomicfile"
	"github.com/buzz-harness/buzz/internal/clock"
	"github.com/buzz-harness/buzz/internal/protocol/turnmetric"
)

// Spend caps (--max-cost-per-day, --max-tokens-per-day): the agent's spend today (UTC), summed
// from the usage it reports per turn (the turn metrics' numbers), is kept in
// <state-dir>/budget-<pubkey>.json so a restart keeps it. At 80 % of a cap the owner gets a
// 40099 row; past a cap every new mention gets a failure notice instead of a turn, until the
// owner raises the cap for the day (!budget <usd>, or !budget <n>tokens) or the day rolls over.
// Turns already queued or running finish: a cap stops new work, it does not drop accepted work.

// Row types of the spend caps (our extension, like !status).
const (
	RowBudget        = "budget"         // the answer to !budget
	RowBudgetWarning = "budget_warning" // 80 % of a cap spent today
)

// CmdBudget raises today's spend cap: !budget 25 (USD) or !budget 2000000tokens.
const CmdBudget = "!budget"

// budgetWarnAt is the share of a cap whose spending warns the owner.
const budgetWarnAt = 0.8

// spendDay is one UTC day's spend and the owner's caps for it.
type spendDay struct {
	Day     string  `json:"day"` // 2006-01-02, UTC
	CostUSD float64 `json:"costUsd"`
	Tokens  int64   `json:"tokens"`
	// The owner's !budget for the day, over the flags (nil: the flag's cap).
	CapUSD    *float64 `json:"capUsd,omitempty"`
	CapTokens *int64   `json:"capTokens,omitempty"`
	Warned    bool     `json:"warned,omitempty"` // the 80 % row went out for the current caps
}

// budget is the agent's spend against its caps. The loop uses it; the state file's writer reads
// a copy under mu.
type budget struct {
	maxUSD    float64
	maxTokens int64
	clock     clock.Clock
	file      *atomicfile.Snapshots

	mu  sync.Mutex
	day spendDay
}

// openBudget loads today's spend from path (a file from an earlier day, or none, starts at zero).
// A file that does not parse is an error: starting from zero would lift the caps unasked.
func openBudget(cfg *Config, path string, clk clock.Clock, log *slog.Logger) (*budget, error) {
	b := &budget{maxUSD: cfg.MaxCostPerDay, maxTokens: cfg.MaxTokensPerDay, clock: clk}
	raw, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("spend record %s: %w", path, err)
	default:
		if err := json.Unmarshal(raw, &b.day); err != nil {
			return nil, fmt.Errorf("spend record %s does not parse (%v); remove it to start today's spend from zero", path, err)
		}
	}
	b.roll()
	if b.day.CostUSD > 0 || b.day.Tokens > 0 {
		log.Info("spend today", "day", b.day.Day, "usd", b.day.CostUSD, "tokens", b.day.Tokens)
	}
	b.file = atomicfile.NewSnapshots(path, 0o600, b.snapshot, busyStateOpts(cfg.stateWriteOpts)...)
	return b, nil
}

func (b *budget) snapshot() ([]byte, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	raw, _ := json.Marshal(b.day)
	return raw, true
}

func (b *budget) close() { _ = b.file.Close() }

// change applies f to today's record and has it written.
func (b *budget) change(f func(d *spendDay)) {
	b.mu.Lock()
	f(&b.day)
	b.mu.Unlock()
	b.file.Mark()
}

// roll starts a new record when the day has changed.
func (b *budget) roll() {
	if today := b.clock.Now().UTC().Format(time.DateOnly); b.day.Day != today {
		b.mu.Lock()
		b.day = spendDay{Day: today}
		b.mu.Unlock()
	}
}

// caps are today's caps (0: none).
func (b *budget) caps() (usd float64, tokens int64) {
	usd, tokens = b.maxUSD, b.maxTokens
	if b.day.CapUSD != nil {
		usd = *b.day.CapUSD
	}
	if b.day.CapTokens != nil {
		tokens = *b.day.CapTokens
	}
	return usd, tokens
}

// spent adds a turn's reported usage; warn says today's spend just reached budgetWarnAt of a cap.
func (b *budget) spent(c *turnmetric.Counts) (warn bool) {
	b.roll()
	usd, tokens := b.caps()
	b.change(func(d *spendDay) {
		if c.CostUSD != nil {
			d.CostUSD += *c.CostUSD
		}
		d.Tokens += turnTokens(c)
		reached := usd > 0 && d.CostUSD >= budgetWarnAt*usd || tokens > 0 && float64(d.Tokens) >= budgetWarnAt*float64(tokens)
		if reached && !d.Warned {
			d.Warned, warn = true, true
		}
	})
	return warn
}

// turnTokens is a turn's token count: its total, else input plus output.
func turnTokens(c *turnmetric.Counts) int64 {
	if c.TotalTokens != nil {
		return int64(*c.TotalTokens)
	}
	var n uint64
	for _, p := range []*uint64{c.InputTokens, c.OutputTokens} {
		if p != nil {
			n += *p
		}
	}
	return int64(n)
}

// exceeded says which cap today's spend has reached ("" for none).
func (b *budget) exceeded() string {
	b.roll()
	usd, tokens := b.caps()
	switch {
	case usd > 0 && b.day.CostUSD >= usd:
		return fmt.Sprintf("$%.2f of my $%.2f daily spending cap", b.day.CostUSD, usd)
	case tokens > 0 && b.day.Tokens >= tokens:
		return fmt.Sprintf("%d of my %d daily tokens", b.day.Tokens, tokens)
	}
	return ""
}

// raise sets today's cap from a !budget value: a dollar amount ("25", "$25") or a token count
// ("2000000tokens"); 0 lifts that cap for the day.
func (b *budget) raise(v string) error {
	b.roll()
	if n, ok := strings.CutSuffix(strings.ToLower(v), "tokens"); ok {
		t, err := strconv.ParseInt(n, 10, 64)
		if err != nil || t < 0 {
			return fmt.Errorf("%s %s: want a whole number of tokens, e.g. %s 2000000tokens", CmdBudget, v, CmdBudget)
		}
		b.change(func(d *spendDay) { d.CapTokens, d.Warned = &t, false })
		return nil
	}
	usd, err := strconv.ParseFloat(strings.TrimPrefix(v, "$"), 64)
	if err != nil || usd < 0 || math.IsInf(usd, 0) || math.IsNaN(usd) {
		return fmt.Errorf("%s %s: want a dollar amount, e.g. %s 25, or tokens, e.g. %s 2000000tokens", CmdBudget, v, CmdBudget, CmdBudget)
	}
	b.change(func(d *spendDay) { d.CapUSD, d.Warned = &usd, false })
	return nil
}

// status is today's spend and caps, for !status and the budget rows.
func (b *budget) status() map[string]any {
	b.roll()
	usd, tokens := b.caps()
	out := map[string]any{"day": b.day.Day, "cost_usd": b.day.CostUSD, "tokens": b.day.Tokens}
	if usd > 0 {
		out["cap_usd"] = usd
	}
	if tokens > 0 {
		out["cap_tokens"] = tokens
	}
	return out
}

// spend counts a finished turn's usage against the caps and warns the owner, in the turn's
// thread, when it reaches 80 % of one.
func (h *Harness) spend(ctx context.Context, r turnResult, c *turnmetric.Counts) {
	if !h.budget.spent(c) || h.cfg.Owner == "" {
		return
	}
	last := r.in.batch.Last()
	payload := h.budget.status()
	payload["type"], payload["target"] = RowBudgetWarning, h.agent
	row := outcomeRow(r.in.channel.ID, last, payload, h.clock.Now())
	row.Tags = append(row.Tags, nostr.Tag{"p", h.cfg.Owner})
	h.log.Warn("80% of a daily spend cap reached", "spend", payload)
	h.relay.publishLater(ctx, &h.tasks, row)
}

// overBudget answers ev with a failure notice instead of a turn when today's spend has reached a
// cap, and records it handled; it reports whether it did.
func (h *Harness) overBudget(ctx context.Context, c *channel, ev *nostr.Event) bool {
	why := h.budget.exceeded()
	if why == "" {
		return false
	}
	h.skip(ev)
	h.metrics.refused.Inc()
	h.log.Warn("spend cap reached; answering with a notice", "event", ev.ID, "channel", c.ID, "spent", why)
	text := "⚠️ I've used " + why + " today, so I'm not taking new requests. My owner can raise it (" +
		CmdBudget + " <usd>); otherwise I'm back when the day rolls over (00:00 UTC)."
	h.relay.publishLater(ctx, &h.tasks, failureNotice(c.ID, h.convOf(c, ev), []*nostr.Event{ev}, h.agent, text, h.clock.Now()))
	return true
}

// budgetCommand carries out !budget into its answer row.
func (h *Harness) budgetCommand(value string, row map[string]any) {
	row["type"] = RowBudget
	if err := h.budget.raise(value); err != nil {
		row["error"] = err.Error()
		return
	}
	h.log.Info("owner set today's spend cap", "value", value)
	for k, v := range h.budget.status() {
		row[k] = v
	}
}
