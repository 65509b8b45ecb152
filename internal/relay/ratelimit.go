package relay

import (
	"sync"
	"sync/atomic"
	"time"
)

// rateLimit is a token bucket per key (a pubkey): each key may spend burst at once and gets
// rate tokens back per second. Keys whose bucket has refilled are forgotten, so the map holds
// only the keys active within the last burst/rate seconds.
type rateLimit struct {
	rate  float64 // tokens per second; 0 = unlimited
	burst float64
	now   func() time.Time

	mu        sync.Mutex
	buckets   map[string]*bucket
	lastSweep time.Time
}

type bucket struct {
	tokens float64
	at     time.Time
}

func newRateLimit(rate, burst float64, now func() time.Time) *rateLimit {
	return &rateLimit{rate: rate, burst: max(burst, 1), now: now, buckets: map[string]*bucket{}}
}

// allow spends one of key's tokens, reporting false (and spending nothing) when it has none.
func (l *rateLimit) allow(key string) bool {
	if l == nil || l.rate <= 0 {
		return true
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweep(now)
	b := l.buckets[key]
	if b == nil {
		b = &bucket{tokens: l.burst, at: now}
		l.buckets[key] = b
	}
	b.tokens = min(l.burst, b.tokens+now.Sub(b.at).Seconds()*l.rate)
	b.at = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// sweep drops full buckets, at most once per refill time.
func (l *rateLimit) sweep(now time.Time) {
	full := time.Duration(l.burst / l.rate * float64(time.Second))
	if now.Sub(l.lastSweep) < full {
		return
	}
	l.lastSweep = now
	for k, b := range l.buckets {
		if b.tokens+now.Sub(b.at).Seconds()*l.rate >= l.burst {
			delete(l.buckets, k)
		}
	}
}

// bound is a Config bound: 0 = def, negative = none (0 from here on).
func bound[T int | time.Duration](v, def T) T {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0
	}
	return v
}

// ipCounter counts open connections per IP address against a cap (0 = none).
type ipCounter struct {
	max int
	mu  sync.Mutex
	n   map[string]int
}

// enter takes one of ip's slots, reporting false when it has none left.
func (c *ipCounter) enter(ip string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.max > 0 && c.n[ip] >= c.max {
		return false
	}
	c.n[ip]++
	return true
}

func (c *ipCounter) leave(ip string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[ip]--; c.n[ip] <= 0 {
		delete(c.n, ip)
	}
}

// rateBook allows at most limit events per key (an author) in each window, which opens with
// the key's first event after the previous one ended. Over it, allow says no and the refusal is
// counted. Each node keeps its own book.
type rateBook struct {
	limit   int
	window  time.Duration
	refused atomic.Int64

	mu   sync.Mutex
	keys map[string]*rateWindow
}

type rateWindow struct {
	start time.Time
	n     int
	over  bool // the last call was refused
}

// maxRateKeys bounds a book: past it, the keys whose window has ended are forgotten, which
// changes nothing for them.
const maxRateKeys = 4096

func newRateBook(limit int, window time.Duration) *rateBook {
	return &rateBook{limit: limit, window: window, keys: map[string]*rateWindow{}}
}

// allow counts one event of key at now, or a refusal when its window is full; first reports a
// refusal that follows an allowed call (worth one log line, the rest are not).
func (b *rateBook) allow(key string, now time.Time) (ok, first bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	w := b.keys[key]
	if w == nil || !now.Before(w.start.Add(b.window)) {
		if w == nil && len(b.keys) >= maxRateKeys {
			b.pruneLocked(now)
		}
		w = &rateWindow{start: now}
		b.keys[key] = w
	}
	if w.n >= b.limit {
		b.refused.Add(1)
		first, w.over = !w.over, true
		return false, first
	}
	w.n++
	w.over = false
	return true, false
}

func (b *rateBook) pruneLocked(now time.Time) {
	for k, w := range b.keys {
		if !now.Before(w.start.Add(b.window)) {
			delete(b.keys, k)
		}
	}
}
