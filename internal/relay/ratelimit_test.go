package relay

import (
	"testing"
	"time"
)

func TestRateLimitSpendsTheBurstThenRefillsAtTheRate(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	l := newRateLimit(2, 4, func() time.Time { return now })
	for i := range 4 {
		if !l.allow("a") {
			t.Fatalf("write %d of the burst refused", i+1)
		}
	}
	if l.allow("a") {
		t.Fatal("fifth write within the same instant allowed")
	}
	if !l.allow("b") {
		t.Fatal("another key is limited by the first")
	}
	now = now.Add(500 * time.Millisecond) // one token back at 2/s
	if !l.allow("a") || l.allow("a") {
		t.Fatal("after 0.5 s at 2/s exactly one more write should pass")
	}
	now = now.Add(time.Hour)
	l.allow("c") // sweeps the refilled buckets
	if len(l.buckets) != 1 {
		t.Fatalf("%d buckets kept, want only the active key's", len(l.buckets))
	}
}

func TestRateLimitOfZeroAllowsEverything(t *testing.T) {
	l := newRateLimit(0, 0, time.Now)
	for range 1000 {
		if !l.allow("a") {
			t.Fatal("unlimited limit refused")
		}
	}
}

// BenchmarkRateLimitAllow is the write-rate rule's cost per event (one key, never limited).
func BenchmarkRateLimitAllow(b *testing.B) {
	l := newRateLimit(1e9, 1e9, time.Now)
	for b.Loop() {
		l.allow("a")
	}
}
