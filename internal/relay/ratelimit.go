package relay

import (
	"sync"
	"sync/atomic"
	"time"
)

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
