package harness

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/clock"
	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/relay/relaytest"
)

// A profile past its TTL still labels its author, without a query on the prompt's path; the
// refresh the caller runs afterwards brings the new name, and a refresh that fails keeps the old
// label (before, an expired profile was fetched before the prompt, and a failed fetch left the
// author unlabelled).
func TestStaleProfileLabelsThePromptAndIsRefreshedAfterIt(t *testing.T) {
	r := relaytest.Start(t)
	authorSK, authorPK := testKey(t)
	agentSK, _ := testKey(t)
	setName := func(name string, at time.Time) {
		r.Publish(t, authorSK, nostr.Event{Kind: protocol.KindProfile, CreatedAt: nostr.Timestamp(at.Unix()),
			Content: `{"name":"` + name + `"}`, Tags: nostr.Tags{}})
	}
	start := time.Now()
	setName("alice", start)
	clk := clock.NewFake(start)
	rc := memoryClient(r.URL, agentSK, "") // a bridge without retry delays
	rc.clock = clk
	ctx := context.Background()
	batch := []nostr.Event{{PubKey: authorPK, Kind: 9, Tags: nostr.Tags{}}}
	label := func(wantStale bool) string {
		t.Helper()
		labels, stale := rc.profileLabels(ctx, batch, nil)
		if got := slices.Equal(stale, []string{authorPK}); got != wantStale {
			t.Fatalf("stale = %v, want the author listed: %v", stale, wantStale)
		}
		return labels[authorPK].Label
	}

	if got := label(false); got != "alice" {
		t.Fatalf("first label %q, want alice (fetched: never seen)", got)
	}
	setName("alice2", start.Add(time.Second))
	clk.Advance(profileTTL)
	if got := label(true); got != "alice" {
		t.Fatalf("label past the TTL %q, want the cached alice", got)
	}
	if got := label(false); got != "alice" {
		t.Fatal("a second turn claimed the refresh already under way")
	}
	rc.refreshProfiles(ctx, []string{authorPK})
	if got := label(false); got != "alice2" {
		t.Fatalf("label after the refresh %q, want alice2", got)
	}

	clk.Advance(profileTTL)
	r.Stop()
	if got := label(true); got != "alice2" {
		t.Fatalf("label past the TTL with the relay down %q, want alice2", got)
	}
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rc.refreshProfiles(qctx, []string{authorPK})
	if got := label(true); got != "alice2" {
		t.Fatalf("label after a failed refresh %q, want alice2 (and the refresh claimable again)", got)
	}
}
