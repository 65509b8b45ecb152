package relay_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/relay/relaytest"
)

func TestRelaySendsAuthChallengeOnConnect(t *testing.T) {
	s := relaytest.Start(t)
	c := dialRaw(t, s.URL)
	if !protocol.IsHex64(c.challenge) {
		t.Fatalf("challenge %q is not 64 hex characters", c.challenge)
	}
}

func TestRelayRefusesREQBeforeAuth(t *testing.T) {
	s := relaytest.Start(t)
	c := dialRaw(t, s.URL)
	c.send("REQ", "s1", map[string]any{"kinds": []int{9}})
	notice := c.read()
	if notice[0] != "NOTICE" || !hasPrefix(notice[1], "auth-required:") {
		t.Fatalf("got %v, want NOTICE auth-required", notice)
	}
	closed := c.read()
	if closed[0] != "CLOSED" || closed[1] != "s1" || !hasPrefix(closed[2], "auth-required:") {
		t.Fatalf("got %v, want CLOSED s1 auth-required", closed)
	}
}

func TestRelayRefusesEVENTBeforeAuth(t *testing.T) {
	s := relaytest.Start(t)
	c := dialRaw(t, s.URL)
	ok := c.publish(newUser().sk, nostr.Event{Kind: 1, Content: "hi"})
	if ok[2] != false || !hasPrefix(ok[3], "auth-required:") {
		t.Fatalf("got %v, want OK false auth-required", ok)
	}
}

func TestRelayAcceptsAuthWithOtherLoopbackSpelling(t *testing.T) {
	s := relaytest.Start(t)
	c := dialRaw(t, s.URL) // Host header is 127.0.0.1:port
	relayTag := strings.Replace(s.URL, "127.0.0.1", "localhost", 1) + "/"
	if ok := c.auth(newUser().sk, relayTag, time.Now()); ok[2] != true {
		t.Fatalf("AUTH with %s refused: %v", relayTag, ok)
	}
}

func TestRelayRefusesAuthWithStaleTimestamp(t *testing.T) {
	s := relaytest.Start(t)
	c := dialRaw(t, s.URL)
	ok := c.auth(newUser().sk, s.URL, time.Now().Add(-2*time.Minute))
	if ok[2] != false || !hasPrefix(ok[3], "auth-required:") {
		t.Fatalf("got %v, want OK false auth-required", ok)
	}
}

func TestRelayRefusesAuthWithWrongChallenge(t *testing.T) {
	s := relaytest.Start(t)
	c := dialRaw(t, s.URL)
	c.challenge = strings.Repeat("0", 64)
	if ok := c.auth(newUser().sk, s.URL, time.Now()); ok[2] != false {
		t.Fatalf("AUTH with a wrong challenge accepted: %v", ok)
	}
}

func TestRelayRefusesAuthForAnotherRelayURL(t *testing.T) {
	s := relaytest.Start(t)
	c := dialRaw(t, s.URL)
	if ok := c.auth(newUser().sk, "ws://127.0.0.1:1", time.Now()); ok[2] != false {
		t.Fatalf("AUTH for another relay accepted: %v", ok)
	}
}

func TestRelayRefusesSecondAuth(t *testing.T) {
	s := relaytest.Start(t)
	c := dialRaw(t, s.URL)
	c.mustAuth(newUser().sk, s.URL)
	ok := c.auth(newUser().sk, s.URL, time.Now())
	if ok[2] != false || ok[3] != "auth-required: already authenticated" {
		t.Fatalf("got %v, want already authenticated", ok)
	}
}

func TestRelayDeliversLiveChannelMessageToSubscriber(t *testing.T) {
	s := sharedRelay
	alice, bob := newUser(), newUser()
	ch := s.CreateChannel(t, alice.sk, "general", false)
	rb := s.Connect(t, bob.sk)
	sub := subscribe(t, rb, nostr.Filter{Kinds: []int{9}, Tags: nostr.TagMap{"h": {ch}}})

	ra := s.Connect(t, alice.sk)
	ev := msg(ch, "hello bob")
	ev.CreatedAt = nostr.Now()
	ev.Sign(alice.sk)
	if err := ra.Publish(context.Background(), ev); err != nil {
		t.Fatalf("publish: %v", err)
	}
	got := nextEvent(t, sub)
	if got.ID != ev.ID || got.Content != "hello bob" {
		t.Fatalf("got %v, want the published message", got)
	}
}

func TestRelayReturnsStoredEventsBeforeEOSE(t *testing.T) {
	s := sharedRelay
	alice := newUser()
	ch := s.CreateChannel(t, alice.sk, "general", false)
	s.Publish(t, alice.sk, msg(ch, "one"))
	s.Publish(t, alice.sk, msg(ch, "two"))

	r := s.Connect(t, newUser().sk)
	evs, err := r.QuerySync(context.Background(), nostr.Filter{Kinds: []int{9}, Tags: nostr.TagMap{"h": {ch}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 {
		t.Fatalf("got %d stored events, want 2", len(evs))
	}
}

func TestRelayAnswersDuplicateWithDuplicatePrefix(t *testing.T) {
	s := relaytest.Start(t)
	u := newUser()
	c := dialRaw(t, s.URL)
	c.mustAuth(u.sk, s.URL)
	ev := nostr.Event{Kind: 1, Content: "once", CreatedAt: nostr.Now(), Tags: nostr.Tags{}}
	ev.Sign(u.sk)
	if ok := c.publish(u.sk, ev); ok[2] != true || ok[3] != "" {
		t.Fatalf("first publish: %v", ok)
	}
	c.send("EVENT", ev)
	ok := c.readUntil("OK")
	if ok[2] != true || !hasPrefix(ok[3], "duplicate:") {
		t.Fatalf("second publish: %v, want OK true duplicate:", ok)
	}
}

func TestRelayRefusesEventWithBadSignature(t *testing.T) {
	s := relaytest.Start(t)
	u := newUser()
	c := dialRaw(t, s.URL)
	c.mustAuth(u.sk, s.URL)
	ev := nostr.Event{Kind: 1, Content: "x", CreatedAt: nostr.Now(), Tags: nostr.Tags{}}
	ev.Sign(u.sk)
	ev.Sig = strings.Repeat("ab", 64)
	c.send("EVENT", ev)
	ok := c.readUntil("OK")
	if ok[2] != false || !hasPrefix(ok[3], "invalid:") {
		t.Fatalf("got %v, want OK false invalid:", ok)
	}
	if n := len(s.Query(t, u.sk, nostr.Filter{Authors: []string{u.pk}})); n != 0 {
		t.Fatalf("%d events stored, want 0", n)
	}
}

func TestRelayRefusesEventWithBadID(t *testing.T) {
	s := relaytest.Start(t)
	u := newUser()
	c := dialRaw(t, s.URL)
	c.mustAuth(u.sk, s.URL)
	ev := nostr.Event{Kind: 1, Content: "x", CreatedAt: nostr.Now(), Tags: nostr.Tags{}}
	ev.Sign(u.sk)
	ev.Content = "tampered"
	c.send("EVENT", ev)
	if ok := c.readUntil("OK"); ok[2] != false || !hasPrefix(ok[3], "invalid:") {
		t.Fatalf("got %v, want OK false invalid:", ok)
	}
}

func TestRelayRefusesEventSignedByAnotherKey(t *testing.T) {
	s := relaytest.Start(t)
	c := dialRaw(t, s.URL)
	c.mustAuth(newUser().sk, s.URL)
	if ok := c.publish(newUser().sk, nostr.Event{Kind: 1, Content: "x"}); ok[2] != false || !hasPrefix(ok[3], "restricted:") {
		t.Fatalf("got %v, want OK false restricted:", ok)
	}
}

func TestRelayRefusesUnknownAndRelayOnlyKinds(t *testing.T) {
	s := relaytest.Start(t)
	u := newUser()
	c := dialRaw(t, s.URL)
	c.mustAuth(u.sk, s.URL)
	for kind, want := range map[int]string{
		31234: "restricted: unknown event kind",
		39000: "restricted: relay-only kind",
		44100: "restricted: relay-only kind",
	} {
		if ok := c.publish(u.sk, nostr.Event{Kind: kind, Tags: nostr.Tags{{"d", "x"}, {"p", u.pk}}}); ok[2] != false || ok[3] != want {
			t.Errorf("kind %d: got %v, want %q", kind, ok, want)
		}
	}
}

func TestRelayRefusesNonUUIDChannelID(t *testing.T) {
	s := relaytest.Start(t)
	u := newUser()
	c := dialRaw(t, s.URL)
	c.mustAuth(u.sk, s.URL)
	ok := c.publish(u.sk, msg("not-a-uuid", "hi"))
	if ok[2] != false || !hasPrefix(ok[3], "invalid:") || !strings.Contains(ok[3].(string), "UUID") {
		t.Fatalf("got %v, want invalid: ... UUID", ok)
	}
}

func TestRelayAnswersMalformedFrameWithNoticeAndKeepsServing(t *testing.T) {
	s := relaytest.Start(t)
	u := newUser()
	c := dialRaw(t, s.URL)
	for _, bad := range []string{`not json`, `{}`, `[]`, `["WHAT"]`, `["EVENT"]`, `["EVENT",{"kind":"x"}]`} {
		c.sendRaw([]byte(bad))
		if m := c.read(); m[0] != "NOTICE" || !hasPrefix(m[1], "invalid:") {
			t.Errorf("%s: got %v, want NOTICE invalid:", bad, m)
		}
	}
	c.mustAuth(u.sk, s.URL)
	c.send("REQ", "s", map[string]any{"ids": []string{"xyz"}})
	if m := c.read(); m[0] != "CLOSED" || m[1] != "s" || !hasPrefix(m[2], "invalid:") {
		t.Errorf("bad filter: got %v, want CLOSED s invalid:", m)
	}
	if ok := c.publish(u.sk, nostr.Event{Kind: 1, Content: "still here"}); ok[2] != true {
		t.Fatalf("publish after bad frames: %v", ok)
	}
}

func TestRelayNoticesOversizedFrameAndKeepsServingOthers(t *testing.T) {
	s := relaytest.Start(t)
	big := dialRaw(t, s.URL)
	other := dialRaw(t, s.URL)
	payload := `["EVENT",{"content":"` + strings.Repeat("a", 600*1024) + `"}]`
	big.sendRaw([]byte(payload))
	if m := big.read(); m[0] != "NOTICE" || !hasPrefix(m[1], "invalid:") {
		t.Fatalf("got %v, want NOTICE invalid:", m)
	}
	u := newUser()
	other.mustAuth(u.sk, s.URL)
	if ok := other.publish(u.sk, nostr.Event{Kind: 1, Content: "fine"}); ok[2] != true {
		t.Fatalf("other client: %v", ok)
	}
}

func TestRelayFansOutEphemeralEventsWithoutStoring(t *testing.T) {
	s := sharedRelay
	alice, bob := newUser(), newUser()
	ch := s.CreateChannel(t, alice.sk, "general", false)
	rb := s.Connect(t, bob.sk)
	sub := subscribe(t, rb, nostr.Filter{Kinds: []int{protocol.KindTyping}, Tags: nostr.TagMap{"h": {ch}}})

	c := dialRaw(t, s.URL)
	c.mustAuth(alice.sk, s.URL)
	if ok := c.publish(alice.sk, nostr.Event{Kind: protocol.KindTyping, Tags: nostr.Tags{{"h", ch}}}); ok[2] != true {
		t.Fatalf("typing: %v", ok)
	}
	if got := nextEvent(t, sub); got.Kind != protocol.KindTyping {
		t.Fatalf("got kind %d", got.Kind)
	}
	if n := len(s.Query(t, alice.sk, nostr.Filter{Kinds: []int{protocol.KindTyping}})); n != 0 {
		t.Fatalf("ephemeral event stored (%d found)", n)
	}
}

func TestRelayAcceptsEphemeralEventWithNoListeners(t *testing.T) {
	s := relaytest.Start(t)
	alice := newUser()
	ch := s.CreateChannel(t, alice.sk, "general", false)
	c := dialRaw(t, s.URL)
	c.mustAuth(alice.sk, s.URL)
	if ok := c.publish(alice.sk, nostr.Event{Kind: protocol.KindTyping, Tags: nostr.Tags{{"h", ch}}}); ok[2] != true {
		t.Fatalf("typing with nobody listening: %v, want OK true", ok)
	}
}

func TestRelayCountsOverWebSocket(t *testing.T) {
	s := relaytest.Start(t)
	alice := newUser()
	ch := s.CreateChannel(t, alice.sk, "general", false)
	for i := 0; i < 3; i++ {
		s.Publish(t, alice.sk, msg(ch, fmt.Sprint("m", i)))
	}
	c := dialRaw(t, s.URL)
	c.mustAuth(alice.sk, s.URL)
	c.send("COUNT", "c1", map[string]any{"kinds": []int{9}, "#h": []string{ch}})
	m := c.readUntil("COUNT")
	if got := m[2].(map[string]any)["count"]; got != float64(3) {
		t.Fatalf("count = %v, want 3", got)
	}
}

func TestRelayServesNIP11AtRootAndInfo(t *testing.T) {
	s := relaytest.Start(t)
	for _, path := range []string{"/", "/info"} {
		req, _ := http.NewRequest(http.MethodGet, s.HTTPURL+path, nil)
		req.Header.Set("Accept", "application/nostr+json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Name       string `json:"name"`
			Self       string `json:"self"`
			Limitation struct {
				AuthRequired bool `json:"auth_required"`
				MaxEventTags int  `json:"max_event_tags"`
			} `json:"limitation"`
		}
		decodeJSON(t, resp, &doc)
		if doc.Self != s.Relay.PublicKey() || !doc.Limitation.AuthRequired || doc.Name == "" || doc.Limitation.MaxEventTags != 2000 {
			t.Errorf("%s: NIP-11 = %+v", path, doc)
		}
	}
}

func TestRelaySearchFindsMessagesByWord(t *testing.T) {
	s := sharedRelay
	alice := newUser()
	ch := s.CreateChannel(t, alice.sk, "general", false)
	word := "pipeline" + alice.pk[:8] // unique on the shared relay
	s.Publish(t, alice.sk, msg(ch, "the deploy "+word+" is green"))
	s.Publish(t, alice.sk, msg(ch, "lunch at noon"+alice.pk[:8]))
	got := s.Query(t, alice.sk, nostr.Filter{Kinds: []int{9}, Search: word})
	if len(got) != 1 || !strings.Contains(got[0].Content, word) {
		t.Fatalf("search returned %v", got)
	}
	r := s.Connect(t, alice.sk)
	evs, err := r.QuerySync(context.Background(), nostr.Filter{Kinds: []int{9}, Search: `lunch "noon` + alice.pk[:8]})
	if err != nil || len(evs) != 1 {
		t.Fatalf("WS search: %v, %d results", err, len(evs))
	}
}

// A REQ whose stored history is larger than the connection's send buffer is delivered whole to a
// client that reads slowly: history gets back-pressure, not the slow-client disconnect.
func TestBigHistoryReachesSlowReaderWhole(t *testing.T) {
	s := relaytest.Start(t)
	u := newUser()
	ch := s.CreateChannel(t, u.sk, "busy", false)
	pub := dialRaw(t, s.URL)
	pub.mustAuth(u.sk, s.URL)
	const n = 1500
	base := nostr.Now() - n
	for i := range n {
		ev := msg(ch, fmt.Sprintf("m%d %s", i, strings.Repeat("x", 8<<10))) // more than socket buffers hold
		ev.CreatedAt = base + nostr.Timestamp(i)
		ev.Sign(u.sk)
		pub.send("EVENT", ev)
	}
	for range n {
		pub.readUntil("OK")
	}

	c := dialRaw(t, s.URL)
	c.mustAuth(u.sk, s.URL)
	c.send("REQ", "all", nostr.Filter{Kinds: []int{protocol.KindStreamMessage}, Tags: nostr.TagMap{"h": {ch}}, Limit: n})
	time.Sleep(300 * time.Millisecond) // read nothing for a while: the server's buffer fills
	got := 0
	for {
		f := c.read()
		if f[0] == "EOSE" {
			break
		}
		if f[0] == "EVENT" {
			got++
		}
	}
	if got != n {
		t.Fatalf("got %d of %d stored events before EOSE", got, n)
	}
}
