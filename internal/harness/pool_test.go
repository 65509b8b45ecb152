package harness

import (
	"log/slog"
	"testing"
	"time"
)

func TestRespawnBacksOffThenCircuitOpensAfterThreeCrashesInAMinute(t *testing.T) {
	now := t0
	p := &pool{cfg: &Config{RespawnBackoff: func(n int) time.Duration { return time.Duration(n) * time.Second }},
		now: func() time.Time { return now }, log: slog.New(slog.DiscardHandler)}
	s := &slot{}
	p.scheduleRespawn(s)
	if got := s.retryAt.Sub(now); got != time.Second {
		t.Fatalf("first respawn in %v, want the backoff's 1s", got)
	}
	now = now.Add(10 * time.Second)
	p.scheduleRespawn(s)
	if got := s.retryAt.Sub(now); got != 2*time.Second {
		t.Fatalf("second respawn in %v, want 2s", got)
	}
	now = now.Add(10 * time.Second)
	p.scheduleRespawn(s)
	if got := s.retryAt.Sub(now); got != breakerOpen {
		t.Fatalf("third crash within a minute: respawn in %v, want the open circuit's %v", got, breakerOpen)
	}
}

func TestCrashesSpreadOverMoreThanAMinuteDoNotOpenTheCircuit(t *testing.T) {
	now := t0
	p := &pool{cfg: &Config{RespawnBackoff: func(int) time.Duration { return time.Second }},
		now: func() time.Time { return now }, log: slog.New(slog.DiscardHandler)}
	s := &slot{}
	for range 5 {
		p.scheduleRespawn(s)
		if got := s.retryAt.Sub(now); got != time.Second {
			t.Fatalf("respawn in %v with crashes 40s apart, want 1s", got)
		}
		now = now.Add(40 * time.Second)
	}
}

func TestLiveSessionBoundsCloseLeastRecentlyUsedAndIdle(t *testing.T) {
	now := t0
	p := &pool{cfg: &Config{MaxCachedConversationSessions: 2, ConversationSessionIdleTTL: time.Minute},
		now: func() time.Time { return now }, log: slog.New(slog.DiscardHandler)}
	a, b := scopeKey{"c", "a"}, scopeKey{"c", "b"}
	s := &slot{ready: true, sessions: map[scopeKey]*chanSession{
		a: {ID: "sa", lastUsed: now.Add(-10 * time.Second)},
		b: {ID: "sb", lastUsed: now.Add(-5 * time.Second)},
	}}
	p.slots = []*slot{s}
	p.makeRoom(t.Context(), s) // a third session is about to open: the least recently used goes
	if _, ok := s.sessions[a]; ok || len(s.sessions) != 1 {
		t.Fatalf("after makeRoom: %v; want only b", s.sessions)
	}
	now = now.Add(54 * time.Second) // b idle 59 s: kept
	p.maintain(t.Context())
	if len(s.sessions) != 1 {
		t.Fatal("a session idle under the TTL was closed")
	}
	now = now.Add(time.Second) // b idle 60 s: closed
	p.maintain(t.Context())
	if len(s.sessions) != 0 {
		t.Fatal("a session idle for the TTL is still live")
	}
}

func TestBusySlotKeepsIdleSessionsUntilItsTurnEnds(t *testing.T) {
	now := t0
	p := &pool{cfg: &Config{MaxCachedConversationSessions: 8, ConversationSessionIdleTTL: time.Minute},
		now: func() time.Time { return now }, log: slog.New(slog.DiscardHandler)}
	s := &slot{ready: true, busy: true, sessions: map[scopeKey]*chanSession{{"c", "a"}: {ID: "sa", lastUsed: now}}}
	p.slots = []*slot{s}
	now = now.Add(time.Hour)
	p.maintain(t.Context())
	if len(s.sessions) != 1 {
		t.Fatal("maintain closed a session of a busy slot")
	}
}
