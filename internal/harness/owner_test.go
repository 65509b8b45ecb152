package harness

import (
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol/ownerauth"
)

func TestAuthTagOwnerReplacesTheConfiguredOwner(t *testing.T) {
	ownerSK, agentSK := nostr.GeneratePrivateKey(), nostr.GeneratePrivateKey()
	owner, _ := nostr.GetPublicKey(ownerSK)
	agent, _ := nostr.GetPublicKey(agentSK)
	tag, err := ownerauth.Issue(ownerSK, agent, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	c := Config{Owner: strings.Repeat("ab", 32), AuthTag: tag.JSON()}
	if err := c.resolveOwner(agent); err != nil || c.Owner != owner {
		t.Fatalf("owner %q err %v, want the tag's owner %q", c.Owner, err, owner)
	}
}

func TestAuthTagForAnotherAgentStopsTheStart(t *testing.T) {
	ownerSK, agentSK := nostr.GeneratePrivateKey(), nostr.GeneratePrivateKey()
	other, _ := nostr.GetPublicKey(nostr.GeneratePrivateKey())
	agent, _ := nostr.GetPublicKey(agentSK)
	tag, err := ownerauth.Issue(ownerSK, other, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	c := Config{AuthTag: tag.JSON()}
	err = c.resolveOwner(agent)
	if err == nil || !strings.Contains(err.Error(), "BUZZ_AUTH_TAG") || c.Owner != "" {
		t.Fatalf("err %v owner %q, want a BUZZ_AUTH_TAG error and no owner", err, c.Owner)
	}
}

func TestNoAuthTagKeepsTheConfiguredOwner(t *testing.T) {
	c := Config{Owner: "ab"}
	if err := c.resolveOwner("cd"); err != nil || c.Owner != "ab" {
		t.Fatalf("owner %q err %v", c.Owner, err)
	}
}
