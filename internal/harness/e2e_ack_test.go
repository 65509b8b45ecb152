package harness_test

import (
	"context"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/client"
	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/testwait"
)

// watcher is a live subscription (as the owner) to what the agent signs to acknowledge work:
// reactions, deletions, presence and typing.
type watcher struct {
	t   *testing.T
	mu  sync.Mutex
	got []nostr.Event
}

func (s *stack) watch(t *testing.T) *watcher {
	t.Helper()
	w := &watcher{t: t}
	live := client.NewLive(client.LiveConfig{RelayURL: s.relay.URL, SecretKey: s.ownerSK})
	live.Subscribe("ack", nostr.Filter{Authors: []string{s.agentPK},
		Kinds: []int{protocol.KindReaction, protocol.KindDeletion, protocol.KindPresence, protocol.KindTyping}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = live.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		for in := range live.Events() {
			if in.Event == nil {
				continue
			}
			w.mu.Lock()
			w.got = append(w.got, *in.Event)
			w.mu.Unlock()
		}
	}()
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if err := live.WaitConnected(wctx); err != nil {
		t.Fatal(err)
	}
	return w
}

// events returns what arrived so far of kind k (all kinds when k < 0).
func (w *watcher) events(k int) []nostr.Event {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []nostr.Event
	for _, e := range w.got {
		if k < 0 || e.Kind == k {
			out = append(out, e)
		}
	}
	return out
}

// waitFor waits until ok holds over what arrived, or fails after timeout.
func (w *watcher) waitFor(what string, timeout time.Duration, ok func() bool) {
	w.t.Helper()
	testwait.Eventually(w.t, timeout, ok, what)
}

// ackReactions are the 👀 reactions seen on target.
func (w *watcher) ackReactions(target string) []nostr.Event {
	var out []nostr.Event
	for _, e := range w.events(protocol.KindReaction) {
		if e.Content == "👀" && protocol.TagValue(e.Tags, "e") == target {
			out = append(out, e)
		}
	}
	return out
}

// ackOn queries the relay for the agent's 👀 on target (deleted ones are not returned).
func (s *stack) ackOn(target string) []nostr.Event {
	return s.relay.Query(s.t, s.ownerSK, nostr.Filter{Kinds: []int{protocol.KindReaction},
		Authors: []string{s.agentPK}, Tags: nostr.TagMap{"e": {target}}})
}

func (s *stack) waitNoAck(target string) {
	s.t.Helper()
	testwait.Eventually(s.t, 15*time.Second, func() bool { return len(s.ackOn(target)) == 0 },
		"the 👀 on "+target+" to be removed")
}

func TestEyesReactionMarksQueuedMentionAndGoesWhenTheTurnEnds(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	w := s.watch(t)
	s.start(nil, "TESTAGENT_HANG_ON=1")

	held := s.mention(s.ownerSK, "long job")
	s.waitRecorded("session/prompt", 1)
	r := s.waitEvent(10*time.Second, nostr.Filter{Kinds: []int{protocol.KindReaction}, Authors: []string{s.agentPK}, Tags: nostr.TagMap{"e": {held.ID}}})
	if r.Content != "👀" || protocol.TagValue(r.Tags, "h") != s.channel {
		t.Fatalf("reaction %q tags %v, want 👀 in the channel", r.Content, r.Tags)
	}

	// The turn is cancelled (in its thread): the 👀 goes, by a kind 5 naming it.
	cmd := s.mention(s.ownerSK, "!cancel", replyTo(held.ID))
	if out := s.waitOutcome(cmd.ID); out["type"] != "agent_turn_cancelled" {
		t.Fatalf("outcome %v", out)
	}
	s.waitNoAck(held.ID)
	w.waitFor("the deletion of the 👀", 10*time.Second, func() bool {
		for _, d := range w.events(protocol.KindDeletion) {
			if protocol.TagValue(d.Tags, "e") == r.ID && protocol.TagValue(d.Tags, "h") == s.channel {
				return true
			}
		}
		return false
	})

	// An answered turn: the 👀 was there, and is gone once the reply landed.
	next := s.mention(s.ownerSK, "quick job")
	s.waitReply(next.ID)
	w.waitFor("the 👀 on the second mention", 10*time.Second, func() bool { return len(w.ackReactions(next.ID)) == 1 })
	s.waitNoAck(next.ID)
	if n := len(w.ackReactions(cmd.ID)); n != 0 {
		t.Fatalf("an owner command got %d 👀", n)
	}
}

func TestTypingIsSentEveryFewSecondsWhileATurnRuns(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	w := s.watch(t)
	s.start(nil, "TESTAGENT_HANG_ON=1")
	root := nostr.Event{Kind: 9, Content: "a thread", CreatedAt: nostr.Now(), Tags: nostr.Tags{{"h", s.channel}}}
	s.relay.Publish(t, s.ownerSK, root)
	root = s.waitEvent(10*time.Second, nostr.Filter{Kinds: []int{9}, Authors: []string{s.ownerPK}, Tags: nostr.TagMap{"h": {s.channel}}})
	s.mention(s.ownerSK, "long job in the thread", nostr.Tag{"e", root.ID, "", "reply"})
	s.waitRecorded("session/prompt", 1)

	// One at turn start, then one every 3 s: three within ~6 s.
	w.waitFor("three typing events", 20*time.Second, func() bool { return len(w.events(protocol.KindTyping)) >= 3 })
	ty := w.events(protocol.KindTyping)[0]
	want := nostr.Tags{{"h", s.channel}, {"e", root.ID, "", "reply"}}
	if ty.Content != "" || !slices.EqualFunc(ty.Tags, want, slices.Equal) {
		t.Fatalf("typing event %q %v, want empty content and tags %v", ty.Content, ty.Tags, want)
	}

	cmd := s.mention(s.ownerSK, "!cancel", replyTo(root.ID))
	if out := s.waitOutcome(cmd.ID); out["type"] != "agent_turn_cancelled" {
		t.Fatalf("outcome %v", out)
	}
	s.waitRecorded("session/cancel", 1)
	// That no typing follows the turn's end is pinned without wall-clock waits by
	// TestAckTypingEveryThreeSecondsWhileTheTurnRuns (synctest, the same acker).
}

func TestPresenceOnlineAfterStartAndOfflineAtShutdown(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	w := s.watch(t)
	s.start(nil)
	status := func() []string {
		var out []string
		for _, e := range w.events(protocol.KindPresence) {
			if len(e.Tags) != 0 {
				t.Fatalf("presence carries tags %v", e.Tags)
			}
			out = append(out, e.Content)
		}
		return out
	}
	w.waitFor("online", 10*time.Second, func() bool { return len(status()) > 0 })
	if got := status(); got[0] != "online" {
		t.Fatalf("first presence %q, want online", got[0])
	}
	if err := s.harness.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	w.waitFor("offline", 10*time.Second, func() bool { st := status(); return st[len(st)-1] == "offline" })
	select {
	case err := <-s.exited:
		s.exited <- err
		if err != nil {
			t.Fatalf("buzz-acp exited with %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("buzz-acp did not exit after SIGTERM")
	}
}

func TestNoAcknowledgementFlagsSendNothing(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	w := s.watch(t)
	s.start([]string{"--no-reactions", "--no-typing"}, "BUZZ_ACP_NO_PRESENCE=true")
	m := s.mention(s.ownerSK, "hello")
	s.waitReply(m.ID)
	if err := s.harness.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-s.exited; err != nil {
		t.Fatalf("buzz-acp exited with %v", err)
	}
	s.exited <- nil
	if got := w.events(-1); len(got) != 0 {
		t.Fatalf("acknowledgements sent with them turned off: %v", got)
	}
	if got := s.ackOn(m.ID); len(got) != 0 {
		t.Fatalf("👀 stored with --no-reactions: %v", got)
	}
}

func TestReplayedEventKeepsItsEyesFromBeforeTheRestart(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	w := s.watch(t)
	s.start(nil, "TESTAGENT_HANG_ON=1")
	m := s.mention(s.ownerSK, "long job")
	s.waitRecorded("session/prompt", 1)
	w.waitFor("the 👀", 10*time.Second, func() bool { return len(w.ackReactions(m.ID)) == 1 })
	s.kill()
	s.start(nil) // the in-flight mention is replayed and answered
	s.waitReply(m.ID)
	s.waitNoAck(m.ID)
	if n := len(w.ackReactions(m.ID)); n != 1 {
		t.Fatalf("%d 👀 on the replayed mention, want the one from before the restart", n)
	}
}
