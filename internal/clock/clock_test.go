package clock

import (
	"testing"
	"time"
)

var start = time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)

func TestFakeTimerFiresOnlyOnceItsMomentIsPassed(t *testing.T) {
	c := NewFake(start)
	tm := c.NewTimer(10 * time.Second)
	c.Advance(9 * time.Second)
	select {
	case <-tm.C():
		t.Fatal("fired a second early")
	default:
	}
	c.Advance(time.Second)
	select {
	case at := <-tm.C():
		if !at.Equal(start.Add(10 * time.Second)) {
			t.Fatalf("fired at %v, want its own moment", at)
		}
	default:
		t.Fatal("did not fire at its moment")
	}
}

func TestFakeTickerDropsTicksAStepSpans(t *testing.T) {
	c := NewFake(start)
	tk := c.NewTicker(time.Second)
	c.Advance(5 * time.Second)
	n := 0
	for len(tk.C()) > 0 {
		<-tk.C()
		n++
	}
	if n != 1 {
		t.Fatalf("%d ticks buffered after one 5 s step, want 1 (as time.Ticker drops them)", n)
	}
	c.Advance(time.Second)
	if len(tk.C()) != 1 {
		t.Fatal("no tick one interval later")
	}
	if got := c.Pending(); len(got) != 1 || !got[0].Equal(start.Add(7*time.Second)) {
		t.Fatalf("next tick at %v, want start+7s", got)
	}
}

func TestFakeStoppedTimerNeverFires(t *testing.T) {
	c := NewFake(start)
	fired := make(chan struct{}, 1)
	tm := c.AfterFunc(time.Second, func() { fired <- struct{}{} })
	if !tm.Stop() {
		t.Fatal("Stop of an active timer reported false")
	}
	c.Advance(time.Minute) // after-funcs run inside Advance
	select {
	case <-fired:
		t.Fatal("a stopped after-func ran")
	default:
	}
	if len(c.Pending()) != 0 {
		t.Fatal("a stopped timer is still pending")
	}
}

func TestFakeAfterFuncRunsAndNowReadsItsMoment(t *testing.T) {
	c := NewFake(start)
	var at time.Time
	c.AfterFunc(3*time.Second, func() { at = c.Now() })
	c.Advance(3 * time.Second)
	if !at.Equal(start.Add(3 * time.Second)) {
		t.Fatalf("after-func saw %v, want its own moment (run before Advance returns)", at)
	}
}

func TestFakeChangedSignalsANewTimer(t *testing.T) {
	c := NewFake(start)
	ch := c.Changed()
	c.NewTimer(time.Second)
	select {
	case <-ch:
	default:
		t.Fatal("Changed not closed by a new timer")
	}
}
