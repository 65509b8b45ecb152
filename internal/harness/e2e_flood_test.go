package harness_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/client"
	"github.com/buzz-harness/buzz/internal/protocol"
)

// floodChannels is past the relay's 1,024 subscriptions per connection and past discovery's
// page size, as in the attack that deafened the agent (issue 15, finding 2).
const floodChannels = 1040

// A stranger adds the agent to more open channels than the relay allows subscriptions on one
// connection (no add policy stops them here): the harness keeps one connection, still answers
// the owner in #general, and after a restart discovery finds every channel again and listens to
// all of them through a handful of subscriptions, the owner's channel in one of its own.
func TestStrangerAddingAgentToThousandsOfChannelsNeverDeafensIt(t *testing.T) {
	if testing.Short() {
		t.Skip("creates a thousand channels")
	}
	s := newStack(t)
	s.start(nil)
	strangerSK, _ := newKey(t)
	start := time.Now()
	floodOpenChannels(t, s.relay.URL, strangerSK, s.agentPK, floodChannels)
	t.Logf("%d channels created and the agent added in %s", floodChannels, time.Since(start).Round(time.Millisecond))
	s.waitLogCount("msg=subscribed", 1+floodChannels, 120*time.Second)
	t.Logf("all subscribed after %s", time.Since(start).Round(time.Millisecond))
	s.waitReply(s.mention(s.ownerSK, "still there?").ID)
	t.Logf("owner answered after %s", time.Since(start).Round(time.Millisecond))
	if n := strings.Count(s.logs.String(), "relay session ended"); n != 0 {
		t.Fatalf("the relay connection was lost %d times during the flood", n)
	}
	if n := strings.Count(s.logs.String(), "too many subscriptions"); n != 0 {
		t.Fatalf("the relay refused %d subscriptions", n)
	}

	s.kill()
	start = time.Now()
	s.start(nil)
	t.Logf("restarted in %s", time.Since(start).Round(time.Millisecond))
	m := regexp.MustCompile(`channels discovered" channels=(\d+) subscriptions=(\d+)`).FindStringSubmatch(s.logs.String())
	if m == nil || m[1] != "1041" || m[2] != "12" {
		// #general, the owner's, in a subscription of its own; the stranger's 1,040 in 11.
		t.Fatalf("discovery logged %q, want 1041 channels in 12 subscriptions", m)
	}
	s.waitReply(s.mention(s.ownerSK, "and after a restart?").ID)
	if n := strings.Count(s.logs.String(), "relay session ended"); n != 0 {
		t.Fatalf("the relay connection was lost %d times after the restart", n)
	}
}

// waitLogCount waits until substr appears n times in buzz-acp's output.
func (s *stack) waitLogCount(substr string, n int, timeout time.Duration) {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	for strings.Count(s.logs.String(), substr) < n {
		if time.Now().After(deadline) {
			s.t.Fatalf("timed out waiting for %d× %q (have %d)", n, substr, strings.Count(s.logs.String(), substr))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// floodOpenChannels has sk create n open channels and add pubkey to each, a few at a time.
func floodOpenChannels(t *testing.T, relayURL, sk, pubkey string, n int) {
	t.Helper()
	bridge := client.NewBridge(relayURL, sk)
	ids := make(chan string)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for id := range ids {
				for _, ev := range []*nostr.Event{
					{Kind: protocol.KindCreateGroup, Tags: nostr.Tags{{"h", id}, {"name", "general"}, {"visibility", protocol.VisibilityOpen}, {"channel_type", protocol.TypeStream}}},
					{Kind: protocol.KindPutUser, Tags: nostr.Tags{{"h", id}, {"p", pubkey}, {"role", "member"}}},
				} {
					res, err := bridge.Publish(context.Background(), ev)
					if err == nil && !res.Accepted {
						err = fmt.Errorf("kind %d refused: %s", ev.Kind, res.Message)
					}
					if err != nil {
						select {
						case errs <- err:
						default:
						}
						return
					}
				}
			}
		})
	}
	for range n {
		select {
		case ids <- uuid.NewString():
		case err := <-errs:
			close(ids)
			wg.Wait()
			t.Fatal(err)
		}
	}
	close(ids)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
}
