package harness

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/buzz-harness/buzz/internal/clock"
	"github.com/buzz-harness/buzz/internal/protocol/turnmetric"
)

var metricName = regexp.MustCompile(`\bbuzz_acp_[a-z_]+`)

// TestOperationsDocAndDashboardNameOnlyMetricsTheHarnessExports keeps docs/operations.md and the
// Grafana dashboard in step with the registry: every metric documented, none invented.
func TestOperationsDocAndDashboardNameOnlyMetricsTheHarnessExports(t *testing.T) {
	m := newOpsMetrics(clock.NewFake(t0))
	m.used("agent", &turnmetric.Counts{InputTokens: turnmetric.U64(1), CostUSD: turnmetric.F64(1)})
	families, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]bool{}
	for _, f := range families {
		if n := f.GetName(); strings.HasPrefix(n, "buzz_acp_") {
			exported[n] = true
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
		for _, n := range metricName.FindAllString(text, -1) {
			base := n
			for _, suffix := range []string{"_bucket", "_count", "_sum"} {
				base = strings.TrimSuffix(base, suffix)
			}
			if !exported[n] && !exported[base] {
				t.Errorf("%s names %s, which the harness does not export", file, n)
			}
		}
	}
}
