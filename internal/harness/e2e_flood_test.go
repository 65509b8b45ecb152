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
	"github.com/buzz-harness/buzz/internal/testwait"
)

// A stranger adds the agent to more open channels than the relay allows subscriptions on one
// connection and than one discovery query returns (no add policy stops them here), as in the
// attack that deafened the agent (issue 15, finding 2): 1,000 before buzz-acp starts, 40 more
// while it runs. Discovery finds every channel, all 1,041 are listened to through a dozen
// subscriptions (the owner's #general in one of its own), the connection is never dropped, and
// the owner's mentions in #general are answered.
func TestStrangerAddingAgentToThousandsOfChannelsNeverDeafensIt(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("creates a thousand channels")
	}
	s := newStack(t)
	strangerSK, _ := newKey(t)
	start := time.Now()
	floodOpenChannels(t, s.relay.URL, strangerSK, s.agentPK, 1000)
	t.Logf("1,000 channels created and the agent added in %s", time.Since(start).Round(time.Millisecond))

	s.start(nil)
	m := regexp.MustCompile(`channels discovered" channels=(\d+) subscriptions=(\d+)`).FindStringSubmatch(s.logs.String())
	if m == nil || m[1] != "1001" || m[2] != "11" {
		// #general, the owner's, in a subscription of its own; the stranger's 1,000 in 10.
		t.Fatalf("discovery logged %q, want 1001 channels in 11 subscriptions", m)
	}
	s.waitReply(s.mention(s.ownerSK, "still there?").ID)

	start = time.Now()
	floodOpenChannels(t, s.relay.URL, strangerSK, s.agentPK, 40) // past 1,024 while running
	s.waitLogCount("msg=subscribed", 1041, 120*time.Second)
	t.Logf("40 more channels joined live in %s", time.Since(start).Round(time.Millisecond))
	s.waitReply(s.mention(s.ownerSK, "and now?").ID)
	for _, bad := range []string{"relay session ended", "too many subscriptions", "relay closed a subscription"} {
		if n := strings.Count(s.logs.String(), bad); n != 0 {
			t.Fatalf("%q logged %d times", bad, n)
		}
	}
	if n := strings.Count(s.logs.String(), "relay session ready"); n != 1 {
		t.Fatalf("%d relay sessions, want 1", n)
	}
}

// waitLogCount waits until substr appears n times in buzz-acp's output.
func (s *stack) waitLogCount(substr string, n int, timeout time.Duration) {
	s.t.Helper()
	testwait.Eventually(s.t, timeout, func() bool { return strings.Count(s.logs.String(), substr) >= n },
		fmt.Sprintf("%d× %q in buzz-acp's output", n, substr))
}

// floodOpenChannels has sk create n open channels and add pubkey to each, a few at a time. It
// publishes over WebSocket connections, each authenticated once, rather than the HTTP bridge,
// which signs and checks a NIP-98 header for every event.
func floodOpenChannels(t *testing.T, relayURL, sk, pubkey string, n int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var running sync.WaitGroup
	defer func() { cancel(); running.Wait() }()
	ids := make(chan string)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for range 8 { // a connection each: the relay handles one connection's events in order
		live := client.NewLive(client.LiveConfig{RelayURL: relayURL, SecretKey: sk})
		running.Go(func() { _ = live.Run(ctx) })
		wg.Go(func() {
			for id := range ids {
				for _, ev := range []*nostr.Event{
					{Kind: protocol.KindCreateGroup, Tags: nostr.Tags{{"h", id}, {"name", "general"}, {"visibility", protocol.VisibilityOpen}, {"channel_type", protocol.TypeStream}}},
					{Kind: protocol.KindPutUser, Tags: nostr.Tags{{"h", id}, {"p", pubkey}, {"role", "member"}}},
				} {
					if err := live.Publish(ctx, ev); err != nil {
						err = fmt.Errorf("kind %d: %w", ev.Kind, err)
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
