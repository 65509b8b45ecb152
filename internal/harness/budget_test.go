package harness

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/buzz-harness/buzz/internal/clock"
	"github.com/buzz-harness/buzz/internal/protocol/turnmetric"
)

func openTestBudget(t *testing.T, cfg Config, path string, clk clock.Clock) *budget {
	t.Helper()
	b, err := openBudget(&cfg, path, clk, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func usd(v float64) *turnmetric.Counts { return &turnmetric.Counts{CostUSD: turnmetric.F64(v)} }

func TestBudgetWarnsOnceAtEightyPercentAndRefusesAtTheCap(t *testing.T) {
	clk := clock.NewFake(t0)
	b := openTestBudget(t, Config{MaxCostPerDay: 10}, filepath.Join(t.TempDir(), "budget.json"), clk)
	defer b.close()
	if b.spent(usd(7.9)) || b.exceeded() != "" {
		t.Fatal("warned or refused below 80 %")
	}
	if !b.spent(usd(0.1)) {
		t.Fatal("no warning at 80 %")
	}
	if b.spent(usd(1)) {
		t.Fatal("warned twice for the same cap")
	}
	if b.exceeded() != "" {
		t.Fatal("refused at $9 of $10")
	}
	b.spent(usd(1))
	if why := b.exceeded(); !strings.Contains(why, "$10.00 of my $10.00") {
		t.Fatalf("exceeded = %q at the cap", why)
	}
}

func TestBudgetTokenCapCountsTheTurnsTotal(t *testing.T) {
	clk := clock.NewFake(t0)
	b := openTestBudget(t, Config{MaxTokensPerDay: 1000}, filepath.Join(t.TempDir(), "budget.json"), clk)
	defer b.close()
	b.spent(&turnmetric.Counts{InputTokens: turnmetric.U64(400), OutputTokens: turnmetric.U64(100), TotalTokens: turnmetric.U64(600)})
	b.spent(&turnmetric.Counts{InputTokens: turnmetric.U64(300), OutputTokens: turnmetric.U64(100)}) // no total: input + output
	if why := b.exceeded(); !strings.Contains(why, "1000 of my 1000 daily tokens") {
		t.Fatalf("exceeded = %q after 1,000 tokens", why)
	}
}

func TestBudgetSpendSurvivesARestartAndRollsOverAtUTCMidnight(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 12, 2, 23, 0, 0, 0, time.UTC))
	path := filepath.Join(t.TempDir(), "budget.json")
	b := openTestBudget(t, Config{MaxCostPerDay: 1}, path, clk)
	b.spent(usd(1.5))
	b.close()

	b = openTestBudget(t, Config{MaxCostPerDay: 1}, path, clk)
	if b.exceeded() == "" {
		t.Fatal("a restart forgot today's spend")
	}
	clk.Advance(time.Hour)
	if why := b.exceeded(); why != "" {
		t.Fatalf("still refusing after midnight UTC: %q", why)
	}
	if st := b.status(); st["day"] != "2026-12-03" || st["cost_usd"] != 0.0 {
		t.Fatalf("status after the rollover: %v", st)
	}
	b.close()
}

func TestBudgetCommandRaisesTodaysCapOrSaysWhatItWants(t *testing.T) {
	clk := clock.NewFake(t0)
	b := openTestBudget(t, Config{MaxCostPerDay: 1, MaxTokensPerDay: 10}, filepath.Join(t.TempDir(), "budget.json"), clk)
	defer b.close()
	b.spent(&turnmetric.Counts{CostUSD: turnmetric.F64(2), TotalTokens: turnmetric.U64(5)})
	for _, bad := range []string{"lots", "-3", "NaN", "5xtokens"} {
		if err := b.raise(bad); err == nil || !strings.Contains(err.Error(), "!budget "+bad+":") {
			t.Fatalf("!budget %s: error %v, want one naming the value", bad, err)
		}
	}
	if err := b.raise("$25"); err != nil {
		t.Fatal(err)
	}
	if why := b.exceeded(); why != "" {
		t.Fatalf("still refusing after !budget $25: %q", why)
	}
	b.spent(&turnmetric.Counts{TotalTokens: turnmetric.U64(5)})
	if b.exceeded() == "" {
		t.Fatal("the token cap stopped counting")
	}
	if err := b.raise("20tokens"); err != nil || b.exceeded() != "" {
		t.Fatalf("!budget 20tokens: %v, exceeded %q", err, b.exceeded())
	}
}

func TestBudgetRecordThatDoesNotParseStopsTheStart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "budget.json")
	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := openBudget(&Config{MaxCostPerDay: 1}, path, clock.NewFake(t0), slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "remove it") {
		t.Fatalf("err = %v, want one saying what to do", err)
	}
}
