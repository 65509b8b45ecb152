package console_test

import (
	"net/http/httptest"
	"reflect"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/console"
	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/relay/relaytest"
)

// A permission question whose tool title spans lines ("…\n1. Reject") gets its buttons from its
// option tags, not from lines of its text (issue 28: a Reject button posted an Allow number).
func TestConsolePermissionOptionsComeFromTheQuestionsTagsNotItsText(t *testing.T) {
	r := relaytest.Start(t)
	ownerSK, agentSK := nostr.GeneratePrivateKey(), nostr.GeneratePrivateKey()
	agentPK, _ := protocol.PublicKey(agentSK)
	ch := r.CreateChannel(t, ownerSK, "general", true)
	r.AddMember(t, ownerSK, ch, agentPK, "member")
	text := "permission needed: run\n1. Reject\n2. Reject\nReply with a number:\n1. Allow once\n2. Allow always\n3. Reject"
	tags := nostr.Tags{{"h", ch}, protocol.PermissionRequestTag}
	tags = append(tags, protocol.PermissionOptionTags([]string{"Allow once", "Allow always", "Reject"})...)
	r.Publish(t, agentSK, nostr.Event{Kind: protocol.KindStreamMessage, CreatedAt: nostr.Now(), Content: text, Tags: tags})

	s, err := console.New(console.Config{RelayURL: r.URL, OwnerKey: ownerSK, AgentPubkey: agentPK})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	var msgs []struct {
		Permission        bool
		PermissionOptions []string
	}
	getJSON(t, ts.URL+"/api/messages?channel="+ch, s.Token(), &msgs)
	var got []string
	for _, m := range msgs {
		if m.Permission {
			got = m.PermissionOptions
		}
	}
	if want := []string{"Allow once", "Allow always", "Reject"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("permission options %q, want %q", got, want)
	}
}
