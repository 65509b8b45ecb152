package relay_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/relay/relaytest"
)

// rawConn is a bare WebSocket client for checking exact frames (go-nostr hides some of them).
type rawConn struct {
	t         testing.TB
	ws        *websocket.Conn
	challenge string
}

func dialRaw(t testing.TB, url string) *rawConn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	ws.SetReadLimit(4 << 20)
	t.Cleanup(func() { ws.CloseNow() })
	c := &rawConn{t: t, ws: ws}
	msg := c.read()
	if len(msg) != 2 || msg[0] != "AUTH" {
		t.Fatalf("first frame = %v, want AUTH challenge", msg)
	}
	c.challenge = msg[1].(string)
	return c
}

func (c *rawConn) send(v ...any) {
	c.t.Helper()
	b, _ := json.Marshal(v)
	c.sendRaw(b)
}

func (c *rawConn) sendRaw(b []byte) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.ws.Write(ctx, websocket.MessageText, b); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// read returns the next frame as a decoded JSON array, failing after 5 s.
func (c *rawConn) read() []any {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, b, err := c.ws.Read(ctx)
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	var out []any
	if err := json.Unmarshal(b, &out); err != nil {
		c.t.Fatalf("frame %q is not a JSON array", b)
	}
	return out
}

// readUntil skips frames until one with the given label arrives.
func (c *rawConn) readUntil(label string) []any {
	c.t.Helper()
	for {
		if m := c.read(); len(m) > 0 && m[0] == label {
			return m
		}
	}
}

func (c *rawConn) auth(sk, relayURL string, at time.Time) []any {
	c.t.Helper()
	ev, err := protocol.NewAuthEvent(sk, relayURL, c.challenge, at)
	if err != nil {
		c.t.Fatal(err)
	}
	c.send("AUTH", ev)
	return c.readUntil("OK")
}

func (c *rawConn) mustAuth(sk, relayURL string) {
	c.t.Helper()
	if ok := c.auth(sk, relayURL, time.Now()); ok[2] != true {
		c.t.Fatalf("AUTH refused: %v", ok)
	}
}

// publish sends a signed EVENT and returns the OK frame.
func (c *rawConn) publish(sk string, ev nostr.Event) []any {
	c.t.Helper()
	if ev.CreatedAt == 0 {
		ev.CreatedAt = nostr.Now()
	}
	if ev.Tags == nil {
		ev.Tags = nostr.Tags{}
	}
	ev.Sign(sk)
	c.send("EVENT", ev)
	return c.readUntil("OK")
}

type user struct {
	sk, pk string
}

func newUser() user {
	sk := nostr.GeneratePrivateKey()
	pk, _ := nostr.GetPublicKey(sk)
	return user{sk, pk}
}

func msg(channel, content string) nostr.Event {
	return nostr.Event{Kind: protocol.KindStreamMessage, Content: content, Tags: nostr.Tags{{"h", channel}}}
}

// nextEvent waits for one event on a go-nostr subscription.
func nextEvent(t testing.TB, sub *nostr.Subscription) *nostr.Event {
	t.Helper()
	select {
	case ev := <-sub.Events:
		return ev
	case <-time.After(5 * time.Second):
		t.Fatal("no event within 5s")
	}
	return nil
}

// subscribe opens a live subscription and waits for its EOSE.
func subscribe(t testing.TB, r *nostr.Relay, f nostr.Filter) *nostr.Subscription {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	sub, err := r.Subscribe(ctx, nostr.Filters{f})
	if err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	select {
	case <-sub.EndOfStoredEvents:
	case reason := <-sub.ClosedReason:
		t.Fatalf("subscription closed: %s", reason)
	case <-time.After(5 * time.Second):
		t.Fatal("no EOSE within 5s")
	}
	return sub
}

func latest(t testing.TB, s *relaytest.Server, sk string, f nostr.Filter) *nostr.Event {
	t.Helper()
	f.Limit = 1
	evs := s.Query(t, sk, f)
	if len(evs) == 0 {
		t.Fatalf("no event for %v", f)
	}
	return &evs[0]
}

func hasPrefix(v any, prefix string) bool {
	s, _ := v.(string)
	return strings.HasPrefix(s, prefix)
}

func decodeJSON(t testing.TB, resp *http.Response, v any) {
	t.Helper()
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("decode %s: %v", resp.Request.URL.Path, err)
	}
}

// sharedRelay serves the tests that use go-nostr's client: it lives until the process exits
// (see relaytest.Server.Connect for why those connections are never closed). Tests on it stay
// independent by using fresh keys and channels.
var sharedRelay *relaytest.Server

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "relay-shared-")
	if err != nil {
		panic(err)
	}
	sharedRelay, err = relaytest.Launch(dir)
	if err != nil {
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
