package turnmetric

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
)

const (
	agentSK = "0000000000000000000000000000000000000000000000000000000000000001"
	agentPK = "79be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798"
	ownerSK = "0000000000000000000000000000000000000000000000000000000000000002"
	ownerPK = "c6047f9441ed7d6d3045406e95c07cd85c778e4b8cef3ca7abac09b95c709ee5"
	otherSK = "0000000000000000000000000000000000000000000000000000000000000003"
)

func sample() Metric {
	return Metric{
		Harness: "buzz-acp", Model: "claude-sonnet-4-5", ChannelID: "12345678-1234-1234-1234-123456789abc",
		SessionID: "sess-1", TurnID: "turn-7", TurnSeq: U64(7),
		Timestamp:     FormatTimestamp(time.Date(2026, 7, 1, 20, 11, 3, 213_000_000, time.UTC)),
		Turn:          &Counts{InputTokens: U64(1234), OutputTokens: U64(567), TotalTokens: U64(1801), CostUSD: F64(0.0123)},
		Cumulative:    &Counts{InputTokens: U64(45210), OutputTokens: U64(9876), TotalTokens: U64(55086), CostUSD: F64(0.41), CacheReadTokens: U64(40000)},
		DeltaReliable: true, StopReason: StopEndTurn,
	}
}

func TestTimestampIsRFC3339UTCWithMillis(t *testing.T) {
	at := time.Date(2026, 7, 1, 22, 11, 3, 213_456_789, time.FixedZone("x", 2*3600))
	if got := FormatTimestamp(at); got != "2026-07-01T20:11:03.213Z" {
		t.Fatalf("FormatTimestamp = %s", got)
	}
}

func TestBuildMakesAnOwnerOnlyEventTheOwnerDecodes(t *testing.T) {
	m := sample()
	ev, err := Build(agentSK, ownerPK, m, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Kind != 44200 || ev.PubKey != agentPK || ev.CreatedAt != 1782936663 {
		t.Fatalf("envelope kind=%d pubkey=%s created_at=%d", ev.Kind, ev.PubKey, ev.CreatedAt)
	}
	if len(ev.Tags) != 2 || strings.Join(ev.Tags[0], ",") != "p,"+ownerPK || strings.Join(ev.Tags[1], ",") != "agent,"+agentPK {
		t.Fatalf("tags = %v, want exactly p(owner) and agent(self)", ev.Tags)
	}
	if strings.Contains(ev.Content, "claude") || strings.Contains(ev.String(), "12345678-1234") {
		t.Fatal("usage details leak in clear")
	}
	got, err := Decode(ownerSK, &ev)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(got)
	b, _ := json.Marshal(m)
	if string(a) != string(b) {
		t.Fatalf("decoded\n %s\nwant\n %s", a, b)
	}
	if _, err := Decode(otherSK, &ev); err == nil {
		t.Fatal("a third party decoded the metric")
	}
}

func TestPayloadWireShape(t *testing.T) {
	m := Metric{Harness: "goose", Timestamp: "2026-07-01T20:11:03.213Z", Turn: &Counts{OutputTokens: U64(5)}}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"harness":"goose","model":null,"channelId":null,"sessionId":null,"turnId":null,"turnSeq":null,` +
		`"timestamp":"2026-07-01T20:11:03.213Z","turn":{"inputTokens":null,"outputTokens":5,"totalTokens":null,"costUsd":null},` +
		`"cumulative":null,"deltaReliable":false,"stopReason":null}`
	if string(b) != want {
		t.Fatalf("payload\n got %s\nwant %s", b, want)
	}
}

func TestDecodeIsLenientWhereTheSpecSaysSo(t *testing.T) {
	var m Metric
	in := `{"harness":"h","timestamp":"2026-07-01T20:11:03Z","stopReason":"refusal","outcome":"exploded",
		"terminalEvidence":"agent_exit","future":{"x":1},"turn":{"inputTokens":1}}`
	if err := json.Unmarshal([]byte(in), &m); err != nil {
		t.Fatal(err)
	}
	if !m.DeltaReliable || m.StopReason != StopUnknown || m.Outcome != "unknown" || m.TerminalEvidence != "agent_exit" || *m.Turn.InputTokens != 1 {
		t.Fatalf("decoded %+v", m)
	}
	if err := m.Validate(); err != nil {
		t.Fatalf("a lenient read must validate: %v", err)
	}
}

func TestBuildRefuses(t *testing.T) {
	mut := func(f func(*Metric)) Metric { m := sample(); f(&m); return m }
	cases := map[string]Metric{
		"no harness":            mut(func(m *Metric) { m.Harness = " " }),
		"no timestamp":          mut(func(m *Metric) { m.Timestamp = "" }),
		"bad timestamp":         mut(func(m *Metric) { m.Timestamp = "yesterday" }),
		"cumulative without id": mut(func(m *Metric) { m.SessionID = "" }),
		"cumulative w/o seq":    mut(func(m *Metric) { m.TurnSeq = nil }),
		"negative cost":         mut(func(m *Metric) { m.Turn.CostUSD = F64(-0.01) }),
		"unknown stop reason":   mut(func(m *Metric) { m.StopReason = "refusal" }),
		"bad outcome":           mut(func(m *Metric) { m.Outcome = "great" }),
		"half a pricing id":     mut(func(m *Metric) { m.PricingIdentity = &PricingIdentity{Authority: "api.openai.com"} }),
	}
	for name, m := range cases {
		if _, err := Build(agentSK, ownerPK, m, nil); err == nil {
			t.Errorf("%s: built", name)
		}
	}
	if _, err := Build(agentSK, agentPK, sample(), nil); err == nil {
		t.Error("owner == agent: built")
	}
	empty := Metric{Harness: "h", Timestamp: sample().Timestamp, Turn: &Counts{}}
	if _, err := Build(agentSK, ownerPK, empty, nil); !errors.Is(err, ErrNoUsage) {
		t.Errorf("no usage: err = %v, want ErrNoUsage", err)
	}
}

func TestDecodeRefusesBadEnvelopes(t *testing.T) {
	good, err := Build(agentSK, ownerPK, sample(), nil)
	if err != nil {
		t.Fatal(err)
	}
	resign := func(f func(*nostr.Event)) nostr.Event {
		ev := good
		ev.Tags = append(nostr.Tags{}, good.Tags...)
		f(&ev)
		if err := protocol.SignEvent(&ev, agentSK, nil); err != nil {
			t.Fatal(err)
		}
		return ev
	}
	cases := map[string]nostr.Event{
		"wrong kind":        resign(func(e *nostr.Event) { e.Kind = 24200 }),
		"no agent tag":      resign(func(e *nostr.Event) { e.Tags = e.Tags[:1] }),
		"agent tag differs": resign(func(e *nostr.Event) { e.Tags[1] = nostr.Tag{"agent", ownerPK} }),
		"two p tags":        resign(func(e *nostr.Event) { e.Tags = append(e.Tags, nostr.Tag{"p", ownerPK}) }),
		"garbage content":   resign(func(e *nostr.Event) { e.Content = "x" }),
		"bad signature":     func() nostr.Event { e := good; e.Sig = strings.Repeat("1", 128); return e }(),
	}
	for name, ev := range cases {
		if _, err := Decode(ownerSK, &ev); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

func TestDelta(t *testing.T) {
	prev := &Counts{InputTokens: U64(100), OutputTokens: U64(10), TotalTokens: U64(110), CostUSD: F64(0.5)}
	cur := &Counts{InputTokens: U64(150), OutputTokens: U64(25), CostUSD: F64(0.75)}
	d, ok := Delta(prev, cur)
	if !ok || *d.InputTokens != 50 || *d.OutputTokens != 15 || d.TotalTokens != nil || *d.CostUSD != 0.25 {
		t.Fatalf("Delta = %+v ok=%v", d, ok)
	}
	reset := &Counts{InputTokens: U64(5), OutputTokens: U64(30)}
	d, ok = Delta(prev, reset)
	if ok || d.InputTokens != nil || *d.OutputTokens != 20 {
		t.Fatalf("counter went down: Delta = %+v ok=%v, want input null and unreliable", d, ok)
	}
	if d, ok := Delta(nil, cur); ok || d.Known() {
		t.Fatalf("unknown baseline: Delta = %+v ok=%v, want all null and unreliable", d, ok)
	}
	if d, ok := Delta(Zero(), cur); !ok || *d.InputTokens != 150 || d.CacheReadTokens != nil {
		t.Fatalf("first turn: Delta = %+v ok=%v", d, ok)
	}
}
