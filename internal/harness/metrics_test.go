package harness

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/acp"
)

func metricTurn(sess *convSession, usage string) turnResult {
	ev := &nostr.Event{ID: "e1", Kind: 9, Tags: nostr.Tags{{"h", "c"}}}
	q := newTestQueue()
	q.Push(convKey{Channel: "c"}, ev, time.Now())
	b, _ := q.Next(time.Now())
	r := turnResult{in: turnInput{channel: channel{ID: "c"}, batch: b, turnID: "t"}, session: sess, stop: "end_turn", started: time.Now()}
	if usage != "" {
		r.usage = json.RawMessage(usage)
	}
	return r
}

func TestTurnMetricOfANewSessionIsReliableAndItsTotalsRunOn(t *testing.T) {
	sess := &convSession{ID: "s1"}
	m, ok := turnMetric(metricTurn(sess, `{"inputTokens":10,"outputTokens":5,"totalTokens":15}`), "h", nil, time.Now())
	if !ok || !m.DeltaReliable || *m.Turn.TotalTokens != 15 || *m.Cumulative.TotalTokens != 15 || *m.TurnSeq != 1 {
		t.Fatalf("first metric %+v", m)
	}
	m, _ = turnMetric(metricTurn(sess, `{"inputTokens":1,"outputTokens":2,"totalTokens":3}`), "h", nil, time.Now())
	if *m.Turn.TotalTokens != 3 || *m.Cumulative.TotalTokens != 18 || *m.TurnSeq != 2 {
		t.Fatalf("second metric turn %+v cumulative %+v seq %d", m.Turn, m.Cumulative, *m.TurnSeq)
	}
}

func TestTurnMetricOfAResumedSessionHasNoTotalsAndIsNotReliable(t *testing.T) {
	sess := &convSession{ID: "s1", Resumed: true}
	m, ok := turnMetric(metricTurn(sess, `{"totalTokens":7}`), "h", nil, time.Now())
	if !ok || m.DeltaReliable || m.Cumulative != nil || *m.Turn.TotalTokens != 7 || m.Turn.InputTokens != nil {
		t.Fatalf("resumed metric %+v (turn %+v)", m, m.Turn)
	}
}

func TestTurnMetricCostIsTheDeltaOfTheSessionsRunningCost(t *testing.T) {
	sess := &convSession{ID: "s1"}
	cost := 0.4
	m, _ := turnMetric(metricTurn(sess, `{"totalTokens":1}`), "h", &cost, time.Now())
	if math.Abs(*m.Turn.CostUSD-0.4) > 1e-9 {
		t.Fatalf("first turn cost %v", *m.Turn.CostUSD)
	}
	cost = 0.5
	m, _ = turnMetric(metricTurn(sess, ""), "h", &cost, time.Now()) // cost alone is usage too
	if m.Turn.CostUSD == nil || math.Abs(*m.Turn.CostUSD-0.1) > 1e-9 || math.Abs(*m.Cumulative.CostUSD-0.5) > 1e-9 {
		t.Fatalf("second turn cost %+v cumulative %+v", m.Turn, m.Cumulative)
	}
}

func TestTurnMetricIsSkippedWithoutUsage(t *testing.T) {
	for name, usage := range map[string]string{"none": "", "null": "null", "not the ACP shape": `{"inputTokens":"many"}`, "empty": `{}`} {
		if _, ok := turnMetric(metricTurn(&convSession{ID: "s"}, usage), "h", nil, time.Now()); ok {
			t.Errorf("%s: a metric was built", name)
		}
	}
}

func TestCostTrackerReadsUSDUsageUpdatesOnly(t *testing.T) {
	var c costTracker
	upd := func(kind, raw string, replay bool) acp.SessionUpdate {
		return acp.SessionUpdate{SessionID: "s", Kind: kind, Raw: json.RawMessage(raw), Replay: replay}
	}
	c.observe(upd("usage_update", `{"sessionId":"s","update":{"sessionUpdate":"usage_update","cost":{"amount":1.5,"currency":"EUR"}}}`, false))
	c.observe(upd("usage_update", `{"sessionId":"s","update":{"sessionUpdate":"usage_update","cost":{"amount":2,"currency":"USD"}}}`, true))
	if _, ok := c.get("s"); ok {
		t.Fatal("a non-USD or replayed cost was taken")
	}
	c.observe(upd("usage_update", `{"sessionId":"s","update":{"sessionUpdate":"usage_update","used":5,"size":9,"cost":{"amount":0.75,"currency":"USD"}}}`, false))
	if v, ok := c.get("s"); !ok || v != 0.75 {
		t.Fatalf("cost = %v %v, want 0.75", v, ok)
	}
}
