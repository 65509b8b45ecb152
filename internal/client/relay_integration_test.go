package client_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/buzz-harness/buzz/internal/client"
	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/protocol/ownerauth"
	"github.com/buzz-harness/buzz/internal/relay/relaytest"
	"github.com/nbd-wtf/go-nostr"
)

// runLive starts a Live session against the real relay and stops it at cleanup.
func runLive(t *testing.T, url, sk string, backoff func(int) time.Duration) *client.Live {
	t.Helper()
	if backoff == nil {
		backoff = func(int) time.Duration { return 10 * time.Millisecond }
	}
	l := client.NewLive(client.LiveConfig{RelayURL: url, SecretKey: sk, Backoff: backoff})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = l.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return l
}

// nextEvent returns the next event delivered on sub, skipping EOSE markers.
func nextEvent(t *testing.T, l *client.Live, sub string) *nostr.Event {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case in, ok := <-l.Events():
			if !ok {
				t.Fatal("events closed")
			}
			if in.Closed != "" {
				t.Fatalf("sub %s closed: %s", in.SubID, in.Closed)
			}
			if in.SubID == sub && in.Event != nil {
				return in.Event
			}
		case <-deadline:
			t.Fatalf("no event on %s", sub)
			return nil
		}
	}
}

func waitEOSE(t *testing.T, l *client.Live, sub string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case in := <-l.Events():
			if in.SubID == sub && in.EOSE {
				return
			}
		case <-deadline:
			t.Fatalf("no EOSE on %s", sub)
		}
	}
}

func waitReady(t *testing.T, l *client.Live) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.WaitConnected(ctx); err != nil {
		t.Fatalf("WaitConnected: %v", err)
	}
}

func TestLiveReceivesChannelMessagesFromRealRelay(t *testing.T) {
	s := relaytest.Start(t)
	owner := nostr.GeneratePrivateKey()
	ch := s.CreateChannel(t, owner, "general", true)
	l := runLive(t, s.URL, owner, nil)
	l.Subscribe("ch-"+ch, nostr.Filter{Kinds: []int{9}, Tags: nostr.TagMap{"h": {ch}}})
	waitReady(t, l)

	b := client.NewBridge(s.HTTPURL, owner)
	res, err := b.Publish(context.Background(), &nostr.Event{Kind: 9, Content: "hello", Tags: nostr.Tags{{"h", ch}}})
	if err != nil || !res.Accepted {
		t.Fatalf("publish: %+v %v", res, err)
	}
	if ev := nextEvent(t, l, "ch-"+ch); ev.ID != res.EventID || ev.Content != "hello" {
		t.Fatalf("got %+v", ev)
	}
}

func TestLiveCatchesUpOnMessagesPublishedWhileRelayWasDown(t *testing.T) {
	s := relaytest.Start(t)
	owner := nostr.GeneratePrivateKey()
	ch := s.CreateChannel(t, owner, "general", false)
	// The first reconnect waits until the test has published the missed message, so the
	// message is certainly sent while this client is disconnected.
	release := make(chan struct{})
	l := runLive(t, s.URL, owner, func(n int) time.Duration {
		if n == 1 {
			<-release
		}
		return 10 * time.Millisecond
	})
	sub := "ch-" + ch
	l.Subscribe(sub, nostr.Filter{Kinds: []int{9}, Tags: nostr.TagMap{"h": {ch}}, Since: ptr(nostr.Now() - 60)})
	waitReady(t, l)
	s.Publish(t, owner, nostr.Event{Kind: 9, Content: "before", Tags: nostr.Tags{{"h", ch}}})
	if ev := nextEvent(t, l, sub); ev.Content != "before" {
		t.Fatalf("got %q", ev.Content)
	}

	s.Restart(t)
	s.Publish(t, owner, nostr.Event{Kind: 9, Content: "while away", Tags: nostr.Tags{{"h", ch}}})
	close(release)
	// "before" is replayed by the since window but must not be delivered twice.
	if ev := nextEvent(t, l, sub); ev.Content != "while away" {
		t.Fatalf("got %q, want the missed message once", ev.Content)
	}
}

func ptr(ts nostr.Timestamp) *nostr.Timestamp { return &ts }

func TestLiveSubscriptionToPrivateChannelIsClosedAndForgotten(t *testing.T) {
	s := relaytest.Start(t)
	owner, outsider := nostr.GeneratePrivateKey(), nostr.GeneratePrivateKey()
	ch := s.CreateChannel(t, owner, "secret", true)
	l := runLive(t, s.URL, outsider, nil)
	l.Subscribe("ch-"+ch, nostr.Filter{Kinds: []int{9}, Tags: nostr.TagMap{"h": {ch}}})
	deadline := time.After(10 * time.Second)
	for {
		select {
		case in := <-l.Events():
			if in.Event != nil {
				t.Fatalf("outsider received %+v", in.Event)
			}
			if in.EOSE {
				t.Fatal("outsider's private-channel sub was not closed")
			}
			if in.Closed != "" {
				if !strings.HasPrefix(in.Closed, "restricted:") {
					t.Fatalf("closed with %q", in.Closed)
				}
				if subs := l.Subscriptions(); len(subs) != 0 {
					t.Fatalf("sub kept after restricted CLOSED: %v", subs)
				}
				return
			}
		case <-deadline:
			t.Fatal("no CLOSED")
		}
	}
}

func TestLivePublishesTypingIndicatorToOtherMembers(t *testing.T) {
	s := relaytest.Start(t)
	owner, agent := nostr.GeneratePrivateKey(), nostr.GeneratePrivateKey()
	agentPK, _ := nostr.GetPublicKey(agent)
	ch := s.CreateChannel(t, owner, "general", true)
	s.AddMember(t, owner, ch, agentPK, protocol.RoleBot)

	watcher := runLive(t, s.URL, owner, nil)
	watcher.Subscribe("typing", nostr.Filter{Kinds: []int{protocol.KindTyping}, Tags: nostr.TagMap{"h": {ch}}})
	waitReady(t, watcher)
	// Wait for EOSE so the live subscription is in place before publishing.
	waitEOSE(t, watcher, "typing")

	typer := runLive(t, s.URL, agent, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ev := &nostr.Event{Kind: protocol.KindTyping, Tags: nostr.Tags{{"h", ch}}}
	if err := typer.Publish(ctx, ev); err != nil {
		t.Fatalf("Publish typing: %v", err)
	}
	if got := nextEvent(t, watcher, "typing"); got.ID != ev.ID || got.PubKey != agentPK {
		t.Fatalf("got %+v", got)
	}
}

func TestBridgeQueryPagesWithBeforeIDOnRealRelay(t *testing.T) {
	s := relaytest.Start(t)
	owner := nostr.GeneratePrivateKey()
	ch := s.CreateChannel(t, owner, "general", false)
	for i := 0; i < 5; i++ {
		s.Publish(t, owner, nostr.Event{Kind: 9, Content: strconv.Itoa(i), CreatedAt: nostr.Timestamp(1700000000), Tags: nostr.Tags{{"h", ch}}})
	}
	b := client.NewBridge(s.URL, owner)
	f := client.Filter{Filter: nostr.Filter{Kinds: []int{9}, Tags: nostr.TagMap{"h": {ch}}, Limit: 2}}
	seen := map[string]bool{}
	for page := 0; page < 4; page++ {
		evs, err := b.Query(context.Background(), f)
		if err != nil {
			t.Fatalf("Query: %v", err)
		}
		for _, ev := range evs {
			if seen[ev.ID] {
				t.Fatalf("page %d repeats %s", page, ev.ID)
			}
			seen[ev.ID] = true
		}
		if len(evs) < 2 {
			break
		}
		last := evs[len(evs)-1]
		f.Until, f.BeforeID = &last.CreatedAt, last.ID
	}
	if len(seen) != 5 {
		t.Fatalf("paged %d events, want 5 (same-second events need before_id)", len(seen))
	}
}

// hasExactTag reports whether tags holds want exactly once.
func hasExactTag(tags nostr.Tags, want nostr.Tag) bool {
	n := 0
	for _, t := range tags {
		if slices.Equal(t, want) {
			n++
		}
	}
	return n == 1
}

func TestBridgePutsTheExactAuthTagOnEventsItSigns(t *testing.T) {
	s := relaytest.Start(t)
	owner, agent := nostr.GeneratePrivateKey(), nostr.GeneratePrivateKey()
	agentPK, _ := nostr.GetPublicKey(agent)
	ch := s.CreateChannel(t, owner, "general", false)
	s.AddMember(t, owner, ch, agentPK, protocol.RoleBot)
	// Conditions are part of the signed message: they must arrive exactly as issued.
	tag, err := ownerauth.Issue(owner, agentPK, "kind=9&created_at>1", nil)
	if err != nil {
		t.Fatal(err)
	}
	b := client.NewBridge(s.URL, agent)
	b.AuthTag = tag.JSON()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	ev := &nostr.Event{Kind: 9, Content: "hi", Tags: nostr.Tags{{"h", ch}}}
	if res, err := b.Publish(ctx, ev); err != nil || !res.Accepted {
		t.Fatalf("publish: %+v, %v", res, err)
	}
	pre := &nostr.Event{Kind: 9, Content: "signed before", CreatedAt: nostr.Now(), Tags: nostr.Tags{{"h", ch}}}
	if err := pre.Sign(agent); err != nil {
		t.Fatal(err)
	}
	if res, err := b.Publish(ctx, pre); err != nil || !res.Accepted {
		t.Fatalf("publish pre-signed: %+v, %v", res, err)
	}
	got := map[string]nostr.Event{}
	for _, e := range s.Query(t, owner, nostr.Filter{IDs: []string{ev.ID, pre.ID}}) {
		got[e.ID] = e
	}
	if !hasExactTag(got[ev.ID].Tags, tag.NostrTag()) {
		t.Fatalf("stored tags %v, want the auth tag %v once", got[ev.ID].Tags, tag.NostrTag())
	}
	if got[pre.ID].Tags.Find("auth") != nil {
		t.Fatalf("a pre-signed event was changed: %v", got[pre.ID].Tags)
	}

	b.AuthTag = `["auth","nothex","",""]`
	if _, err := b.Publish(ctx, &nostr.Event{Kind: 9, Tags: nostr.Tags{{"h", ch}}}); err == nil || !strings.Contains(err.Error(), "BUZZ_AUTH_TAG") {
		t.Fatalf("bad auth tag: err %v, want one naming BUZZ_AUTH_TAG", err)
	}
}

func TestLivePutsTheAuthTagOnEventsItSigns(t *testing.T) {
	s := relaytest.Start(t)
	owner, agent := nostr.GeneratePrivateKey(), nostr.GeneratePrivateKey()
	agentPK, _ := nostr.GetPublicKey(agent)
	ch := s.CreateChannel(t, owner, "general", true)
	s.AddMember(t, owner, ch, agentPK, protocol.RoleBot)
	tag, _ := ownerauth.Issue(owner, agentPK, "", nil)

	watcher := runLive(t, s.URL, owner, nil)
	watcher.Subscribe("typing", nostr.Filter{Kinds: []int{protocol.KindTyping}, Tags: nostr.TagMap{"h": {ch}}})
	waitReady(t, watcher)
	waitEOSE(t, watcher, "typing")

	typer := client.NewLive(client.LiveConfig{RelayURL: s.URL, SecretKey: agent, AuthTag: tag.JSON(),
		Backoff: func(int) time.Duration { return 10 * time.Millisecond }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = typer.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	pctx, pcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer pcancel()
	if err := typer.Publish(pctx, &nostr.Event{Kind: protocol.KindTyping, Tags: nostr.Tags{{"h", ch}}}); err != nil {
		t.Fatalf("Publish typing (the relay takes an AUTH with the auth tag): %v", err)
	}
	if got := nextEvent(t, watcher, "typing"); !hasExactTag(got.Tags, tag.NostrTag()) {
		t.Fatalf("typing tags %v, want the auth tag", got.Tags)
	}
}
