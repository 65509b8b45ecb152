package harness

import (
	"net/http"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/buzz-harness/buzz/internal/clock"
	"github.com/buzz-harness/buzz/internal/protocol/turnmetric"
)

// Prometheus metrics (--metrics-addr): one registry per harness. Counters are bumped where the
// thing they count happens (the loop, a turn goroutine, the relay session); every gauge reads
// the snapshot the loop publishes once a second (loopSnapshot), never the loop's own state.
// docs/operations.md lists every metric with its alerts.

// Turn outcome labels of buzz_acp_turns_total.
const (
	OutcomeAnswered  = "answered"  // the turn ended and its batch is done
	OutcomeFallback  = "fallback"  // silent: the safety net posted the agent's final text (reply.go)
	OutcomeSilent    = "silent"    // silent: the safety net posted a failure notice saying why
	OutcomeFailed    = "failed"    // the agent failed; the batch is retried or dead-lettered
	OutcomeCancelled = "cancelled" // the owner cancelled or rotated, or the channel was left
)

// Session resume outcome labels of buzz_acp_session_resumes_total.
const (
	ResumeLoaded   = "loaded"    // session/load took the remembered session
	ResumeResumed  = "resumed"   // session/resume took it
	ResumeFellBack = "fell_back" // the agent refused it (or failed twice): a new session instead
)

type opsMetrics struct {
	reg      *prometheus.Registry
	turns    *prometheus.CounterVec
	latency  prometheus.Histogram
	resumes  *prometheus.CounterVec
	spawns   prometheus.Counter
	respawns prometheus.Counter
	sleeps   prometheus.Counter
	wakes    prometheus.Counter
	// readies counts relay sessions that came up; all but the first are reconnects.
	readies    atomic.Int64
	reconnects prometheus.Counter
	tokens     *prometheus.CounterVec
	cost       *prometheus.CounterVec
	refused    prometheus.Counter

	snap atomic.Pointer[loopSnapshot]
}

// loopSnapshot is what the gauges show: the loop writes a new one every second.
type loopSnapshot struct {
	queued   int       // events waiting for a turn, over every conversation
	oldest   time.Time // when the oldest of them arrived (zero: none)
	running  int       // turns running
	sessions int       // live ACP sessions over every agent process
	agents   map[string]int
}

// Agent state labels of buzz_acp_agents.
var agentStates = []string{"ready", "busy", "starting", "asleep", "down"}

func newOpsMetrics(clk clock.Clock) *opsMetrics {
	m := &opsMetrics{reg: prometheus.NewRegistry()}
	m.snap.Store(&loopSnapshot{})
	m.turns = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "buzz_acp_turns_total",
		Help: "Finished turns by outcome (answered, fallback, silent, failed, cancelled)."}, []string{"outcome"})
	for _, o := range []string{OutcomeAnswered, OutcomeFallback, OutcomeSilent, OutcomeFailed, OutcomeCancelled} {
		m.turns.WithLabelValues(o)
	}
	m.latency = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "buzz_acp_event_prompt_latency_seconds",
		Help:    "From an event's arrival at the harness to the prompt carrying it being sent to the agent.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}})
	m.resumes = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "buzz_acp_session_resumes_total",
		Help: "Attempts to reopen a remembered session, by outcome (loaded, resumed, fell_back)."}, []string{"outcome"})
	for _, o := range []string{ResumeLoaded, ResumeResumed, ResumeFellBack} {
		m.resumes.WithLabelValues(o)
	}
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	m.spawns = counter("buzz_acp_agent_spawns_total", "Agent processes started and initialized.")
	m.respawns = counter("buzz_acp_agent_respawns_total", "Agent processes started again after one crashed or failed to start.")
	m.sleeps = counter("buzz_acp_agent_sleeps_total", "Idle agent processes stopped by --idle-pool-sleep.")
	m.wakes = counter("buzz_acp_agent_wakes_total", "Sleeping agent slots started for waiting work (--lazy-pool, --idle-pool-sleep).")
	m.reconnects = counter("buzz_acp_relay_reconnects_total", "Relay sessions re-established after the first.")
	m.refused = counter("buzz_acp_budget_refusals_total", "Batches answered with a spend-cap notice instead of a turn.")
	m.tokens = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "buzz_acp_tokens_total",
		Help: "Tokens the agent reported per turn, by agent and type (input, output, cache_read, cache_write)."}, []string{"agent", "type"})
	m.cost = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "buzz_acp_cost_usd_total",
		Help: "Cost in USD the agent reported per turn (usage_update), by agent."}, []string{"agent"})

	gauge := func(name, help string, f func(s *loopSnapshot) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return f(m.snap.Load()) })
	}
	m.reg.MustRegister(m.turns, m.latency, m.resumes, m.spawns, m.respawns, m.sleeps, m.wakes, m.reconnects,
		m.refused, m.tokens, m.cost,
		gauge("buzz_acp_queue_depth", "Events waiting for a turn.", func(s *loopSnapshot) float64 { return float64(s.queued) }),
		gauge("buzz_acp_queue_oldest_wait_seconds", "How long the oldest waiting event has waited (0: none waits).", func(s *loopSnapshot) float64 {
			if s.oldest.IsZero() {
				return 0
			}
			return max(0, clk.Now().Sub(s.oldest).Seconds())
		}),
		gauge("buzz_acp_turns_running", "Turns running now.", func(s *loopSnapshot) float64 { return float64(s.running) }),
		gauge("buzz_acp_sessions_live", "Live ACP sessions over every agent process.", func(s *loopSnapshot) float64 { return float64(s.sessions) }),
		agentsCollector{m: m, desc: prometheus.NewDesc("buzz_acp_agents", "Agent slots by state (ready, busy, starting, asleep, down).", []string{"state"}, nil)},
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

// agentsCollector reports buzz_acp_agents{state} from the latest snapshot.
type agentsCollector struct {
	m    *opsMetrics
	desc *prometheus.Desc
}

func (c agentsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c agentsCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.m.snap.Load()
	for _, st := range agentStates {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(s.agents[st]), st)
	}
}

// MetricsHandler serves the harness's metrics in the Prometheus text format.
func (h *Harness) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(h.metrics.reg, promhttp.HandlerOpts{})
}

// outcomeLabel names a finished turn's outcome in buzz_acp_turns_total; "" is not counted here:
// a turn cancelled to merge a new message (its events run in the next turn), and a turn the
// reply safety net checks, which checked counts once it has decided.
func outcomeLabel(o turnOutcome) string {
	switch o {
	case turnDone, turnAnsweredLate:
		return OutcomeAnswered
	case turnStopped:
		return OutcomeCancelled
	case turnFailed, turnResumeLost:
		return OutcomeFailed
	}
	return ""
}

// turnEnded counts a finished turn.
func (m *opsMetrics) turnEnded(o turnOutcome) {
	if l := outcomeLabel(o); l != "" {
		m.turns.WithLabelValues(l).Inc()
	}
}

// checked counts a turn the reply safety net decided on.
func (m *opsMetrics) checked(k replyKind) {
	l := OutcomeAnswered
	switch k {
	case replyFallback:
		l = OutcomeFallback
	case replyNotice:
		l = OutcomeSilent
	}
	m.turns.WithLabelValues(l).Inc()
}

// prompted observes, for each event of a batch, how long it waited for the prompt now sent.
func (m *opsMetrics) prompted(now time.Time, b *Batch) {
	for _, it := range b.Items {
		m.latency.Observe(max(0, now.Sub(it.ReceivedAt).Seconds()))
	}
}

// resumeOutcome is the label of a remembered session reopened with method.
func resumeOutcome(method string) string {
	if method == "session/resume" {
		return ResumeResumed
	}
	return ResumeLoaded
}

// resumed counts a resume outcome.
func (m *opsMetrics) resumed(outcome string) { m.resumes.WithLabelValues(outcome).Inc() }

// relayReady counts a relay session that came up (LiveConfig.OnReady).
func (m *opsMetrics) relayReady() {
	if m.readies.Add(1) > 1 {
		m.reconnects.Inc()
	}
}

// used counts a turn's reported usage for agent.
func (m *opsMetrics) used(agent string, c *turnmetric.Counts) {
	add := func(typ string, n *uint64) {
		if n != nil {
			m.tokens.WithLabelValues(agent, typ).Add(float64(*n))
		}
	}
	add("input", c.InputTokens)
	add("output", c.OutputTokens)
	add("cache_read", c.CacheReadTokens)
	add("cache_write", c.CacheWriteTokens)
	if c.CostUSD != nil {
		m.cost.WithLabelValues(agent).Add(*c.CostUSD)
	}
}

// agentLabel names the agent in the usage metrics: its ACP name, else its command's.
func agentLabel(id AgentIdentity, command string) string {
	if id.Name != "" {
		return id.Name
	}
	return filepath.Base(command)
}

// publishSnapshot hands the gauges the loop's current state.
func (h *Harness) publishSnapshot() {
	s := &loopSnapshot{agents: map[string]int{}}
	for _, c := range h.convs.m {
		if n := c.q.waiting(); n > 0 {
			s.queued += n
			if head := c.q.head(); s.oldest.IsZero() || head.Before(s.oldest) {
				s.oldest = head
			}
		}
		if c.turn != nil {
			s.running++
		}
		s.sessions += len(c.sessions)
	}
	for _, sl := range h.pool.slots {
		s.agents[sl.state()]++
	}
	h.metrics.snap.Store(s)
}
