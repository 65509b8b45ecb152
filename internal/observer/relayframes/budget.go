package relayframes

import (
	"time"

	"github.com/buzz-harness/buzz/internal/protocol/observerframe"
)

// The relay refuses telemetry over observerframe.TelemetryPerSecond per agent, after this side
// has encrypted and signed each frame and the relay has verified it; a hundred conversations
// warming at once sent several hundred frames in a second, most of them refused. So the sender
// keeps under the rate itself and drops the excess before any of that work. The bulk (ACP lines,
// and turn_liveness, one per running turn per tick) may fill only part of any second, so a burst
// of it cannot crowd out the few frames a client's state hangs on (turn_started / turn_completed feed Desktop's "N working" badge, control_result
// answers the owner's Stop).
const (
	budgetWindow = time.Second
	// budgetFrames leaves the relay's limit some slack: the relay counts in its own windows, by
	// arrival time, not in this side's.
	budgetFrames = observerframe.TelemetryPerSecond * 9 / 10
	budgetBulk   = observerframe.TelemetryPerSecond * 7 / 10
)

// budget is a sliding-window rate limit: at most budgetFrames frames in any budgetWindow, and
// bulk frames only while fewer than budgetBulk went in it.
type budget struct {
	sent []time.Time // send times within the last window, oldest first
}

// allow reports whether a frame of kind may go at now, and if so counts it.
func (b *budget) allow(kind string, now time.Time) bool {
	cut := now.Add(-budgetWindow)
	old := 0
	for old < len(b.sent) && !b.sent[old].After(cut) {
		old++
	}
	b.sent = b.sent[:copy(b.sent, b.sent[old:])]
	limit := budgetFrames
	switch kind {
	case observerframe.KindACPRead, observerframe.KindACPWrite, observerframe.KindTurnLiveness:
		limit = budgetBulk
	}
	if len(b.sent) >= limit {
		return false
	}
	b.sent = append(b.sent, now)
	return true
}
