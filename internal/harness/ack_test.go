package harness

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/client"
	"github.com/buzz-harness/buzz/internal/clock"
	"github.com/buzz-harness/buzz/internal/protocol"
)

// fakeRelay stands in for the bridge and the socket: it records what was published and, with
// hold set, keeps bridge publishes waiting until release is closed.
type fakeRelay struct {
	mu       sync.Mutex
	bridged  []nostr.Event
	socket   []nostr.Event
	existing []nostr.Event // what a query for our reactions finds
	hold     bool
	release  chan struct{}
}

func (f *fakeRelay) Publish(ctx context.Context, ev *nostr.Event) (client.PublishResult, error) {
	if f.hold {
		select {
		case <-f.release:
		case <-ctx.Done():
			return client.PublishResult{}, ctx.Err()
		}
	}
	ev.ID = nostr.GeneratePrivateKey() // any 64-hex id
	f.mu.Lock()
	f.bridged = append(f.bridged, *ev)
	f.mu.Unlock()
	return client.PublishResult{Accepted: true, EventID: ev.ID}, nil
}

func (f *fakeRelay) Query(context.Context, ...client.Filter) ([]nostr.Event, error) {
	return f.existing, nil
}

type fakeSocket struct{ f *fakeRelay }

func (s fakeSocket) Publish(_ context.Context, ev *nostr.Event) error {
	s.f.mu.Lock()
	s.f.socket = append(s.f.socket, *ev)
	s.f.mu.Unlock()
	return nil
}

func (f *fakeRelay) kinds(socket bool, k int) []nostr.Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	src := f.bridged
	if socket {
		src = f.socket
	}
	var out []nostr.Event
	for _, e := range src {
		if e.Kind == k {
			out = append(out, e)
		}
	}
	return out
}

func startAcker(t *testing.T, cfg Config, f *fakeRelay) (*acker, *sync.WaitGroup, context.CancelFunc) {
	var wg sync.WaitGroup
	a := newAcker(&cfg, "self", f, slog.New(slog.DiscardHandler), &wg)
	ctx, cancel := context.WithCancel(t.Context())
	a.start(ctx, fakeSocket{f}, clock.Real())
	return a, &wg, cancel
}

const (
	ackCh  = "3f2a8c1e-0000-4000-8000-000000000001"
	target = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
)

func TestAckEyesAddedWhileTheTurnEndsAreRemovedOnceTheyLand(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeRelay{hold: true, release: make(chan struct{})}
		a, wg, cancel := startAcker(t, Config{NoTyping: true, NoPresence: true}, f)
		a.queued(ackCh, &nostr.Event{ID: target})
		a.finished(target) // the turn ended while the add is still waiting
		synctest.Wait()
		if n := len(f.kinds(false, protocol.KindDeletion)); n != 0 {
			t.Fatalf("%d deletions before the reaction existed", n)
		}
		close(f.release)
		synctest.Wait()
		adds, dels := f.kinds(false, protocol.KindReaction), f.kinds(false, protocol.KindDeletion)
		if len(adds) != 1 || len(dels) != 1 {
			t.Fatalf("%d adds, %d deletions; want 1 and 1", len(adds), len(dels))
		}
		if protocol.TagValue(dels[0].Tags, "e") != adds[0].ID || protocol.TagValue(dels[0].Tags, "h") != ackCh {
			t.Fatalf("deletion tags %v, want e=%s and the channel", dels[0].Tags, adds[0].ID)
		}
		cancel()
		wg.Wait()
	})
}

func TestAckReplayedEventAdoptsItsEyesFromAnEarlierRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		old := nostr.Event{ID: "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", Kind: protocol.KindReaction, Content: ackEmoji}
		f := &fakeRelay{existing: []nostr.Event{old}}
		a, wg, cancel := startAcker(t, Config{NoTyping: true, NoPresence: true}, f)
		a.replayed(ackCh, &nostr.Event{ID: target})
		synctest.Wait()
		if n := len(f.kinds(false, protocol.KindReaction)); n != 0 {
			t.Fatalf("a second 👀 was added (%d)", n)
		}
		a.finished(target)
		synctest.Wait()
		dels := f.kinds(false, protocol.KindDeletion)
		if len(dels) != 1 || protocol.TagValue(dels[0].Tags, "e") != old.ID {
			t.Fatalf("deletions %v, want one naming the adopted 👀", dels)
		}
		cancel()
		wg.Wait()
	})
}

// The loop ticks once a second; a running turn's conversation types at its start and then every
// typingEvery, and stops once its turn is gone.
func TestAckTypingEveryThreeSecondsWhileTheTurnRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeRelay{}
		a, wg, cancel := startAcker(t, Config{NoReactions: true, NoPresence: true}, f)
		h := &Harness{ack: a, convs: newConversations(time.Now, func() float64 { return 1 })}
		k := protocol.ChannelConversation(ackCh)
		last := &nostr.Event{ID: target, Tags: nostr.Tags{{"e", "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc", "", "root"}, {"e", target[:63] + "b", "", "reply"}}}
		tr := &turn{typing: typingTags(ackCh, last), typedAt: time.Now()}
		h.convs.update(k, func(c *conversation) { c.turn = tr })
		a.typing(tr.typing) // as startTurn does
		synctest.Wait()
		if n := len(f.kinds(true, protocol.KindTyping)); n != 1 {
			t.Fatalf("%d typing events at turn start, want 1", n)
		}
		tickFor := func(d time.Duration) {
			for range int(d / time.Second) {
				time.Sleep(time.Second)
				h.keepTyping(time.Now())
			}
			synctest.Wait()
		}
		tickFor(9 * time.Second)
		typ := f.kinds(true, protocol.KindTyping)
		if len(typ) != 4 {
			t.Fatalf("%d typing events after 9 s, want 4 (0, 3, 6, 9 s)", len(typ))
		}
		if tg := typ[0].Tags; len(tg) != 3 || tg[0][1] != ackCh || tg[1][3] != "root" || tg[2][3] != "reply" || typ[0].Content != "" {
			t.Fatalf("typing tags %v content %q", tg, typ[0].Content)
		}
		h.convs.update(k, func(c *conversation) { c.turn = nil }) // the turn ended
		tickFor(30 * time.Second)
		if n := len(f.kinds(true, protocol.KindTyping)); n != 4 {
			t.Fatalf("%d typing events after the turn ended, want still 4", n)
		}
		cancel()
		wg.Wait()
	})
}

func TestAckPresenceOnlineAtStartEveryMinuteAndOfflineAtShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeRelay{}
		a, wg, cancel := startAcker(t, Config{NoReactions: true, NoTyping: true}, f)
		synctest.Wait()
		time.Sleep(2*time.Minute + time.Second)
		synctest.Wait()
		cancel()
		wg.Wait()
		a.offline(context.Background())
		var got []string
		for _, e := range f.kinds(true, protocol.KindPresence) {
			if len(e.Tags) != 0 {
				t.Fatalf("presence tags %v", e.Tags)
			}
			got = append(got, e.Content)
		}
		if len(got) != 4 || got[0] != "online" || got[1] != "online" || got[2] != "online" || got[3] != "offline" {
			t.Fatalf("presence = %v, want online at 0, 60 and 120 s, then offline", got)
		}
	})
}

func TestAckNothingWhenTurnedOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeRelay{}
		a, wg, cancel := startAcker(t, Config{NoReactions: true, NoTyping: true, NoPresence: true}, f)
		a.queued(ackCh, &nostr.Event{ID: target})
		a.typing(typingTags(ackCh, &nostr.Event{ID: target}))
		time.Sleep(2 * time.Minute)
		a.finished(target)
		cancel()
		wg.Wait()
		a.offline(context.Background())
		if len(f.bridged)+len(f.socket) != 0 {
			t.Fatalf("published %d over the bridge and %d over the socket", len(f.bridged), len(f.socket))
		}
	})
}
