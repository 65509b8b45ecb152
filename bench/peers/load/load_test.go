package load_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/bench/peers/bare"
	"github.com/buzz-harness/buzz/bench/peers/load"
)

func startBare(t *testing.T) load.Target {
	srv := httptest.NewServer(bare.New())
	t.Cleanup(srv.Close)
	return load.Target{URL: "ws" + strings.TrimPrefix(srv.URL, "http")}
}

func TestLoadGeneratorRunsEveryMeasurementAgainstTheVerifyOnlyServer(t *testing.T) {
	tgt := startBare(t)
	w, err := load.Prepare(load.Options{IngestEvents: 40, FanOutEvents: 5, Subscribers: 3})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := load.Setup(ctx, tgt, w); err != nil {
		t.Fatalf("setup: %v", err)
	}
	for name, pubs := range map[string][]load.Publisher{"ingest@1": w.Ingest1, "ingest@4": w.Ingest4} {
		rate, err := load.Ingest(ctx, tgt, pubs, 8)
		if err != nil || rate <= 0 {
			t.Fatalf("%s: rate %v, err %v", name, rate, err)
		}
	}
	res, err := load.FanOut(ctx, tgt, w)
	if err != nil {
		t.Fatalf("fan-out: %v", err)
	}
	if res.Samples != 5*3 || res.P50 <= 0 || res.P99 < res.P50 {
		t.Fatalf("fan-out result %+v, want 15 samples with 0 < p50 <= p99", res)
	}
}

func TestIngestFailsWhenTheRelayRefusesAnEvent(t *testing.T) {
	tgt := startBare(t)
	w, err := load.Prepare(load.Options{IngestEvents: 4, FanOutEvents: 1, Subscribers: 1})
	if err != nil {
		t.Fatal(err)
	}
	// Corrupt one event's signature: the verify-only server must refuse it, and Ingest must
	// report that rather than count it.
	var frame []json.RawMessage
	json.Unmarshal(w.Ingest1[0].Frames[2], &frame)
	var ev nostr.Event
	json.Unmarshal(frame[1], &ev)
	ev.Sig = strings.Repeat("0", 128)
	w.Ingest1[0].Frames[2], _ = json.Marshal([]any{"EVENT", ev})
	_, err = load.Ingest(context.Background(), tgt, w.Ingest1, 2)
	if err == nil || !strings.Contains(err.Error(), "bad signature") {
		t.Fatalf("Ingest error = %v, want the relay's bad-signature refusal", err)
	}
}

func TestFanOutDeliversOnlyToMatchingSubscriptions(t *testing.T) {
	tgt := startBare(t)
	w, err := load.Prepare(load.Options{IngestEvents: 1, FanOutEvents: 1, Subscribers: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	events := make(chan load.Frame, 4)
	other, err := load.Dial(ctx, tgt, load.NewKey(), 0, events)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	other.Write([]byte(`["REQ","elsewhere",{"kinds":[9],"#h":["some-other-channel"]}]`))
	if _, err := other.Next("EOSE", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := load.FanOut(ctx, tgt, w); err != nil {
		t.Fatalf("fan-out: %v", err)
	}
	// A marker event for the other channel proves the subscription is live and that nothing
	// for the workload's channel was queued before it.
	marker := nostr.Event{Kind: 9, CreatedAt: nostr.Now(), Tags: nostr.Tags{{"h", "some-other-channel"}}}
	k := load.NewKey()
	marker.Sign(k.SK)
	b, _ := json.Marshal([]any{"EVENT", marker})
	other.Write(b)
	var f load.Frame
	select {
	case f = <-events:
	case <-time.After(5 * time.Second):
		t.Fatal("the marker event never arrived")
	}
	var got nostr.Event
	json.Unmarshal(f.Body[2], &got)
	if got.ID != marker.ID {
		t.Fatalf("first event on the non-matching subscription = %s, want the marker %s", got.ID, marker.ID)
	}
}
