package harness

import (
	"context"
	"time"

	"github.com/buzz-harness/buzz/internal/observer"
)

// Pools that sleep. With --lazy-pool the harness subscribes and journals first and starts an
// agent process only when work waits for one; with --idle-pool-sleep an agent idle that long is
// stopped (its conversations' sessions stay in the session store, so the next turn reopens them
// with session/load or session/resume) and started again by the next mention. With
// --exit-after-inactivity the whole harness exits 0 once nothing has happened that long and
// nothing is left in the journal, for socket-activated or scale-to-zero deployments; the next
// start catches up from the journal's watermark or BUZZ_ACP_REPLAY_FLOOR.
//
// Every timer here is the harness clock, read on the loop's one-second tick.

// state names a slot for the buzz_acp_agents gauge.
func (s *slot) state() string {
	switch {
	case s.busy:
		return "busy"
	case s.ready:
		return "ready"
	case s.starting:
		return "starting"
	case s.asleep:
		return "asleep"
	}
	return "down" // crashed, waiting for its respawn
}

// wakeForWork starts sleeping slots while conversations wait for an agent that no awake slot
// can give them: one slot per waiting conversation beyond the idle and starting ones.
func (h *Harness) wakeForWork(ctx context.Context) {
	var asleep []*slot
	free := 0
	for _, s := range h.pool.slots {
		switch {
		case s.asleep:
			asleep = append(asleep, s)
		case s.starting, s.ready && !s.busy:
			free++
		}
	}
	if len(asleep) == 0 {
		return
	}
	want := h.convs.readyCount(h.clock.Now())
	for _, s := range asleep {
		if free >= want {
			return
		}
		s.asleep = false
		free++
		h.metrics.wakes.Inc()
		h.log.Info("waking agent for waiting work", "slot", s.idx)
		h.pool.startSpawn(ctx, s)
	}
}

// readyCount is how many conversations have events that may run now and no turn in flight.
func (t *conversations) readyCount(now time.Time) int {
	n := 0
	for _, c := range t.m {
		if q := &c.q; !q.inFlight && q.waiting() > 0 && !now.Before(q.notBefore) {
			n++
		}
	}
	return n
}

// sleepIdle stops every agent idle for --idle-pool-sleep: ready, no turn on it, no permission
// question open on any of its sessions. Its live sessions are dropped from the slot but kept in
// the session store. The process is shut down politely off the loop.
func (h *Harness) sleepIdle(now time.Time) {
	for _, s := range h.pool.slots {
		if h.cfg.IdlePoolSleep <= 0 || s.busy || !s.ready || now.Sub(s.usedAt) < h.cfg.IdlePoolSleep || h.questionsOn(s) {
			continue
		}
		proc := s.proc
		h.convs.forgetSlot(s)
		h.pool.record.drop(s.idx)
		s.proc, s.ready, s.heartbeat, s.asleep = nil, false, nil, true
		s.gen++ // its exit is expected: the watcher's report is ignored
		h.metrics.sleeps.Inc()
		h.log.Info("agent idle; stopping it until the next mention", "slot", s.idx, "idle", now.Sub(s.usedAt).Round(time.Second))
		h.bus.Publish(observer.Scope{}, observer.AgentExited{Slot: s.idx, Reason: "asleep"})
		if proc != nil {
			h.tasks.Go(func() {
				if err := proc.Close(); err != nil {
					h.log.Warn("sleeping agent did not stop cleanly", "slot", s.idx, "err", err)
				}
			})
		}
	}
}

// questionsOn reports whether a permission question is open in a conversation with a session on s.
func (h *Harness) questionsOn(s *slot) bool {
	for _, c := range h.convs.m {
		if len(c.questions) > 0 && (c.sessions[s] != nil || c.turn != nil && c.turn.slot == s) {
			return true
		}
	}
	return false
}

// checkInactivity ends the run (Run returns nil, buzz-acp exits 0) once the harness has been
// quiet for --exit-after-inactivity: no turn, reply check, heartbeat, queued or held event,
// open question, and nothing pending in the journal.
func (h *Harness) checkInactivity(now time.Time) {
	if h.cfg.ExitAfterInactivity <= 0 {
		return
	}
	if !h.quiet() {
		h.activeAt = now
		return
	}
	if now.Sub(h.activeAt) >= h.cfg.ExitAfterInactivity {
		h.log.Info("no activity; exiting", "for", h.cfg.ExitAfterInactivity)
		h.cfg.ExitAfterInactivity = 0 // once
		h.shutdown()
	}
}

func (h *Harness) quiet() bool {
	if h.heartbeatBusy || len(h.siblings.held) > 0 {
		return false
	}
	for _, c := range h.convs.m {
		if c.turn != nil || c.check != nil || !c.q.idle() || len(c.questions) > 0 {
			return false
		}
	}
	return len(h.jrnl.Pending()) == 0
}
