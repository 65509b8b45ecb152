package harness

import (
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/buzz-harness/buzz/internal/clock"
	"github.com/buzz-harness/buzz/internal/observer"
)

// sleepyHarness is just enough of a harness for sleepIdle: three ready slots, idle since t0.
func sleepyHarness(t *testing.T, clk *clock.Fake) (*Harness, []*slot) {
	cfg := Config{IdlePoolSleep: time.Minute}
	h := &Harness{cfg: cfg, clock: clk, log: slog.New(slog.DiscardHandler), bus: observer.NewBus(0),
		convs: newConversations(clk.Now, func() float64 { return 1 }), metrics: newOpsMetrics(clk)}
	h.pool = &pool{cfg: &h.cfg, clock: clk, log: h.log, record: newAgentRecord(filepath.Join(t.TempDir(), "agents.json"), h.log)}
	t.Cleanup(h.pool.record.close)
	for i := range 3 {
		h.pool.slots = append(h.pool.slots, &slot{idx: i, ready: true, usedAt: clk.Now()})
	}
	return h, h.pool.slots
}

func TestIdleSleepNeverStopsAnAgentWithATurnInFlightOrAQuestionOpen(t *testing.T) {
	clk := clock.NewFake(t0)
	h, slots := sleepyHarness(t, clk)
	running, asking, idle := slots[0], slots[1], slots[2]
	running.busy = true
	h.convs.update(convKey{Channel: "c", Root: "r"}, func(c *conversation) { c.turn = &turn{slot: running} })
	h.convs.update(convKey{Channel: "c", Root: "q"}, func(c *conversation) {
		c.setSession(asking, &convSession{ID: "s"})
		c.questions = []*permWait{{}}
	})
	clk.Advance(2 * time.Minute)
	h.sleepIdle(clk.Now())
	if running.asleep || !running.ready || asking.asleep || !asking.ready {
		t.Fatalf("slept an agent with work: running asleep=%v, asking asleep=%v", running.asleep, asking.asleep)
	}
	if !idle.asleep || idle.ready {
		t.Fatal("the idle agent was not put to sleep")
	}
}
