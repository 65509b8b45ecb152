package relay_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/relay/relaytest"
)

// An agent flooding turn metrics gets 60 through and then 429 rate-limited, over the bridge of
// a real relay; its owner's other agent is not affected.
func TestTurnMetricFloodIsRateLimitedPerAgent(t *testing.T) {
	s := relaytest.Start(t)
	owner := nostr.GeneratePrivateKey()
	ownerPK, _ := nostr.GetPublicKey(owner)
	metric := func(sk, content string) (int, relaytest.PublishResult) {
		pk, _ := nostr.GetPublicKey(sk)
		return s.TryPublish(t, sk, &nostr.Event{Kind: protocol.KindTurnMetric, Content: content,
			Tags: nostr.Tags{{"p", ownerPK}, {"agent", pk}}})
	}
	agent, other := nostr.GeneratePrivateKey(), nostr.GeneratePrivateKey()
	accepted := 0
	var last relaytest.PublishResult
	var status int
	for i := range 61 {
		status, last = metric(agent, strings.Repeat("x", i+1))
		if last.Accepted {
			accepted++
		}
	}
	if accepted != 60 || status != http.StatusTooManyRequests || !strings.HasPrefix(last.Message+last.Error, "rate-limited:") {
		t.Fatalf("accepted %d of 61; the last: %d %+v", accepted, status, last)
	}
	if _, res := metric(other, "x"); !res.Accepted {
		t.Fatalf("another agent's metric refused: %+v", res)
	}
}
