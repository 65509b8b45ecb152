package harness_test

import (
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/protocol/ownerauth"
)

// publishBotProfile gives key sk a kind-0 profile carrying auth (a NIP-OA tag).
func (s *stack) publishBotProfile(sk, name string, auth ownerauth.Tag) {
	s.t.Helper()
	ev := nostr.Event{Kind: protocol.KindProfile, Content: `{"name":"` + name + `"}`, CreatedAt: nostr.Now(),
		Tags: nostr.Tags{auth.NostrTag()}}
	s.relay.Publish(s.t, sk, ev)
}

// The harness takes its owner from BUZZ_AUTH_TAG (over a different --agent-owner); a bot the same
// owner attested passes owner-only, and a stranger's bot whose profile claims our owner with a
// signature our owner never made does not.
func TestSiblingBotPassesOwnerOnlyAndAForgedAttestationDoesNot(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	agentTag, err := ownerauth.Issue(s.ownerSK, s.agentPK, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	siblingSK, siblingPK := newKey(t)
	sibTag, err := ownerauth.Issue(s.ownerSK, siblingPK, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	s.publishBotProfile(siblingSK, "sibling", sibTag)

	strangerOwnerSK, _ := newKey(t)
	strangerSK, strangerPK := newKey(t)
	forged, err := ownerauth.Issue(strangerOwnerSK, strangerPK, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	forged.Owner = s.ownerPK // claims our owner; the signature is the stranger owner's
	s.publishBotProfile(strangerSK, "impostor", forged)
	s.relay.AddMember(t, s.ownerSK, s.channel, siblingPK, "bot")
	s.relay.AddMember(t, s.ownerSK, s.channel, strangerPK, "bot")

	_, decoyPK := newKey(t)
	s.start([]string{"--agent-owner", decoyPK}, ownerauth.EnvVar+"="+agentTag.JSON())

	forgedMention := s.mention(strangerSK, "impostor asks")
	sibMention := s.mention(siblingSK, "sibling asks")
	s.waitReply(sibMention.ID)
	owners := s.mention(s.ownerSK, "owner asks") // the tag's owner, not --agent-owner, is the owner
	s.waitReply(owners.ID)
	if strings.Contains(strings.Join(s.prompts(), "\n"), forgedMention.ID) {
		t.Fatal("a bot with a forged attestation was prompted under owner-only")
	}
	s.waitLog("sibling lookup\" author="+strangerPK+" sibling=false", 10*time.Second)
	s.waitLog("author gate dropped event\" event="+forgedMention.ID, 10*time.Second)
}
