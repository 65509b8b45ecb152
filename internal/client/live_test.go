package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/protocol/ownerauth"
	"github.com/buzz-harness/buzz/internal/testbin"
	"github.com/coder/websocket"
	"github.com/nbd-wtf/go-nostr"
)

// fakeRelay is a scripted NIP-01/42 peer on a real socket: each accepted connection is handed to
// the test, which drives it frame by frame. It checks AUTH exactly as the Buzz relay does.
type fakeRelay struct {
	srv   *httptest.Server
	conns chan *fakeConn
}

type fakeConn struct {
	t         *testing.T
	c         *websocket.Conn
	ctx       context.Context
	challenge string
	relayURL  string
	frames    chan []json.RawMessage
	done      chan struct{}
}

func newFakeRelay(t *testing.T) *fakeRelay {
	t.Helper()
	fr := &fakeRelay{conns: make(chan *fakeConn, 8)}
	fr.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		fc := &fakeConn{t: t, c: c, ctx: ctx, challenge: fmt.Sprintf("%064x", time.Now().UnixNano()),
			relayURL: "ws://" + r.Host, frames: make(chan []json.RawMessage, 64), done: make(chan struct{})}
		fc.send("AUTH", fc.challenge)
		go func() {
			defer close(fc.done)
			for {
				_, raw, err := c.Read(ctx)
				if err != nil {
					close(fc.frames)
					return
				}
				var arr []json.RawMessage
				if json.Unmarshal(raw, &arr) == nil {
					fc.frames <- arr
				}
			}
		}()
		fr.conns <- fc
		<-fc.done
	}))
	t.Cleanup(fr.srv.Close)
	return fr
}

func (fr *fakeRelay) url() string { return "ws" + strings.TrimPrefix(fr.srv.URL, "http") }

func (fr *fakeRelay) accept(t *testing.T) *fakeConn {
	t.Helper()
	select {
	case fc := <-fr.conns:
		return fc
	case <-time.After(10 * time.Second):
		t.Fatal("client did not connect")
		return nil
	}
}

func (fc *fakeConn) send(vals ...any) {
	raw, _ := json.Marshal(vals)
	_ = fc.c.Write(fc.ctx, websocket.MessageText, raw)
}

// next returns the next client frame of the given type, failing on anything else.
func (fc *fakeConn) next(label string) []json.RawMessage {
	fc.t.Helper()
	select {
	case arr, ok := <-fc.frames:
		if !ok {
			fc.t.Fatalf("connection closed while waiting for %s", label)
		}
		var got string
		_ = json.Unmarshal(arr[0], &got)
		if got != label {
			fc.t.Fatalf("client sent %s, want %s", got, label)
		}
		return arr
	case <-time.After(10 * time.Second):
		fc.t.Fatalf("no %s frame from client", label)
		return nil
	}
}

// authenticate reads the client's AUTH, verifies it like the relay and answers OK.
func (fc *fakeConn) authenticate() *nostr.Event {
	fc.t.Helper()
	arr := fc.next("AUTH")
	var ev nostr.Event
	if err := json.Unmarshal(arr[1], &ev); err != nil {
		fc.t.Fatal(err)
	}
	if err := protocol.VerifyAuthEvent(&ev, fc.challenge, fc.relayURL, time.Now()); err != nil {
		fc.t.Fatalf("AUTH rejected: %v", err)
	}
	fc.send("OK", ev.ID, true, "")
	return &ev
}

func (fc *fakeConn) req() (string, nostr.Filter) {
	fc.t.Helper()
	arr := fc.next("REQ")
	var id string
	var f nostr.Filter
	_ = json.Unmarshal(arr[1], &id)
	if err := json.Unmarshal(arr[2], &f); err != nil {
		fc.t.Fatal(err)
	}
	return id, f
}

func (fc *fakeConn) kill() { fc.c.CloseNow() }

func signedEvent(t *testing.T, createdAt int64, content string) *nostr.Event {
	t.Helper()
	ev := &nostr.Event{Kind: 9, CreatedAt: nostr.Timestamp(createdAt), Content: content, Tags: nostr.Tags{}}
	if err := ev.Sign(nostr.GeneratePrivateKey()); err != nil {
		t.Fatal(err)
	}
	return ev
}

func startLive(t *testing.T, fr *fakeRelay, setup func(*Live)) (*Live, chan error) {
	t.Helper()
	l := NewLive(LiveConfig{RelayURL: fr.url(), SecretKey: nostr.GeneratePrivateKey(), Backoff: func(int) time.Duration { return time.Millisecond }})
	if setup != nil {
		setup(l)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("Run did not return after cancel")
		}
	})
	return l, done
}

func recv(t *testing.T, l *Live) Incoming {
	t.Helper()
	select {
	case in, ok := <-l.Events():
		if !ok {
			t.Fatal("events closed")
		}
		return in
	case <-time.After(10 * time.Second):
		t.Fatal("no incoming event")
		return Incoming{}
	}
}

func waitConnected(t *testing.T, l *Live) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.WaitConnected(ctx); err != nil {
		t.Fatalf("WaitConnected: %v", err)
	}
}

func TestLiveAuthenticatesWithDialledURLBeforeSubscribing(t *testing.T) {
	fr := newFakeRelay(t)
	since := nostr.Timestamp(100)
	l, _ := startLive(t, fr, func(l *Live) {
		l.Subscribe("ch-a", nostr.Filter{Kinds: []int{9}, Tags: nostr.TagMap{"h": {"a"}}, Since: &since})
	})
	fc := fr.accept(t)
	auth := fc.authenticate() // the first client frame must be AUTH
	if auth.PubKey != l.PublicKey() {
		t.Fatalf("AUTH signed by %s, want %s", auth.PubKey, l.PublicKey())
	}
	id, f := fc.req()
	if id != "ch-a" || f.Since == nil || *f.Since != 100 || f.Tags["h"][0] != "a" {
		t.Fatalf("REQ %s %+v", id, f)
	}
	waitConnected(t, l)
}

func TestLiveResubscribesAfterReconnectFromLastSeenMinusFiveSeconds(t *testing.T) {
	fr := newFakeRelay(t)
	since := nostr.Timestamp(100)
	l, _ := startLive(t, fr, func(l *Live) { l.Subscribe("ch-a", nostr.Filter{Kinds: []int{9}, Since: &since}) })
	fc := fr.accept(t)
	fc.authenticate()
	fc.req()
	old := signedEvent(t, 1000, "old")
	fc.send("EVENT", "ch-a", old)
	fc.send("EOSE", "ch-a")
	if in := recv(t, l); in.Event == nil || in.Event.ID != old.ID {
		t.Fatalf("got %+v", in)
	}
	if in := recv(t, l); !in.EOSE {
		t.Fatalf("got %+v, want EOSE", in)
	}
	fc.kill()

	fc2 := fr.accept(t)
	fc2.authenticate()
	id, f := fc2.req()
	if id != "ch-a" || f.Since == nil || *f.Since != 995 {
		t.Fatalf("re-REQ %s since=%v, want ch-a since=995", id, f.Since)
	}
}

// Stored events arrive newest first: a connection lost before EOSE must not move the floor to
// the newest one, or the older stored events still to come would never be asked for again.
func TestLiveConnectionLostBeforeEOSEResubscribesFromTheOldFloor(t *testing.T) {
	fr := newFakeRelay(t)
	since := nostr.Timestamp(100)
	l, _ := startLive(t, fr, func(l *Live) { l.Subscribe("ch-a", nostr.Filter{Kinds: []int{9}, Since: &since}) })
	fc := fr.accept(t)
	fc.authenticate()
	fc.req()
	newest := signedEvent(t, 1000, "newest stored")
	fc.send("EVENT", "ch-a", newest)
	if in := recv(t, l); in.Event == nil || in.Event.ID != newest.ID {
		t.Fatalf("got %+v", in)
	}
	fc.kill() // before the older stored events and EOSE

	fc2 := fr.accept(t)
	fc2.authenticate()
	id, f := fc2.req()
	if id != "ch-a" || f.Since == nil || *f.Since != 100 {
		t.Fatalf("re-REQ %s since=%v, want ch-a since=100 (the backlog was not finished)", id, f.Since)
	}
}

func TestLiveResubscribeKeepsLaterFilterSince(t *testing.T) {
	since := nostr.Timestamp(2000)
	s := &liveSub{filters: []nostr.Filter{{Since: &since}}, lastSeen: 1000}
	if got := s.reqFilters(true); *got[0].Since != 2000 {
		t.Fatalf("since = %d, want 2000", *got[0].Since)
	}
	s.lastSeen = 3000
	if got := s.reqFilters(true); *got[0].Since != 2995 || *s.filters[0].Since != 2000 {
		t.Fatalf("since = %d (filter %d), want 2995 without mutating the desired filter", *got[0].Since, *s.filters[0].Since)
	}
}

func TestLiveDeliversEachEventOnceAcrossReconnects(t *testing.T) {
	fr := newFakeRelay(t)
	l, _ := startLive(t, fr, func(l *Live) { l.Subscribe("s", nostr.Filter{Kinds: []int{9}}) })
	fc := fr.accept(t)
	fc.authenticate()
	fc.req()
	a := signedEvent(t, 1000, "a")
	fc.send("EVENT", "s", a)
	fc.send("EVENT", "s", a)
	recv(t, l)
	fc.kill()

	fc2 := fr.accept(t)
	fc2.authenticate()
	fc2.req()
	b := signedEvent(t, 1001, "b")
	fc2.send("EVENT", "s", a) // replayed by the since window
	fc2.send("EVENT", "s", b)
	if in := recv(t, l); in.Event == nil || in.Event.ID != b.ID {
		t.Fatalf("got %+v, want only the new event", in)
	}
}

func TestLiveDropsACopyOfADeliveredEventWithoutCheckingItAgain(t *testing.T) {
	fr := newFakeRelay(t)
	logs := &testbin.Output{} // read while Live writes it
	l, _ := startLive(t, fr, func(l *Live) {
		l.log = slog.New(slog.NewTextHandler(logs, nil))
		l.Subscribe("a", nostr.Filter{Kinds: []int{9}})
		l.Subscribe("b", nostr.Filter{Authors: []string{"x"}})
	})
	fc := fr.accept(t)
	fc.authenticate()
	fc.req()
	fc.req()
	ev := signedEvent(t, 1000, "once")
	fc.send("EVENT", "a", ev)
	if in := recv(t, l); in.Event == nil || in.Event.ID != ev.ID {
		t.Fatalf("got %+v, want the event", in)
	}
	// The same id with a signature that does not verify: a check would log it as forged.
	dup := *ev
	dup.Sig = strings.Repeat("0", 128)
	fc.send("EVENT", "b", &dup)
	fc.send("EOSE", "b")
	if in := recv(t, l); !in.EOSE {
		t.Fatalf("got %+v, want the copy dropped", in)
	}
	if strings.Contains(logs.String(), "bad id or signature") {
		t.Fatalf("the copy was checked again:\n%s", logs.String())
	}
}

func TestLiveDropsEventWithBadSignature(t *testing.T) {
	fr := newFakeRelay(t)
	l, _ := startLive(t, fr, func(l *Live) { l.Subscribe("s", nostr.Filter{}) })
	fc := fr.accept(t)
	fc.authenticate()
	fc.req()
	forged := signedEvent(t, 1000, "x")
	forged.Content = "tampered"
	fc.send("EVENT", "s", forged)
	fc.send("EOSE", "s")
	if in := recv(t, l); !in.EOSE {
		t.Fatalf("got %+v, want the forged event dropped", in)
	}
}

func TestLiveForgetsSubscriptionClosedAsRestricted(t *testing.T) {
	fr := newFakeRelay(t)
	l, _ := startLive(t, fr, func(l *Live) {
		l.Subscribe("ch-denied", nostr.Filter{Kinds: []int{9}})
	})
	fc := fr.accept(t)
	fc.authenticate()
	fc.req()
	fc.send("CLOSED", "ch-denied", "restricted: not a channel member")
	if in := recv(t, l); in.SubID != "ch-denied" || in.Closed != "restricted: not a channel member" {
		t.Fatalf("got %+v", in)
	}
	l.Subscribe("ch-ok", nostr.Filter{Kinds: []int{9}})
	if id, _ := fc.req(); id != "ch-ok" {
		t.Fatalf("REQ %s", id)
	}
	fc.kill()
	fc2 := fr.accept(t)
	fc2.authenticate()
	if id, _ := fc2.req(); id != "ch-ok" {
		t.Fatalf("after reconnect REQ %s, want only ch-ok", id)
	}
	if subs := l.Subscriptions(); len(subs) != 1 || subs[0] != "ch-ok" {
		t.Fatalf("desired subs = %v", subs)
	}
}

func TestLiveReconnectsOnOtherClosedReason(t *testing.T) {
	fr := newFakeRelay(t)
	l, _ := startLive(t, fr, func(l *Live) { l.Subscribe("s", nostr.Filter{}) })
	fc := fr.accept(t)
	fc.authenticate()
	fc.req()
	fc.send("CLOSED", "s", "error: shutting down")
	if in := recv(t, l); in.Closed != "error: shutting down" {
		t.Fatalf("got %+v", in)
	}
	fc2 := fr.accept(t)
	fc2.authenticate()
	if id, _ := fc2.req(); id != "s" {
		t.Fatalf("REQ %s", id)
	}
}

func TestLiveAnswersMidSessionAuthChallenge(t *testing.T) {
	fr := newFakeRelay(t)
	l, _ := startLive(t, fr, nil)
	fc := fr.accept(t)
	fc.authenticate()
	waitConnected(t, l)
	fc.challenge = strings.Repeat("b", 64)
	fc.send("AUTH", fc.challenge)
	fc.authenticate()
}

func TestLiveUnsubscribeSendsClose(t *testing.T) {
	fr := newFakeRelay(t)
	l, _ := startLive(t, fr, func(l *Live) { l.Subscribe("s", nostr.Filter{}) })
	fc := fr.accept(t)
	fc.authenticate()
	fc.req()
	waitConnected(t, l)
	l.Unsubscribe("s")
	arr := fc.next("CLOSE")
	var id string
	_ = json.Unmarshal(arr[1], &id)
	if id != "s" {
		t.Fatalf("CLOSE %s", id)
	}
	// Late traffic for the closed sub is not delivered.
	fc.send("EVENT", "s", signedEvent(t, 1, "late"))
	l.Subscribe("t", nostr.Filter{})
	fc.req()
	fc.send("EOSE", "t")
	if in := recv(t, l); in.SubID != "t" || !in.EOSE {
		t.Fatalf("got %+v", in)
	}
}

func TestLivePublishWaitsForOK(t *testing.T) {
	fr := newFakeRelay(t)
	l, _ := startLive(t, fr, nil)
	fc := fr.accept(t)
	fc.authenticate()
	go func() {
		for i := 0; i < 2; i++ {
			arr := fc.next("EVENT")
			var ev nostr.Event
			_ = json.Unmarshal(arr[1], &ev)
			if protocol.CheckEvent(&ev) != nil {
				fc.send("OK", ev.ID, false, "invalid: bad signature")
				continue
			}
			if ev.Content == "refuse me" {
				fc.send("OK", ev.ID, false, "restricted: not a channel member")
			} else {
				fc.send("OK", ev.ID, true, "")
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.Publish(ctx, &nostr.Event{Kind: 20002, Tags: nostr.Tags{{"h", "x"}}}); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	err := l.Publish(ctx, &nostr.Event{Kind: 20002, Content: "refuse me"})
	var rej *RejectedError
	if !errors.As(err, &rej) || rej.Message != "restricted: not a channel member" {
		t.Fatalf("err = %v, want RejectedError", err)
	}
}

func TestLivePublishFailsWhenConnectionDropsBeforeOK(t *testing.T) {
	fr := newFakeRelay(t)
	l, _ := startLive(t, fr, nil)
	fc := fr.accept(t)
	fc.authenticate()
	go func() {
		fc.next("EVENT")
		fc.kill()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.Publish(ctx, &nostr.Event{Kind: 20002}); err == nil || ctx.Err() != nil {
		t.Fatalf("Publish err = %v, want connection-lost error before the deadline", err)
	}
}

func TestLiveRetriesWithIncreasingBackoffAttempts(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	attempts := make(chan int, 16)
	l := NewLive(LiveConfig{RelayURL: srv.URL, SecretKey: nostr.GeneratePrivateKey(),
		Backoff: func(n int) time.Duration { attempts <- n; return time.Millisecond }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	for want := 1; want <= 3; want++ {
		select {
		case got := <-attempts:
			if got != want {
				t.Fatalf("backoff attempt %d, want %d", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no reconnect attempt")
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v", err)
	}
	if _, ok := <-l.Events(); ok {
		t.Fatal("events not closed after Run returned")
	}
	if err := l.WaitConnected(context.Background()); !errors.Is(err, ErrLiveStopped) {
		t.Fatalf("WaitConnected after stop = %v", err)
	}
}

func TestLiveRefusedAuthIsRetried(t *testing.T) {
	fr := newFakeRelay(t)
	startLive(t, fr, nil)
	fc := fr.accept(t)
	arr := fc.next("AUTH")
	var ev nostr.Event
	_ = json.Unmarshal(arr[1], &ev)
	fc.send("OK", ev.ID, false, "auth-required: verification failed")
	fc2 := fr.accept(t)
	fc2.authenticate()
}

func TestDefaultReconnectBackoffLadder(t *testing.T) {
	want := []time.Duration{1, 2, 4, 8, 16, 32, 60, 60}
	for i, w := range want {
		if got := reconnectStep(i + 1); got != w*time.Second {
			t.Fatalf("step %d = %v, want %v", i+1, got, w*time.Second)
		}
	}
	if lo, hi := jitter20(10*time.Second, 0), jitter20(10*time.Second, 0.999); lo != 8*time.Second || hi >= 12*time.Second || hi < 11*time.Second {
		t.Fatalf("jitter bounds %v..%v", lo, hi)
	}
}

func TestParseRelayMessageRejectsMalformedFrames(t *testing.T) {
	for _, raw := range []string{`{}`, `[]`, `[1]`, `["EVENT","s"]`, `["OK","id"]`, `["OK","id","yes"]`, `["EVENT","s",[]]`} {
		if _, err := parseRelayMessage([]byte(raw)); err == nil {
			t.Errorf("%s parsed without error", raw)
		}
	}
	m, err := parseRelayMessage([]byte(`["CLOSED","s","restricted: x"]`))
	if err != nil || m.subID != "s" || m.message != "restricted: x" {
		t.Fatalf("%+v %v", m, err)
	}
}

func FuzzParseRelayMessage(f *testing.F) {
	for _, s := range []string{`["EVENT","s",{"id":"x","kind":1,"tags":[["e","y"]]}]`, `["OK","a",true,""]`, `["AUTH","c"]`, `["EOSE","s"]`, `["CLOSED","s"]`, `["NOTICE","n"]`, `[`, `null`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		m, err := parseRelayMessage(raw)
		if err == nil && m.label == "EVENT" && m.event == nil {
			t.Fatal("EVENT without event")
		}
	})
}

func TestLiveForgetsSubscriptionClosedAsInvalidInsteadOfReconnecting(t *testing.T) {
	fr := newFakeRelay(t)
	l, _ := startLive(t, fr, func(l *Live) {
		l.Subscribe("bad", nostr.Filter{})
		l.Subscribe("good", nostr.Filter{})
	})
	fc := fr.accept(t)
	fc.authenticate()
	fc.req()
	fc.req()
	fc.send("CLOSED", "bad", "invalid: tag filters must be single letters")
	if in := recv(t, l); in.Closed == "" {
		t.Fatalf("got %+v", in)
	}
	ev := signedEvent(t, 1000, "still connected")
	fc.send("EVENT", "good", ev)
	if in := recv(t, l); in.Event == nil || in.Event.ID != ev.ID {
		t.Fatalf("got %+v: the session did not survive an invalid: CLOSED", in)
	}
	if subs := l.Subscriptions(); len(subs) != 1 || subs[0] != "good" {
		t.Fatalf("subscriptions %v, want only good", subs)
	}
}

// A filter replaced while its earlier REQ's history is still arriving (the harness adding a
// channel to a group): the earlier REQ's EOSE says nothing about what the new filter added, so a
// reconnect before the new REQ's EOSE asks from the new filter's since, and Resume says so.
func TestLiveReplacedFilterResubscribesFromItsOwnSinceUntilItsOwnEOSE(t *testing.T) {
	fr := newFakeRelay(t)
	old, added := nostr.Timestamp(100), nostr.Timestamp(500)
	l, _ := startLive(t, fr, func(l *Live) { l.Subscribe("g", nostr.Filter{Kinds: []int{9}, Since: &old}) })
	fc := fr.accept(t)
	fc.authenticate()
	fc.req()
	l.Subscribe("g", nostr.Filter{Kinds: []int{9, 10}, Since: &added})
	if _, f := fc.req(); f.Since == nil || *f.Since != added {
		t.Fatalf("replacing REQ since=%v, want %d", f.Since, added)
	}
	ev := signedEvent(t, 1000, "from the first REQ")
	fc.send("EVENT", "g", ev)
	fc.send("EOSE", "g") // the first REQ's
	recv(t, l)
	recv(t, l)
	if since, ok := l.Resume("g"); !ok || since == nil || *since != added {
		t.Fatalf("Resume = %v, %v; want %d until the replacing REQ's EOSE", since, ok, added)
	}
	fc.kill()

	fc2 := fr.accept(t)
	fc2.authenticate()
	if _, f := fc2.req(); f.Since == nil || *f.Since != added || len(f.Kinds) != 2 {
		t.Fatalf("re-REQ since=%v kinds=%v, want since=%d with the new filter", f.Since, f.Kinds, added)
	}
	fc2.send("EVENT", "g", signedEvent(t, 2000, "after"))
	fc2.send("EOSE", "g")
	recv(t, l)
	recv(t, l)
	if since, _ := l.Resume("g"); since == nil || *since != 1995 {
		t.Fatalf("Resume after EOSE = %v, want 1995", since)
	}
	if _, ok := l.Resume("nope"); ok {
		t.Fatal("Resume of an unknown id reports ok")
	}
}

// Each filter of a subscription keeps its own since on a re-send, raised to the delivered floor
// only where that is later.
func TestLiveResubscribeRaisesEachFilterToTheFloorOnlyWhereLater(t *testing.T) {
	early, late := nostr.Timestamp(100), nostr.Timestamp(3000)
	s := &liveSub{filters: []nostr.Filter{{Since: &early}, {Since: &late}}, lastSeen: 2000}
	got := s.reqFilters(true)
	if len(got) != 2 || *got[0].Since != 1995 || *got[1].Since != 3000 {
		t.Fatalf("sinces %d, %d; want 1995, 3000", *got[0].Since, *got[1].Since)
	}
}

// A subscription closed for good reports where it would have resumed, so the caller can ask
// again for what it still may read without a gap.
func TestLiveClosedForGoodReportsWhereItWouldResume(t *testing.T) {
	fr := newFakeRelay(t)
	since := nostr.Timestamp(100)
	l, _ := startLive(t, fr, func(l *Live) { l.Subscribe("g", nostr.Filter{Kinds: []int{9}, Since: &since}) })
	fc := fr.accept(t)
	fc.authenticate()
	fc.req()
	fc.send("EVENT", "g", signedEvent(t, 1000, "stored"))
	fc.send("EOSE", "g")
	recv(t, l)
	recv(t, l)
	fc.send("CLOSED", "g", "restricted: channel access revoked")
	in := recv(t, l)
	if in.Closed == "" || in.Resume == nil || *in.Resume != 995 {
		t.Fatalf("got %+v (resume %v), want the CLOSED with resume 995", in, in.Resume)
	}
}

func TestLiveAuthCarriesTheAuthTag(t *testing.T) {
	fr := newFakeRelay(t)
	owner := nostr.GeneratePrivateKey()
	agent := nostr.GeneratePrivateKey()
	agentPK, _ := nostr.GetPublicKey(agent)
	tag, err := ownerauth.Issue(owner, agentPK, "created_at<4000000000", nil)
	if err != nil {
		t.Fatal(err)
	}
	l := NewLive(LiveConfig{RelayURL: fr.url(), SecretKey: agent, AuthTag: tag.JSON(), Backoff: func(int) time.Duration { return time.Millisecond }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = l.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	auth := fr.accept(t).authenticate()
	n := 0
	for _, tg := range auth.Tags {
		if slices.Equal(tg, tag.NostrTag()) {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("AUTH tags %v, want the auth tag once", auth.Tags)
	}
}
