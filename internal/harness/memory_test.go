package harness

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/client"
	"github.com/buzz-harness/buzz/internal/clock"
	"github.com/buzz-harness/buzz/internal/protocol/engram"
)

// memoryRelay is the outside edge only: an HTTP bridge whose /query answers with a fixed status
// and body. Everything between it and the decision (bridge client, engram checks) is real.
func memoryRelay(t *testing.T, status int, body string) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var queries atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		queries.Add(1)
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv, &queries
}

func memoryClient(url, agentSK, owner string) *relayClient {
	cfg := &Config{SecretKey: agentSK, Owner: owner, Memory: true}
	b := client.NewBridge(url, agentSK)
	b.Backoff = func(int) time.Duration { return 0 }
	return &relayClient{bridge: b, cfg: cfg, log: slog.New(slog.NewTextHandler(io.Discard, nil)), clock: clock.Real()}
}

func TestCoreMemoryDecisionTable(t *testing.T) {
	agentSK, ownerSK := nostr.GeneratePrivateKey(), nostr.GeneratePrivateKey()
	owner, _ := nostr.GetPublicKey(ownerSK)
	pair, err := engram.AgentSide(agentSK, owner)
	if err != nil {
		t.Fatal(err)
	}
	core, err := pair.Build(engram.CoreBody("I am Hexa."), nostr.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	blank, _ := pair.Build(engram.CoreBody("  "), nostr.Now(), nil)
	broken := core
	broken.Content = "garbage"
	js := func(evs ...nostr.Event) string { b, _ := json.Marshal(evs); return string(b) }

	cases := []struct {
		name, body, want string
		status           int
	}{
		{"confirmed absence nudges", "[]", CoreNudge, 200},
		{"a core record is the section", js(core), "I am Hexa.", 200},
		{"a blank profile nudges", js(blank), CoreNudge, 200},
		{"unreadable records give nothing", js(broken), "", 200},
		{"an unreadable record beside a good one is ignored", js(broken, core), "I am Hexa.", 200},
		{"a non-JSON answer gives nothing", "<html>oops</html>", "", 200},
		{"a relay failure gives nothing", "down", "", 503},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv, _ := memoryRelay(t, c.status, c.body)
			if got := memoryClient(srv.URL, agentSK, owner).coreMemory(context.Background()); got != c.want {
				t.Fatalf("core memory = %q, want %q", got, c.want)
			}
		})
	}
}

func TestCoreMemoryWithoutOwnerAsksNothing(t *testing.T) {
	srv, queries := memoryRelay(t, 200, "[]")
	if got := memoryClient(srv.URL, nostr.GeneratePrivateKey(), "").coreMemory(context.Background()); got != "" {
		t.Fatalf("core memory without an owner = %q", got)
	}
	if queries.Load() != 0 {
		t.Fatalf("%d queries without an owner", queries.Load())
	}
}
