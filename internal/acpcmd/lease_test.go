package acpcmd

import (
	"slices"
	"strings"
	"testing"
)

func TestRelaySpellingsShareOneLease(t *testing.T) {
	dir := t.TempDir()
	pk := strings.Repeat("a", 64)
	for _, pair := range [][2]string{
		{" WSS://Relay.Example:443/ ", "wss://relay.example"},
		{"https://relay.example", "wss://relay.example"},
		{"http://localhost:3000/", "ws://127.0.0.1:3000"},
		{"ws://relay.example:80/path/", "ws://relay.example/path"},
	} {
		if a, b := leaseFile(dir, pk, pair[0]), leaseFile(dir, pk, pair[1]); a != b {
			t.Errorf("%q and %q get different leases (%s vs %s)", pair[0], pair[1], normalizeRelay(pair[0]), normalizeRelay(pair[1]))
		}
		if pgLeaseKey(pk, pair[0]) != pgLeaseKey(pk, pair[1]) {
			t.Errorf("%q and %q get different PostgreSQL lease keys", pair[0], pair[1])
		}
	}
	if leaseFile(dir, pk, "wss://a.example") == leaseFile(dir, pk, "wss://b.example") {
		t.Error("different relays share a lease")
	}
	if leaseFile(dir, pk, "wss://a.example") == leaseFile(dir, strings.Repeat("b", 64), "wss://a.example") {
		t.Error("different agents share a lease")
	}
	if pgLeaseKey(pk, "wss://a.example") == pgLeaseKey(pk, "wss://b.example") ||
		pgLeaseKey(pk, "wss://a.example") == pgLeaseKey(strings.Repeat("b", 64), "wss://a.example") {
		t.Error("different agents or relays share a PostgreSQL lease key")
	}
}

func TestSecondLeaseOnAnyListedRelayIsRefusedAndHeldOnesAreReleased(t *testing.T) {
	dir := t.TempDir()
	pk := strings.Repeat("a", 64)
	release, err := takeLeases(dir, pk, []string{"ws://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	// The second lists a free relay first: that lease must be given back when the second fails.
	_, err = takeLeases(dir, pk, []string{"ws://127.0.0.1:2", "http://localhost:1"})
	if err == nil || !strings.Contains(err.Error(), "is already running as agent "+pk+" on ws://127.0.0.1:1") {
		t.Fatalf("err = %v", err)
	}
	again, err := takeLeases(dir, pk, []string{"ws://127.0.0.1:2"})
	if err != nil {
		t.Fatalf("lease on the free relay was not released: %v", err)
	}
	again()
	release()
	if r, err := takeLeases(dir, pk, []string{"ws://127.0.0.1:1"}); err != nil {
		t.Fatalf("after release: %v", err)
	} else {
		r()
	}
}

func TestRelayURLListSetsPrimaryAndFallbacks(t *testing.T) {
	o := options{relayURL: "ws://a:1, ws://b:2", privateKey: strings.Repeat("1", 64), agentCommand: "/bin/true",
		permissions: "allow", logLevel: "info", kinds: "9"}
	cfg, err := o.config(&strings.Builder{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.RelayURL != "ws://a:1,ws://b:2" || !slices.Equal(relayList(cfg), []string{"ws://a:1", "ws://b:2"}) {
		t.Fatalf("RelayURL %q, relay list %q", cfg.RelayURL, relayList(cfg))
	}
}

func TestEmptyRelayURLListIsRefused(t *testing.T) {
	t.Setenv("BUZZ_PRIVATE_KEY", strings.Repeat("1", 64))
	err := run(t, "--relay-url", " , ", "--agent-command", "/bin/true")
	if err == nil || !strings.Contains(err.Error(), "BUZZ_RELAY_URL is empty") {
		t.Fatalf("err = %v", err)
	}
}
