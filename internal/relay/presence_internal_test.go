package relay

import (
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
)

func TestPresenceIsForgottenWhenNotRefreshedAndTruncated(t *testing.T) {
	var p presenceBook
	t0 := time.Unix(1_700_000_000, 0)
	p.note(&nostr.Event{PubKey: "a", Content: strings.Repeat("x", 500)}, t0)
	e, ok := p.get("a", t0.Add(presenceTTL))
	if !ok || len(e.status) != maxPresenceStatus {
		t.Fatalf("fresh status = %+v %v, want kept and cut to %d bytes", e, ok, maxPresenceStatus)
	}
	if _, ok := p.get("a", t0.Add(presenceTTL+time.Second)); ok {
		t.Fatal("a status not refreshed within the TTL is still reported")
	}
}
