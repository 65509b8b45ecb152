package console_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/console"
	"github.com/buzz-harness/buzz/internal/observer"
	"github.com/buzz-harness/buzz/internal/protocol"
)

func postControl(t *testing.T, url, token, body string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+"/api/control", strings.NewReader(body))
	if token != "" {
		req.Header.Set("X-Buzz-Token", token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestConsoleControlChecksTokenAgentAndRequest(t *testing.T) {
	t.Parallel()
	act, actToken := activityServer(t, observer.NewBus(10))
	if got := postControl(t, act.URL, actToken, `{"type":"cancel_turn","channelId":"c"}`); got != http.StatusNotFound {
		t.Errorf("activity-only console: status %d, want 404 (nothing to control)", got)
	}
	agentPK, _ := protocol.PublicKey(nostr.GeneratePrivateKey())
	// The relay is never reached: every request here is refused before a frame is sent.
	s, err := console.New(console.Config{RelayURL: "http://127.0.0.1:1", OwnerKey: nostr.GeneratePrivateKey(), AgentPubkey: agentPK})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	for _, c := range []struct {
		name, token, body string
		want              int
	}{
		{"no token", "", `{"type":"cancel_turn","channelId":"c"}`, http.StatusUnauthorized},
		{"unknown type", s.Token(), `{"type":"permission_decision","channelId":"c"}`, http.StatusBadRequest},
		{"no channel", s.Token(), `{"type":"cancel_turn"}`, http.StatusBadRequest},
		{"model switch without a model", s.Token(), `{"type":"switch_model","channelId":"c"}`, http.StatusBadRequest},
		{"effort switch without an effort", s.Token(), `{"type":"switch_effort","channelId":"c"}`, http.StatusBadRequest},
		{"not JSON", s.Token(), `stop`, http.StatusBadRequest},
	} {
		if got := postControl(t, ts.URL, c.token, c.body); got != c.want {
			t.Errorf("%s: status %d, want %d", c.name, got, c.want)
		}
	}
}
