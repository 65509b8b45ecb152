package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/clock"
	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/protocol/ownerauth"
)

func TestSiblingCacheForgetsVerdictsAfterTheirTTL(t *testing.T) {
	var c siblingCache
	now := time.Unix(1_000_000, 0)
	c.put("a", siblingVerdict{sibling: true}, siblingTTL, now)
	if v, ok := c.get("a", now.Add(siblingTTL-time.Second)); !ok || !v.sibling {
		t.Fatal("a fresh verdict was not remembered")
	}
	if _, ok := c.get("a", now.Add(siblingTTL)); ok {
		t.Fatal("an expired verdict was still used")
	}
}

func TestSiblingCacheStaysWithinItsSizeBound(t *testing.T) {
	var c siblingCache
	now := time.Unix(1_000_000, 0)
	for i := range 3 * siblingCacheSize {
		c.put(nostr.GeneratePrivateKey(), siblingVerdict{sibling: i%2 == 0}, siblingTTL, now)
		if len(c.entries) > siblingCacheSize {
			t.Fatalf("cache holds %d entries, bound %d", len(c.entries), siblingCacheSize)
		}
	}
}

func TestSiblingLookupFailsClosedOnARelayError(t *testing.T) {
	srv, queries := memoryRelay(t, http.StatusInternalServerError, `{"error":"boom"}`)
	rc := memoryClient(srv.URL, nostr.GeneratePrivateKey(), "aa")
	v, err := rc.lookupAuthor(context.Background(), "bb")
	if v.sibling || err == nil || queries.Load() == 0 {
		t.Fatalf("sibling=%v err=%v after %d queries, want not a sibling and the error", v.sibling, err, queries.Load())
	}
}

func TestSiblingLookupRejectsAProfileAttestedByAnotherOwner(t *testing.T) {
	ownerSK, otherOwnerSK, botSK := nostr.GeneratePrivateKey(), nostr.GeneratePrivateKey(), nostr.GeneratePrivateKey()
	owner, _ := nostr.GetPublicKey(ownerSK)
	bot, _ := nostr.GetPublicKey(botSK)
	profile := func(issuerSK string, claim string) string {
		tag, err := ownerauth.Issue(issuerSK, bot, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		tag.Owner = claim
		ev := nostr.Event{Kind: 0, Content: "{}", CreatedAt: nostr.Now(), Tags: nostr.Tags{tag.NostrTag()}}
		if err := ev.Sign(botSK); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal([]nostr.Event{ev})
		return string(b)
	}
	for name, c := range map[string]struct {
		body string
		want bool
	}{
		"attested by our owner":        {profile(ownerSK, owner), true},
		"claims our owner, forged sig": {profile(otherOwnerSK, owner), false},
		"no profile":                   {"[]", false},
	} {
		srv, _ := memoryRelay(t, http.StatusOK, c.body)
		rc := memoryClient(srv.URL, nostr.GeneratePrivateKey(), owner)
		if v, err := rc.lookupAuthor(context.Background(), bot); v.sibling != c.want || err != nil {
			t.Errorf("%s: sibling=%v err=%v, want %v", name, v.sibling, err, c.want)
		}
	}
}

// The sibling gate judges an attestation's time bounds at the harness's now, so one that
// expired an hour ago does not pass on a profile backdated to before its expiry (issue 28).
func TestSiblingLookupRefusesAnAttestationExpiredBeforeNow(t *testing.T) {
	ownerSK, botSK := nostr.GeneratePrivateKey(), nostr.GeneratePrivateKey()
	owner, _ := nostr.GetPublicKey(ownerSK)
	bot, _ := nostr.GetPublicKey(botSK)
	now := time.Now()
	tag, err := ownerauth.Issue(ownerSK, bot, fmt.Sprintf("created_at<%d", now.Add(-time.Hour).Unix()), nil)
	if err != nil {
		t.Fatal(err)
	}
	ev := nostr.Event{Kind: 0, Content: "{}", CreatedAt: nostr.Timestamp(now.Add(-2 * time.Hour).Unix()), Tags: nostr.Tags{tag.NostrTag()}}
	if err := ev.Sign(botSK); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal([]nostr.Event{ev})
	srv, _ := memoryRelay(t, http.StatusOK, string(b))
	rc := memoryClient(srv.URL, nostr.GeneratePrivateKey(), owner)
	if v, err := rc.lookupAuthor(context.Background(), bot); v.sibling || err != nil {
		t.Fatalf("sibling=%v err=%v, want an expired attestation refused", v.sibling, err)
	}
}

// 3,000 throwaway keys mentioning the agent in one channel (issue 28) cost at most
// maxStrangerLookups relay reads per window there, not one each; the window's end restores the
// budget, and a lookup that finds a sibling does not use it up.
func TestStrangerSiblingLookupsAreBoundedPerChannel(t *testing.T) {
	t.Parallel()
	srv, queries := memoryRelay(t, http.StatusOK, "[]")
	owner, _ := nostr.GetPublicKey(nostr.GeneratePrivateKey())
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	rc := memoryClient(srv.URL, nostr.GeneratePrivateKey(), owner)
	rc.clock = clk
	h := &Harness{gate: Gate{Mode: RespondOwnerOnly, Owner: owner}, siblings: newSiblingLookups(), clock: clk,
		relay: rc, log: slog.New(slog.DiscardHandler)}
	open, other := &channel{ID: "open", Type: protocol.ChannelStream}, &channel{ID: "other", Type: protocol.ChannelStream}
	ctx := context.Background()
	flood := func(c *channel, n int) (held int) {
		for range n {
			pk, _ := nostr.GetPublicKey(nostr.GeneratePrivateKey())
			if h.admit(ctx, c, arriving{ev: &nostr.Event{PubKey: pk}}) == gateHeld {
				held++
			}
		}
		for range held {
			r := <-h.siblings.done
			delete(h.siblings.held, r.author) // nothing to settle: the verdict alone is tested
			h.finishSiblingLookup(ctx, r)
		}
		h.tasks.Wait()
		return held
	}
	if held := flood(open, 3000); held != maxStrangerLookups {
		t.Fatalf("%d of 3000 throwaway keys were looked up, want %d", held, maxStrangerLookups)
	}
	if got := queries.Load(); got != maxStrangerLookups {
		t.Fatalf("%d relay reads, want %d", got, maxStrangerLookups)
	}
	if held := flood(other, 1); held != 1 {
		t.Fatal("another channel's budget was used up too")
	}
	clk.Advance(siblingTTL)
	if held := flood(open, 1); held != 1 {
		t.Fatal("the budget did not come back after its window")
	}
}

func TestLookupBudgetGivesBackWhatFoundASibling(t *testing.T) {
	var b lookupBudget
	now := time.Unix(1_000_000, 0)
	for range maxStrangerLookups {
		if !b.take("c", now) {
			t.Fatal("budget ran out early")
		}
	}
	if b.take("c", now) {
		t.Fatal("budget exceeded")
	}
	b.giveBack("c")
	if !b.take("c", now) {
		t.Fatal("a lookup that found a sibling was not given back")
	}
}
