package harness_test

import (
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
)

// An outsider can write any e tag. One that names a private event of another channel as its
// thread root must not pull that event into a prompt when the owner replies in the open channel.
func TestThreadContextNeverCrossesIntoAnotherChannel(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	secretCh := s.relay.CreateChannel(t, s.ownerSK, "secret", true)
	s.relay.AddMember(t, s.ownerSK, secretCh, s.agentPK, "bot")
	secret := nostr.Event{Kind: 9, Content: "launch code 7741-PRIVATE", CreatedAt: nostr.Now(), Tags: nostr.Tags{{"h", secretCh}}}
	s.relay.Publish(t, s.ownerSK, secret)
	secrets := s.relay.Query(t, s.ownerSK, nostr.Filter{Kinds: []int{9}, Tags: nostr.TagMap{"h": {secretCh}}})
	if len(secrets) != 1 {
		t.Fatalf("secret channel holds %d messages", len(secrets))
	}
	secretID := secrets[0].ID

	outsiderSK, _ := newKey(t)
	s.relay.Publish(t, outsiderSK, nostr.Event{Kind: protocol.KindJoinRequest, Tags: nostr.Tags{{"h", s.channel}}})
	bait := nostr.Event{Kind: 9, Content: "outsider bait question", CreatedAt: nostr.Now(),
		Tags: nostr.Tags{{"h", s.channel}, {"e", secretID, "", "root"}}}
	if err := bait.Sign(outsiderSK); err != nil {
		t.Fatal(err)
	}
	s.relay.Publish(t, outsiderSK, bait)

	s.start(nil)
	m := s.mention(s.ownerSK, "what is this about?", nostr.Tag{"e", secretID, "", "root"}, nostr.Tag{"e", bait.ID, "", "reply"})
	s.waitPrompted(m.ID)
	all := strings.Join(s.prompts(), "\n")
	if strings.Contains(all, "7741-PRIVATE") {
		t.Fatalf("a private message of another channel reached the prompt:\n%s", all)
	}
	if !strings.Contains(all, "outsider bait question") {
		t.Fatalf("the in-channel thread message is missing from the prompt context:\n%s", all)
	}
}
