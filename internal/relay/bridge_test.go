package relay_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/relay/relaytest"
)

// post sends body to path with the given Authorization header and decodes the JSON answer.
func post(t *testing.T, url, auth string, body []byte) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var raw json.RawMessage
	decodeJSON(t, resp, &raw)
	var out map[string]any
	json.Unmarshal(raw, &out) // stays nil for /query's array answers
	return resp.StatusCode, out
}

func TestBridgeRefusesMissingAuth(t *testing.T) {
	s := relaytest.Start(t)
	status, out := post(t, s.HTTPURL+"/query", "", []byte(`[{}]`))
	if status != http.StatusUnauthorized || out["error"] != "missing Nostr auth" {
		t.Fatalf("got %d %v", status, out)
	}
}

func TestBridgeRefusesReplayedAuthEvent(t *testing.T) {
	s := relaytest.Start(t)
	u := newUser()
	body := []byte(`[{"kinds":[1]}]`)
	auth, _ := protocol.SignHTTPAuth(u.sk, s.HTTPURL+"/query", "POST", body, time.Now())
	if status, out := post(t, s.HTTPURL+"/query", auth, body); status != http.StatusOK {
		t.Fatalf("first use: %d %v", status, out)
	}
	status, out := post(t, s.HTTPURL+"/query", auth, body)
	if status != http.StatusUnauthorized || out["error"] != "NIP-98: replay detected" {
		t.Fatalf("replay: %d %v", status, out)
	}
}

func TestBridgeChecksURLMethodPayloadAndTime(t *testing.T) {
	s := relaytest.Start(t)
	u := newUser()
	body := []byte(`[{"kinds":[1]}]`)
	cases := map[string]string{}
	cases["wrong path"], _ = protocol.SignHTTPAuth(u.sk, s.HTTPURL+"/count", "POST", body, time.Now())
	cases["wrong method"], _ = protocol.SignHTTPAuth(u.sk, s.HTTPURL+"/query", "GET", body, time.Now())
	cases["wrong payload"], _ = protocol.SignHTTPAuth(u.sk, s.HTTPURL+"/query", "POST", []byte(`[]`), time.Now())
	cases["stale"], _ = protocol.SignHTTPAuth(u.sk, s.HTTPURL+"/query", "POST", body, time.Now().Add(-2*time.Minute))
	cases["not base64"] = "Nostr %%%"
	for name, auth := range cases {
		status, out := post(t, s.HTTPURL+"/query", auth, body)
		if status != http.StatusUnauthorized || !strings.HasPrefix(fmt.Sprint(out["error"]), "NIP-98:") {
			t.Errorf("%s: got %d %v", name, status, out)
		}
	}
}

func TestBridgeAcceptsLoopbackSpellingInURLTag(t *testing.T) {
	s := relaytest.Start(t)
	u := newUser()
	body := []byte(`[{"kinds":[1]}]`)
	auth, _ := protocol.SignHTTPAuth(u.sk, strings.Replace(s.HTTPURL, "127.0.0.1", "localhost", 1)+"/query", "POST", body, time.Now())
	if status, out := post(t, s.HTTPURL+"/query", auth, body); status != http.StatusOK {
		t.Fatalf("got %d %v", status, out)
	}
}

func TestBridgeEventsAnswersWithEventIDAndDuplicateMessage(t *testing.T) {
	s := relaytest.Start(t)
	u := newUser()
	ev := nostr.Event{Kind: 1, Content: "hello", CreatedAt: nostr.Now(), Tags: nostr.Tags{}}
	ev.Sign(u.sk)
	body, _ := json.Marshal(ev)
	status, raw := s.Post(t, u.sk, "/events", body)
	var res relaytest.PublishResult
	json.Unmarshal(raw, &res)
	if status != http.StatusOK || res.EventID != ev.ID || !res.Accepted {
		t.Fatalf("first: %d %s", status, raw)
	}
	status, raw = s.Post(t, u.sk, "/events", body)
	json.Unmarshal(raw, &res)
	if status != http.StatusOK || !res.Accepted || !strings.HasPrefix(res.Message, "duplicate:") {
		t.Fatalf("second: %d %s", status, raw)
	}
}

func TestBridgeRefusesEphemeralEvents(t *testing.T) {
	s := relaytest.Start(t)
	u := newUser()
	status, res := s.TryPublish(t, u.sk, &nostr.Event{Kind: protocol.KindPresence})
	if status != http.StatusBadRequest || !strings.HasPrefix(res.Error, "invalid:") {
		t.Fatalf("got %d %+v", status, res)
	}
}

func TestBridgeRefusesMalformedBodies(t *testing.T) {
	s := relaytest.Start(t)
	u := newUser()
	for path, body := range map[string]string{
		"/events": `[1,2]`,
		"/query":  `{"kinds":[1]}`,
		"/count":  `[` + strings.Repeat(`{},`, 10) + `{}]`,
	} {
		status, raw := s.Post(t, u.sk, path, []byte(body))
		var out map[string]string
		if json.Unmarshal(raw, &out) != nil || status != http.StatusBadRequest || !strings.HasPrefix(out["error"], "invalid:") {
			t.Errorf("%s %s: %d %s", path, body, status, raw)
		}
	}
}

func TestBridgeQueryAppliesPerFilterLimitsNewestFirst(t *testing.T) {
	s := relaytest.Start(t)
	alice := newUser()
	ch := s.CreateChannel(t, alice.sk, "general", false)
	base := nostr.Now() - 100
	for i := 0; i < 5; i++ {
		s.Publish(t, alice.sk, nostr.Event{Kind: 9, Content: fmt.Sprint("m", i), CreatedAt: base + nostr.Timestamp(i), Tags: nostr.Tags{{"h", ch}}})
	}
	s.Publish(t, alice.sk, nostr.Event{Kind: 0, Content: `{"name":"alice"}`})
	got := s.Query(t, alice.sk,
		nostr.Filter{Kinds: []int{9}, Tags: nostr.TagMap{"h": {ch}}, Limit: 2},
		nostr.Filter{Kinds: []int{0}, Authors: []string{alice.pk}, Limit: 1},
	)
	if len(got) != 3 || got[0].Content != "m4" || got[1].Content != "m3" || got[2].Kind != 0 {
		t.Fatalf("got %v", contents(got))
	}
}

func TestBridgeQueryPagesWithBeforeID(t *testing.T) {
	s := relaytest.Start(t)
	alice := newUser()
	ch := s.CreateChannel(t, alice.sk, "general", false)
	at := nostr.Now() - 50
	for i := 0; i < 7; i++ { // all in the same second: only the id keyset can page them
		s.Publish(t, alice.sk, nostr.Event{Kind: 9, Content: fmt.Sprint("m", i), CreatedAt: at, Tags: nostr.Tags{{"h", ch}}})
	}
	seen := map[string]bool{}
	var before string
	for page := 0; page < 10; page++ {
		body := fmt.Sprintf(`[{"kinds":[9],"#h":[%q],"limit":3%s}]`, ch, before)
		status, raw := s.Post(t, alice.sk, "/query", []byte(body))
		var evs []nostr.Event
		if status != http.StatusOK || json.Unmarshal(raw, &evs) != nil {
			t.Fatalf("page %d: %d %s", page, status, raw)
		}
		for _, e := range evs {
			if seen[e.ID] {
				t.Fatalf("page %d repeats %s", page, e.ID)
			}
			seen[e.ID] = true
		}
		if len(evs) < 3 {
			break
		}
		last := evs[len(evs)-1]
		before = fmt.Sprintf(`,"until":%d,"before_id":%q`, last.CreatedAt, last.ID)
	}
	if len(seen) != 7 {
		t.Fatalf("paged through %d events, want 7", len(seen))
	}
}

func TestBridgeQueryRefusesBeforeIDWithoutUntil(t *testing.T) {
	s := relaytest.Start(t)
	u := newUser()
	status, raw := s.Post(t, u.sk, "/query", []byte(`[{"before_id":"`+strings.Repeat("a", 64)+`"}]`))
	if status != http.StatusBadRequest || !strings.Contains(string(raw), "until") {
		t.Fatalf("got %d %s", status, raw)
	}
}

func TestBridgeCountHonoursAccess(t *testing.T) {
	s := relaytest.Start(t)
	alice, eve := newUser(), newUser()
	secret := s.CreateChannel(t, alice.sk, "secret", true)
	s.Publish(t, alice.sk, msg(secret, "a"))
	s.Publish(t, alice.sk, msg(secret, "b"))
	body := []byte(fmt.Sprintf(`[{"kinds":[9],"#h":[%q]}]`, secret))
	for sk, want := range map[string]float64{alice.sk: 2, eve.sk: 0} {
		status, raw := s.Post(t, sk, "/count", body)
		var out map[string]float64
		if json.Unmarshal(raw, &out) != nil || status != http.StatusOK || out["count"] != want {
			t.Errorf("count = %d %s, want %v", status, raw, want)
		}
	}
}

func TestBridgeRefusesOversizedBody(t *testing.T) {
	s := relaytest.Start(t)
	u := newUser()
	big := []byte(`[{"search":"` + strings.Repeat("x", 600*1024) + `"}]`)
	auth, _ := protocol.SignHTTPAuth(u.sk, s.HTTPURL+"/query", "POST", big, time.Now())
	status, out := post(t, s.HTTPURL+"/query", auth, big)
	if status != http.StatusRequestEntityTooLarge || out["error"] == nil {
		t.Fatalf("got %d %v", status, out)
	}
}

func TestBridgeRefusesAuthEventOfWrongKind(t *testing.T) {
	s := relaytest.Start(t)
	u := newUser()
	ev := nostr.Event{Kind: 1, CreatedAt: nostr.Now(), Tags: nostr.Tags{{"u", s.HTTPURL + "/query"}, {"method", "POST"}}}
	ev.Sign(u.sk)
	raw, _ := json.Marshal(ev)
	status, out := post(t, s.HTTPURL+"/query", "Nostr "+base64.StdEncoding.EncodeToString(raw), []byte(`[{}]`))
	if status != http.StatusUnauthorized {
		t.Fatalf("got %d %v", status, out)
	}
}

func contents(evs []nostr.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Content)
	}
	return out
}
