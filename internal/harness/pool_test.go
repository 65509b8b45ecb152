package harness

import (
	"log/slog"
	"testing"
	"time"

	"github.com/buzz-harness/buzz/internal/clock"
)

func TestRespawnBacksOffThenCircuitOpensAfterThreeCrashesInAMinute(t *testing.T) {
	clk := clock.NewFake(t0)
	p := &pool{cfg: &Config{RespawnBackoff: func(n int) time.Duration { return time.Duration(n) * time.Second }},
		clock: clk, log: slog.New(slog.DiscardHandler)}
	s := &slot{}
	p.scheduleRespawn(s)
	if got := s.retryAt.Sub(clk.Now()); got != time.Second {
		t.Fatalf("first respawn in %v, want the backoff's 1s", got)
	}
	clk.Advance(10 * time.Second)
	p.scheduleRespawn(s)
	if got := s.retryAt.Sub(clk.Now()); got != 2*time.Second {
		t.Fatalf("second respawn in %v, want 2s", got)
	}
	clk.Advance(10 * time.Second)
	p.scheduleRespawn(s)
	if got := s.retryAt.Sub(clk.Now()); got != breakerOpen {
		t.Fatalf("third crash within a minute: respawn in %v, want the open circuit's %v", got, breakerOpen)
	}
}

func TestCrashesSpreadOverMoreThanAMinuteDoNotOpenTheCircuit(t *testing.T) {
	clk := clock.NewFake(t0)
	p := &pool{cfg: &Config{RespawnBackoff: func(int) time.Duration { return time.Second }},
		clock: clk, log: slog.New(slog.DiscardHandler)}
	s := &slot{}
	for range 5 {
		p.scheduleRespawn(s)
		if got := s.retryAt.Sub(clk.Now()); got != time.Second {
			t.Fatalf("respawn in %v with crashes 40s apart, want 1s", got)
		}
		clk.Advance(40 * time.Second)
	}
}

func TestLiveSessionBoundsCloseLeastRecentlyUsedAndIdle(t *testing.T) {
	clk := clock.NewFake(t0)
	p := &pool{cfg: &Config{MaxCachedConversationSessions: 2, ConversationSessionIdleTTL: time.Minute},
		clock: clk, log: slog.New(slog.DiscardHandler)}
	convs := newConversations(clk.Now, func() float64 { return 1 })
	a, b := convKey{Channel: "c", Root: "a"}, convKey{Channel: "c", Root: "b"}
	s := &slot{ready: true}
	convs.update(a, func(c *conversation) {
		c.setSession(s, &convSession{ID: "sa", lastUsed: clk.Now().Add(-10 * time.Second)})
	})
	convs.update(b, func(c *conversation) {
		c.setSession(s, &convSession{ID: "sb", lastUsed: clk.Now().Add(-5 * time.Second)})
	})
	p.slots = []*slot{s}
	p.makeRoom(t.Context(), convs, s) // a third session is about to open: the least recently used goes
	if live := convs.slotSessions(s); live[a] != nil || len(live) != 1 {
		t.Fatalf("after makeRoom: %v; want only b", live)
	}
	clk.Advance(54 * time.Second) // b idle 59 s: kept
	p.maintain(t.Context(), convs)
	if len(convs.slotSessions(s)) != 1 {
		t.Fatal("a session idle under the TTL was closed")
	}
	clk.Advance(time.Second) // b idle 60 s: closed
	p.maintain(t.Context(), convs)
	if len(convs.slotSessions(s)) != 0 {
		t.Fatal("a session idle for the TTL is still live")
	}
	if convs.get(b) != nil {
		t.Fatal("a conversation with nothing left is still in the table")
	}
}

func TestBusySlotKeepsIdleSessionsUntilItsTurnEnds(t *testing.T) {
	clk := clock.NewFake(t0)
	p := &pool{cfg: &Config{MaxCachedConversationSessions: 8, ConversationSessionIdleTTL: time.Minute},
		clock: clk, log: slog.New(slog.DiscardHandler)}
	convs := newConversations(clk.Now, func() float64 { return 1 })
	s := &slot{ready: true, busy: true}
	convs.update(convKey{Channel: "c", Root: "a"}, func(c *conversation) { c.setSession(s, &convSession{ID: "sa", lastUsed: clk.Now()}) })
	p.slots = []*slot{s}
	clk.Advance(time.Hour)
	p.maintain(t.Context(), convs)
	if len(convs.slotSessions(s)) != 1 {
		t.Fatal("maintain closed a session of a busy slot")
	}
}
