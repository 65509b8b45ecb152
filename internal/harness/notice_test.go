package harness

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/client"
	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/relay/relaytest"
)

func signed(t *testing.T, sk string, kind int, content string, tags nostr.Tags) *nostr.Event {
	t.Helper()
	ev := &nostr.Event{Kind: kind, Content: content, Tags: tags, CreatedAt: nostr.Now()}
	if err := ev.Sign(sk); err != nil {
		t.Fatal(err)
	}
	return ev
}

func TestFailureNoticeTagsRequestersNewestFirstNeverSelfNorAnotherNoticesAuthor(t *testing.T) {
	const ch = "3f1e2d4c-5b6a-4789-8abc-def012345678"
	alice, bob, otherBot, self := nostr.GeneratePrivateKey(), nostr.GeneratePrivateKey(), nostr.GeneratePrivateKey(), nostr.GeneratePrivateKey()
	pk := func(sk string) string { p, _ := nostr.GetPublicKey(sk); return p }
	root := signed(t, alice, 9, "top", nostr.Tags{{"h", ch}})
	in := nostr.Tags{{"h", ch}, {"e", root.ID, "", "root"}}
	evs := []*nostr.Event{
		signed(t, alice, 9, "a1", in),
		signed(t, otherBot, 9, "I failed", append(slices.Clone(in), nostr.Tag{FailureMarker, "1"})),
		signed(t, self, 9, "me", in),
		signed(t, bob, 9, "b1", in),
		signed(t, alice, 9, "a2", in),
	}
	n := failureNotice(ch, convKey{Channel: ch, Root: root.ID}, evs, pk(self), "sorry", time.Now())
	var ps []string
	marked := false
	for _, tg := range n.Tags {
		switch tg[0] {
		case "p":
			ps = append(ps, tg[1])
		case FailureMarker:
			marked = len(tg) == 2 && tg[1] == "1"
		}
	}
	if want := []string{pk(alice), pk(bob)}; !slices.Equal(ps, want) {
		t.Errorf("p tags = %v, want %v (newest first, distinct, no self, no notice author)", ps, want)
	}
	if !marked {
		t.Error("notice lacks [buzz:agent-failure 1]")
	}
	th := protocol.ParseThread(n.Tags)
	if n.Kind != 9 || th.Root != root.ID || th.Parent != evs[4].ID {
		t.Errorf("kind %d thread %+v, want kind 9 rooted at %s replying to the last trigger", n.Kind, th, root.ID)
	}
	if ch2, _ := protocol.ChannelID(n.Tags); ch2 != ch {
		t.Errorf("h = %q", ch2)
	}
}

func TestFailureNoticeRecipientsAreCappedAtFifty(t *testing.T) {
	var evs []*nostr.Event
	for range 60 {
		evs = append(evs, &nostr.Event{PubKey: nostr.GeneratePrivateKey(), Kind: 9}) // any distinct hex
	}
	if got := noticeRecipients(evs, "self"); len(got) != maxNoticeRecipients || got[0] != evs[59].PubKey {
		t.Fatalf("%d recipients (first %q), want %d starting with the newest", len(got), got[0], maxNoticeRecipients)
	}
}

func TestFailureNoticeToATopLevelMentionIsASingleReplyTag(t *testing.T) {
	const ch = "3f1e2d4c-5b6a-4789-8abc-def012345678"
	m := signed(t, nostr.GeneratePrivateKey(), 9, "hi", nostr.Tags{{"h", ch}})
	n := failureNotice(ch, convKey{Channel: ch}, []*nostr.Event{m}, "self", "sorry", time.Now())
	var es []nostr.Tag
	for _, tg := range n.Tags {
		if tg[0] == "e" {
			es = append(es, tg)
		}
	}
	if len(es) != 1 || es[0][1] != m.ID || es[0][3] != "reply" {
		t.Fatalf("e tags %v, want one reply tag to the mention", es)
	}
}

// A dead-lettered batch's notice goes through the harness's real publish path to a real relay,
// and a requester subscribed only to #p (its own key) receives it.
func TestDeadLetteredBatchNoticeReachesTheRequestersPSubscription(t *testing.T) {
	srv := relaytest.Start(t)
	ownerSK, agentSK, reqSK := nostr.GeneratePrivateKey(), nostr.GeneratePrivateKey(), nostr.GeneratePrivateKey()
	agentPK, _ := nostr.GetPublicKey(agentSK)
	reqPK, _ := nostr.GetPublicKey(reqSK)
	ch := srv.CreateChannel(t, ownerSK, "general", false)
	srv.AddMember(t, ownerSK, ch, agentPK, "bot")
	srv.AddMember(t, ownerSK, ch, reqPK, "member")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	live := client.NewLive(client.LiveConfig{RelayURL: srv.URL, SecretKey: reqSK})
	done := make(chan struct{})
	go func() { defer close(done); _ = live.Run(ctx) }()
	defer func() { cancel(); <-done }()
	live.Subscribe("mine", nostr.Filter{Kinds: []int{9}, Tags: nostr.TagMap{"p": {reqPK}}})

	h, err := New(Config{RelayURL: srv.URL, SecretKey: agentSK, AgentCommand: "true", AgentCwd: t.TempDir(), StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer h.store.Close()
	defer h.jrnl.Close()
	req := signed(t, reqSK, 9, "please do the thing", nostr.Tags{{"h", ch}, {"p", agentPK}})
	srv.Publish(t, reqSK, *req)
	k := convKey{Channel: ch, Root: req.ID}
	q := newTestQueue()
	q.Push(k, req, time.Now())
	b, _ := q.Next(time.Now())
	// Wait for the subscription's stored events to end, so the notice arrives live.
	for in := range live.Events() {
		if in.EOSE {
			break
		}
	}
	h.deadLetter(ctx, turnInput{channel: channel{ID: ch}, conv: k, batch: b, turnID: "t"}, errors.New("agent kept crashing"))
	h.tasks.Wait()
	for {
		select {
		case in := <-live.Events():
			if in.Event == nil {
				continue
			}
			if in.Event.PubKey != agentPK || !isFailureNotice(in.Event) || protocol.ParseThread(in.Event.Tags).Parent != req.ID {
				t.Fatalf("requester got %+v, want the agent's failure notice replying to its request", in.Event)
			}
			return
		case <-ctx.Done():
			t.Fatal("the requester's #p subscription never received the failure notice")
		}
	}
}
