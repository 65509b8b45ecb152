package relay_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
)

func TestPresenceQueryAnswersWithRelaySignedStatusOfLivePubkeysOnly(t *testing.T) {
	alice, bob, carol := newUser(), newUser(), newUser()
	c := dialRaw(t, sharedRelay.URL)
	c.mustAuth(bob.sk, sharedRelay.URL)
	if ok := c.publish(bob.sk, nostr.Event{Kind: protocol.KindPresence, Content: "away"}); ok[2] != true {
		t.Fatalf("presence refused: %v", ok)
	}
	for _, kind := range []int{40902, protocol.KindPresence} {
		evs := sharedRelay.Query(t, alice.sk, nostr.Filter{Kinds: []int{kind}, Authors: []string{bob.pk, carol.pk}})
		if len(evs) != 1 || evs[0].Content != "away" || protocol.TagValue(evs[0].Tags, "p") != bob.pk || evs[0].PubKey == bob.pk {
			t.Fatalf("presence of bob and carol (kind %d) = %+v, want bob away, signed by the relay", kind, evs)
		}
		if ok, err := evs[0].CheckSignature(); !ok || err != nil {
			t.Fatalf("presence event signature: %v %v", ok, err)
		}
	}
	c.publish(bob.sk, nostr.Event{Kind: protocol.KindPresence, Content: "offline"})
	if evs := sharedRelay.Query(t, alice.sk, nostr.Filter{Kinds: []int{40902}, Authors: []string{bob.pk}}); len(evs) != 0 {
		t.Fatalf("after offline = %+v", evs)
	}
}

func TestHostilePresenceQueryAnswersEachAuthorOnceAndCapsThem(t *testing.T) {
	asker, bob := newUser(), newUser()
	c := dialRaw(t, sharedRelay.URL)
	c.mustAuth(bob.sk, sharedRelay.URL)
	if ok := c.publish(bob.sk, nostr.Event{Kind: protocol.KindPresence, Content: "online"}); ok[2] != true {
		t.Fatalf("presence refused: %v", ok)
	}
	// One key named 2,000 times, over two filters: one answer.
	many := make([]string, 1000)
	for i := range many {
		many[i] = bob.pk
	}
	f := nostr.Filter{Kinds: []int{protocol.KindPresence}, Authors: many}
	if evs := sharedRelay.Query(t, asker.sk, f, f); len(evs) != 1 {
		t.Fatalf("%d presence events for one key asked 2,000 times, want 1", len(evs))
	}
	// More than 500 distinct keys is refused with a clear error.
	distinct := []string{bob.pk}
	for range 500 {
		distinct = append(distinct, newUser().pk)
	}
	body, _ := json.Marshal([]nostr.Filter{{Kinds: []int{protocol.KindPresence}, Authors: distinct}})
	status, raw := sharedRelay.Post(t, asker.sk, "/query", body)
	if status != http.StatusBadRequest || !strings.Contains(string(raw), "at most 500 distinct authors") {
		t.Fatalf("501 distinct authors: %d %s", status, raw)
	}
}
