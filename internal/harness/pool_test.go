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
