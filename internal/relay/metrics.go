package relay

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/buzz-harness/buzz/internal/protocol"
)

// Prometheus metrics, with upstream's names (docs/operations.md lists them with their alerts).
// One registry per Relay, never the global one: a test process runs many relays. Counters are
// bumped where the thing they count happens; the gauges are read at scrape time.
type metrics struct {
	reg          *prometheus.Registry
	received     prometheus.Counter
	stored       *prometheus.CounterVec // kind
	rejected     *prometheus.CounterVec // transport, reason
	processing   prometheus.Histogram
	fanout       prometheus.Histogram
	acquire      prometheus.Histogram
	backpressure prometheus.Counter
}

// Transport labels of buzz_events_rejected_total.
const (
	transportWS   = "ws"
	transportHTTP = "http"
)

func (v route) label() string {
	if v == viaBridge {
		return transportHTTP
	}
	return transportWS
}

func newMetrics() *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.received = prometheus.NewCounter(prometheus.CounterOpts{Name: "buzz_events_received_total",
		Help: "Client events that reached the ingest rules (WebSocket EVENT frames and POST /events)."})
	m.stored = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "buzz_events_stored_total",
		Help: "Events committed to the store, by kind (client events and the relay's own)."}, []string{"kind"})
	m.rejected = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "buzz_events_rejected_total",
		Help: "Client events refused, by transport (ws, http) and NIP-01 reason prefix."}, []string{"transport", "reason"})
	m.processing = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "buzz_event_processing_seconds",
		Help:    "From an event reaching the ingest rules to its answer: rules, the store's commit and fan-out.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 10}})
	m.fanout = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "buzz_fanout_recipients",
		Help:    "Connections a stored or ephemeral event was delivered to, per event.",
		Buckets: []float64{0, 1, 2, 5, 10, 25, 50, 100, 250, 1000}})
	m.acquire = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "buzz_db_pool_acquire_duration_seconds",
		Help:    "Wait for a PostgreSQL pool connection (--database only).",
		Buckets: []float64{.0001, .0005, .001, .005, .01, .05, .1, .5, 1, 5}})
	m.backpressure = prometheus.NewCounter(prometheus.CounterOpts{Name: "buzz_ws_backpressure_disconnects_total",
		Help: "WebSocket clients dropped because live events piled up unread (--max-queued-bytes)."})
	m.reg.MustRegister(m.received, m.stored, m.rejected, m.processing, m.fanout, m.acquire, m.backpressure,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// watch registers the gauges, which read r's state at scrape time.
func (m *metrics) watch(r *Relay) {
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
	}
	m.reg.MustRegister(
		gauge("buzz_ws_connections_active", "Open WebSocket connections.", func() float64 {
			r.connsMu.RLock()
			defer r.connsMu.RUnlock()
			return float64(len(r.conns))
		}),
		gauge("buzz_subscriptions_active", "Live REQ subscriptions over every connection.", func() float64 {
			n := 0
			for _, c := range r.connections() {
				n += len(c.liveSubs())
			}
			return float64(n)
		}),
		gauge("buzz_db_up", "1 when the store answers a ping within a second (what /readyz checks), else 0.", func() float64 {
			return boolGauge(r.storeReachable() == nil)
		}),
		gauge("buzz_db_feed_live", "1 while this node receives other nodes' changes (--database), else 0; 1 on SQLite.", func() float64 {
			return boolGauge(r.shared == nil || r.shared.Live())
		}),
	)
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// MetricsHandler serves the relay's metrics in the Prometheus text format.
func (r *Relay) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(r.metrics.reg, promhttp.HandlerOpts{})
}

// answered counts one client event's answer and how long it took since in reached the rules.
func (m *metrics) answered(in *ingest, res result) {
	m.processing.Observe(time.Since(in.start).Seconds())
	if !res.OK {
		reason := string(protocol.ReasonOf(res.Msg))
		if reason == "" {
			reason = "other"
		}
		m.rejected.WithLabelValues(in.from.via.label(), reason).Inc()
	}
}

// storedKind counts one committed event. Kinds are bounded by the relay's allow-list.
func (m *metrics) storedKind(kind int) { m.stored.WithLabelValues(strconv.Itoa(kind)).Inc() }
