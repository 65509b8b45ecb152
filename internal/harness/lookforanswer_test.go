package harness

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/client"
	"github.com/buzz-harness/buzz/internal/relay/relaytest"
)

// The reply check reads the batch's channel alone while the own-messages subscription covered
// the turn (it knows the other channels the agent posted in from it), and every channel when it
// did not: then an answer elsewhere is found by the query itself.
func TestReplyCheckReadsEveryChannelOnlyWhenTheOwnSubscriptionDidNotCoverTheTurn(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t)
	ownerSK, ownerPK := testKey(t)
	agentSK, agentPK := testKey(t)
	asked := r.CreateChannel(t, ownerSK, "asked here", false)
	answered := r.CreateChannel(t, ownerSK, "answered here", true)
	r.AddMember(t, ownerSK, asked, agentPK, "bot")
	r.AddMember(t, ownerSK, answered, agentPK, "bot")
	since := time.Now().Add(-time.Minute)
	r.Publish(t, agentSK, nostr.Event{Kind: 9, Content: "the answer", CreatedAt: nostr.Now(), Tags: nostr.Tags{{"h", answered}}})

	bridge := client.NewBridge(r.URL, agentSK)
	rc := &relayClient{bridge: bridge, sock: &client.SocketFirst{Bridge: bridge}, self: agentPK,
		cfg: &Config{}, log: slog.New(slog.DiscardHandler)}
	b := &Batch{Conv: convKey{Channel: asked}, Items: []queued{{Event: &nostr.Event{ID: "q", PubKey: ownerPK, Kind: 9,
		CreatedAt: nostr.Timestamp(since.Unix()), Tags: nostr.Tags{{"h", asked}}}}}}
	ctx := context.Background()

	if ok, _, n := rc.lookForAnswer(ctx, b, since, true, false, nil); !ok || n != 2 {
		t.Fatalf("uncovered: answered %v after %d queries, want the answer in the other channel found (2)", ok, n)
	}
	if ok, _, n := rc.lookForAnswer(ctx, b, since, true, true, nil); ok || n != 1 {
		t.Fatalf("covered, nothing seen elsewhere: answered %v after %d queries, want one read of the asked channel", ok, n)
	}
	if ok, _, n := rc.lookForAnswer(ctx, b, since, true, true, []string{answered}); !ok || n != 2 {
		t.Fatalf("covered, seen in %s: answered %v after %d queries, want it found by its members (2)", answered, ok, n)
	}
}
