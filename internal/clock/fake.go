package clock

import (
	"sort"
	"sync"
	"time"
)

// Fake is a clock that moves only when told to. Timers, tickers and after-funcs fire, in time
// order, as Advance passes their moment; a ticker fires at most once per Advance step it spans
// (as a real ticker drops ticks a slow reader misses). After-funcs run on the goroutine calling
// Advance, before it returns, so they must not block. It is safe for concurrent use.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	waiters []*fakeTimer
	seq     int
	// changed is closed and replaced whenever a timer is created, so a test can wait for the
	// code under test to have armed its next timer (WaitForTimers).
	changed chan struct{}
}

// NewFake returns a fake clock reading start.
func NewFake(start time.Time) *Fake { return &Fake{now: start, changed: make(chan struct{})} }

type fakeTimer struct {
	c      *Fake
	at     time.Time
	every  time.Duration // >0: a ticker
	ch     chan time.Time
	f      func()
	seq    int
	active bool
}

func (c *Fake) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *Fake) NewTimer(d time.Duration) Timer {
	return c.add(&fakeTimer{at: c.Now().Add(d), ch: make(chan time.Time, 1)})
}

func (c *Fake) NewTicker(d time.Duration) Ticker {
	if d <= 0 {
		panic("clock: non-positive ticker interval")
	}
	return fakeTicker{c.add(&fakeTimer{at: c.Now().Add(d), every: d, ch: make(chan time.Time, 1)})}
}

type fakeTicker struct{ t *fakeTimer }

func (t fakeTicker) C() <-chan time.Time { return t.t.ch }
func (t fakeTicker) Stop()               { t.t.Stop() }

func (c *Fake) AfterFunc(d time.Duration, f func()) Timer {
	return c.add(&fakeTimer{at: c.Now().Add(d), f: f})
}

func (c *Fake) add(t *fakeTimer) *fakeTimer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t.c, t.active = c, true
	c.seq++
	t.seq = c.seq
	c.waiters = append(c.waiters, t)
	close(c.changed)
	c.changed = make(chan struct{})
	return t
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.active
	t.active = false
	return was
}

// Advance moves the clock forward by d, firing everything due on the way, in order.
func (c *Fake) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	for {
		t := c.nextDueLocked(end)
		if t == nil {
			break
		}
		if t.at.After(c.now) {
			c.now = t.at
		}
		fireAt := c.now
		var run func()
		switch {
		case t.every > 0:
			// Next tick after this one; ticks the step skips entirely are dropped.
			for t.at = t.at.Add(t.every); !t.at.After(end); {
				t.at = t.at.Add(t.every)
			}
		default:
			t.active = false
		}
		if t.f != nil {
			run = t.f
		}
		ch := t.ch
		c.mu.Unlock()
		if run != nil {
			run() // on the advancing goroutine: a test knows it ran once Advance returns
		} else {
			select {
			case ch <- fireAt:
			default: // the reader has not taken the last one: as time.Ticker, drop it
			}
		}
		c.mu.Lock()
	}
	c.now = end
	c.pruneLocked()
	c.mu.Unlock()
}

// nextDueLocked is the earliest active timer due at or before end (ties: creation order).
func (c *Fake) nextDueLocked(end time.Time) *fakeTimer {
	var best *fakeTimer
	for _, t := range c.waiters {
		if !t.active || t.at.After(end) {
			continue
		}
		if best == nil || t.at.Before(best.at) || t.at.Equal(best.at) && t.seq < best.seq {
			best = t
		}
	}
	return best
}

func (c *Fake) pruneLocked() {
	live := c.waiters[:0]
	for _, t := range c.waiters {
		if t.active {
			live = append(live, t)
		}
	}
	clear(c.waiters[len(live):])
	c.waiters = live
}

// Pending lists the moments of the active timers and tickers, earliest first (for tests that
// check what the code under test is waiting for).
func (c *Fake) Pending() []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []time.Time
	for _, t := range c.waiters {
		if t.active {
			out = append(out, t.at)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Before(out[j]) })
	return out
}

// Changed returns a channel closed the next time a timer, ticker or after-func is created.
func (c *Fake) Changed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}
