package relay_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/opshttp/opstest"
	"github.com/buzz-harness/buzz/internal/relay"
	"github.com/buzz-harness/buzz/internal/relay/relaytest"
	"github.com/buzz-harness/buzz/internal/relay/store"
)

// scrape fetches the relay's metrics over HTTP, as Prometheus would.
type scrape map[string]float64

func scrapeRelay(t *testing.T, r *relay.Relay) scrape {
	t.Helper()
	srv := httptest.NewServer(r.MetricsHandler())
	defer srv.Close()
	return opstest.Scrape(t, srv.URL)
}

// get is one series' value: name{labels} exactly as exposed (labels sorted by name), 0 if absent.
func (s scrape) get(series string) float64 { return s[series] }

func TestMetricsMoveWithRealEventsOverWebSocketAndBridge(t *testing.T) {
	s := relaytest.Start(t)
	alice := newUser()
	ch := s.CreateChannel(t, alice.sk, "metrics", false) // received 1 (http), stored 9007 and the relay's 39000s

	sub := dialRaw(t, s.URL)
	sub.mustAuth(newUser().sk, s.URL)
	sub.send("REQ", "live", map[string]any{"kinds": []int{9}, "#h": []string{ch}})
	sub.readUntil("EOSE")

	pub := dialRaw(t, s.URL)
	pub.mustAuth(alice.sk, s.URL)
	if ok := pub.publish(alice.sk, msg(ch, "hello")); ok[2] != true {
		t.Fatalf("publish: %v", ok)
	}
	if got := sub.readUntil("EVENT"); got[1] != "live" {
		t.Fatalf("subscriber got %v", got)
	}
	bad := nostr.Event{Kind: 1, Content: "x", CreatedAt: nostr.Now(), Tags: nostr.Tags{}}
	bad.Sign(alice.sk)
	bad.Sig = strings.Repeat("ab", 64)
	pub.send("EVENT", bad)
	if ok := pub.readUntil("OK"); ok[2] != false {
		t.Fatalf("bad signature accepted: %v", ok)
	}
	unknown := nostr.Event{Kind: 31234, Tags: nostr.Tags{{"d", "x"}}}
	if status, res := s.TryPublish(t, alice.sk, &unknown); status == http.StatusOK || !strings.HasPrefix(res.Error, "restricted:") {
		t.Fatalf("unknown kind over the bridge: %d %+v", status, res)
	}

	m := scrapeRelay(t, s.Relay)
	for series, want := range map[string]float64{
		"buzz_events_received_total":                                       4,
		`buzz_events_stored_total{kind="9"}`:                               1,
		`buzz_events_stored_total{kind="9007"}`:                            1,
		`buzz_events_rejected_total{reason="invalid",transport="ws"}`:      1,
		`buzz_events_rejected_total{reason="restricted",transport="http"}`: 1,
		"buzz_event_processing_seconds_count":                              4,
		"buzz_ws_connections_active":                                       2,
		"buzz_subscriptions_active":                                        1,
		"buzz_db_up":                                                       1,
		"buzz_db_feed_live":                                                1,
		"buzz_ws_backpressure_disconnects_total":                           0,
		"buzz_db_pool_acquire_duration_seconds_count":                      0, // SQLite has no pool
	} {
		if got := m.get(series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	if m.get(`buzz_events_stored_total{kind="39000"}`) < 1 {
		t.Error("the relay's own 39000 for the new channel is not counted as stored")
	}
	// Every stored event fans out once; the message reached its one subscriber.
	if n, sum := m.get("buzz_fanout_recipients_count"), m.get("buzz_fanout_recipients_sum"); n < 2 || sum != 1 {
		t.Errorf("fan-out: %v events to %v recipients, want ≥ 2 events and 1 recipient", n, sum)
	}

	sub.ws.CloseNow()
	eventually(t, "the closed connection to leave the gauges", func() bool {
		m := scrapeRelay(t, s.Relay)
		return m.get("buzz_ws_connections_active") == 1 && m.get("buzz_subscriptions_active") == 0
	})
}

func TestReadinessFailsWhileTheSQLiteStoreIsClosedAndLivenessHolds(t *testing.T) {
	var st store.Store
	s := relaytest.StartWith(t, relay.WithStore(func(inner store.Store) store.Store { st = inner; return inner }, nil))
	if code, body := probe(t, s.HTTPURL+"/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz on a fresh relay: %d %s", code, body)
	}
	st.Close()
	eventually(t, "/readyz to fail with the store closed", func() bool { // after the last answer's reuse
		code, body := probe(t, s.HTTPURL+"/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "database unreachable")
	})
	if code, _ := probe(t, s.HTTPURL+"/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz with the store closed: %d, want 200 (the process still serves)", code)
	}
	if got := scrapeRelay(t, s.Relay).get("buzz_db_up"); got != 0 {
		t.Fatalf("buzz_db_up = %v with the store closed, want 0", got)
	}
}

func probe(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

var relayMetricName = regexp.MustCompile(`\bbuzz_[a-z_]+`)

// TestOperationsDocAndDashboardNameOnlyMetricsTheRelayExports keeps docs/operations.md and the
// Grafana dashboard in step with the relay's registry: every metric documented, none invented.
func TestOperationsDocAndDashboardNameOnlyMetricsTheRelayExports(t *testing.T) {
	s := relaytest.Start(t)
	alice := newUser()
	s.CreateChannel(t, alice.sk, "doc", false)           // stored
	s.TryPublish(t, alice.sk, &nostr.Event{Kind: 31234}) // rejected
	exported := map[string]bool{}
	srv := httptest.NewServer(s.Relay.MetricsHandler())
	defer srv.Close()
	_, body := probe(t, srv.URL)
	for _, line := range strings.Split(body, "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[1] == "TYPE" && strings.HasPrefix(f[2], "buzz_") {
			exported[f[2]] = true
		}
	}
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	for n := range exported {
		if !strings.Contains(string(doc), "`"+n+"`") {
			t.Errorf("docs/operations.md does not list %s", n)
		}
	}
	dash, err := os.ReadFile("../../docs/dashboards/buzz-acp.json")
	if err != nil {
		t.Fatal(err)
	}
	if !json.Valid(dash) {
		t.Fatal("docs/dashboards/buzz-acp.json is not JSON")
	}
	for file, text := range map[string]string{"docs/operations.md": string(doc), "docs/dashboards/buzz-acp.json": string(dash)} {
		for _, n := range relayMetricName.FindAllString(text, -1) {
			if strings.HasPrefix(n, "buzz_acp_") {
				continue // the harness's (internal/harness checks those)
			}
			base := n
			for _, suffix := range []string{"_bucket", "_count", "_sum"} {
				base = strings.TrimSuffix(base, suffix)
			}
			if !exported[n] && !exported[base] {
				t.Errorf("%s names %s, which the relay does not export", file, n)
			}
		}
	}
	if len(exported) < 11 {
		t.Fatalf("only %d relay metrics exposed: %v", len(exported), exported)
	}
}

// A live subscriber that stops reading while big events keep coming is disconnected once its
// queue passes the cap, and that disconnect is what buzz_ws_backpressure_disconnects_total
// counts: once, however many sends failed after it.
func TestBackpressureDisconnectOfAStalledLiveSubscriberIsCountedOnce(t *testing.T) {
	s := relaytest.StartWith(t, func(c *relay.Config) { c.MaxQueuedBytes = 256 << 10 })
	alice := newUser()
	ch := s.CreateChannel(t, alice.sk, "flood", false)
	stalled, _ := authedRaw(t, s)
	stalled.send("REQ", "live", map[string]any{"kinds": []int{9}, "#h": []string{ch}, "limit": 0})
	stalled.readUntil("EOSE") // subscribed; from here on it never reads

	// Loopback socket buffers take a few MB before the relay's writer blocks; 40 × 200 KB is
	// well past them and the 256 KiB cap.
	pub := dialRaw(t, s.URL)
	pub.mustAuth(alice.sk, s.URL)
	for i := 0; i < 40 && relay.Conns(s.Relay) == 2; i++ {
		if ok := pub.publish(alice.sk, msg(ch, fmt.Sprintf("%d %s", i, strings.Repeat("x", 200_000)))); ok[2] != true {
			t.Fatalf("publish %d: %v", i, ok)
		}
	}
	eventually(t, "the relay to drop the stalled subscriber", func() bool { return relay.Conns(s.Relay) == 1 })
	if got := scrapeRelay(t, s.Relay).get("buzz_ws_backpressure_disconnects_total"); got != 1 {
		t.Fatalf("buzz_ws_backpressure_disconnects_total = %v after one stalled subscriber was dropped, want 1", got)
	}
}
