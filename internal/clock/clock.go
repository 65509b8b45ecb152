// Package clock is the time a component runs on: the real one in production, a fake one that a
// test moves by hand. Everything in the harness that waits (the same-second hold, heartbeats,
// typing and presence, permission timeouts, retry backoff) and every timestamp it signs comes
// from one Clock in its Config, so a test can run an hour of behaviour in a millisecond.
//
// The shape follows what a timer-using component needs and no more: Now, timers, tickers and
// after-funcs, each stoppable.
package clock

import "time"

// Clock tells the time and makes timers.
type Clock interface {
	Now() time.Time
	// NewTimer fires once, d from now, on its channel.
	NewTimer(d time.Duration) Timer
	// NewTicker fires every d on its channel (dropping ticks a slow reader misses).
	NewTicker(d time.Duration) Ticker
	// AfterFunc calls f d from now, unless stopped first (on its own goroutine for the real
	// clock; f must not block).
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending single event. C is nil for an AfterFunc timer.
type Timer interface {
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it stopped it.
	Stop() bool
}

// Ticker is a repeating event.
type Ticker interface {
	C() <-chan time.Time
	Stop()
}

// Real is the system clock.
func Real() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

func (realClock) NewTicker(d time.Duration) Ticker { return realTicker{time.NewTicker(d)} }

func (realClock) AfterFunc(d time.Duration, f func()) Timer { return realTimer{time.AfterFunc(d, f)} }

type realTimer struct{ t *time.Timer }

func (t realTimer) C() <-chan time.Time { return t.t.C }
func (t realTimer) Stop() bool          { return t.t.Stop() }

type realTicker struct{ t *time.Ticker }

func (t realTicker) C() <-chan time.Time { return t.t.C }
func (t realTicker) Stop()               { t.t.Stop() }

// After is a convenience: a channel that receives once, d from now on c.
func After(c Clock, d time.Duration) <-chan time.Time { return c.NewTimer(d).C() }
