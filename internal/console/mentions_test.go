package console_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/console"
	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/relay/relaytest"
)

// A stranger in an open channel who takes the agent's profile name must not receive the owner's
// console "@agent …" (issue 28); two members sharing any other name make "@name" refused, as the
// CLI refuses it, unless the composer picked one of them explicitly.
func TestConsoleMentionOfASharedNamePrefersTheAgentAndRefusesOtherAmbiguity(t *testing.T) {
	r := relaytest.Start(t)
	ownerSK := nostr.GeneratePrivateKey()
	key := func(name string) (string, string) {
		sk := nostr.GeneratePrivateKey()
		pk, _ := protocol.PublicKey(sk)
		r.Publish(t, sk, nostr.Event{Kind: protocol.KindProfile, CreatedAt: nostr.Now(), Content: `{"name":"` + name + `"}`})
		return sk, pk
	}
	_, agentPK := key("agent")
	_, impostorPK := key("Agent")
	_, sam1 := key("sam")
	_, sam2 := key("sam")
	ch := r.CreateChannel(t, ownerSK, "open", false)
	for _, pk := range []string{agentPK, impostorPK, sam1, sam2} {
		r.AddMember(t, ownerSK, ch, pk, "member")
	}
	s, err := console.New(console.Config{RelayURL: r.URL, OwnerKey: ownerSK, AgentPubkey: agentPK})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	send := func(content string, mention ...string) (int, []string) {
		body, _ := json.Marshal(map[string]any{"channel": ch, "content": content, "mention": mention})
		var m struct{ Mentions []string }
		code := call(t, ts, s.Token(), "POST", "/api/messages", "application/json", body, &m)
		return code, m.Mentions
	}
	if code, got := send("@agent deploy"); code != http.StatusOK || len(got) != 1 || got[0] != agentPK {
		t.Fatalf("@agent: %d %v, want only the stack's agent %s", code, got, agentPK)
	}
	if code, _ := send("@sam look"); code != http.StatusBadRequest {
		t.Fatalf("@sam naming two members: %d, want 400", code)
	}
	if code, got := send("@sam look", sam2); code != http.StatusOK || len(got) != 1 || got[0] != sam2 {
		t.Fatalf("@sam with sam2 picked: %d %v", code, got)
	}
}
