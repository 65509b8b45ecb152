package console_test

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/console"
	"github.com/buzz-harness/buzz/internal/observer"
	"github.com/buzz-harness/buzz/internal/protocol"
)

// Agent text on the activity stream never shows a key: an nsec anywhere, and the stack's own
// hex keys even bare (in any case) and with no key-ish word near them, history and live alike.
func TestConsoleActivityStreamRedactsKeysInAgentText(t *testing.T) {
	ownerSK, agentSK, otherSK := nostr.GeneratePrivateKey(), nostr.GeneratePrivateKey(), nostr.GeneratePrivateKey()
	bus := observer.NewBus(100)
	bus.Publish(observer.Scope{ChannelID: "c", TurnID: "t1"}, observer.AgentUpdate{Kind: "agent_message_chunk",
		Text: "here you go: " + agentSK + " and " + protocol.Nsec(otherSK)})
	s, err := console.New(console.Config{Bus: bus, SecretKeys: []string{ownerSK, agentSK}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+"/api/stream?token="+s.Token(), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	var seen []string
	for {
		ev := readSSE(t, r)
		if ev.name == "ready" {
			break
		}
		seen = append(seen, ev.data)
	}
	bus.Publish(observer.Scope{ChannelID: "c", TurnID: "t1"}, observer.AgentUpdate{Kind: "agent_message_chunk",
		Text: "the owner's is " + strings.ToUpper(ownerSK) + "."})
	seen = append(seen, readSSE(t, r).data)

	all := strings.Join(seen, "\n")
	for name, secret := range map[string]string{"agent hex": agentSK, "owner hex": ownerSK, "other nsec": protocol.Nsec(otherSK)} {
		if strings.Contains(strings.ToLower(all), strings.ToLower(secret)) {
			t.Errorf("%s key reached the activity stream:\n%s", name, all)
		}
	}
	if strings.Count(all, observer.Redacted) != 3 || !strings.Contains(all, "here you go") {
		t.Errorf("want the text kept with three redactions:\n%s", all)
	}
}
