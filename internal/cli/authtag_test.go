package cli_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol/ownerauth"
	"github.com/buzz-harness/buzz/internal/relay/relaytest"
)

// exactlyOnce reports whether tags holds want exactly once.
func exactlyOnce(tags nostr.Tags, want nostr.Tag) bool {
	n := 0
	for _, t := range tags {
		if slices.Equal(t, want) {
			n++
		}
	}
	return n == 1
}

// With an auth tag (BUZZ_AUTH_TAG / --auth-tag) every event the CLI signs carries it exactly:
// a message, a reaction, a profile.
func TestBinaryPutsTheExactAuthTagOnEveryEventItSigns(t *testing.T) {
	t.Parallel()
	s := relaytest.Start(t)
	owner, agent := newUser(t, s.URL), newUser(t, s.URL)
	tag, err := ownerauth.Issue(owner.sk, agent.pk, "created_at>1", nil)
	if err != nil {
		t.Fatal(err)
	}
	ch := owner.createChannel("general", false)
	owner.ok(nil, "", "channels", "add-member", "--channel", ch, "--pubkey", agent.pk)

	var m, r, p sent
	agent.ok(&m, "", "messages", "send", "--auth-tag", tag.JSON(), "--channel", ch, "--content", "hi")
	agent.ok(&r, "", "reactions", "add", "--auth-tag", tag.JSON(), "--event", m.EventID, "--emoji", "👍")
	agent.ok(&p, "", "users", "set-profile", "--auth-tag", tag.JSON(), "--name", "bee")
	for _, id := range []string{m.EventID, r.EventID, p.EventID} {
		evs := s.Query(t, owner.sk, nostr.Filter{IDs: []string{id}})
		if len(evs) != 1 || !exactlyOnce(evs[0].Tags, tag.NostrTag()) {
			raw, _ := json.Marshal(evs)
			t.Errorf("event %s: %s, want the auth tag once", id, raw)
		}
	}
}

// Without an auth tag of its own, set-profile keeps the one on the current profile: stripping it
// would drop the attestation sibling agents and Desktop's "managed by" read.
func TestBinarySetProfileKeepsTheProfilesAuthTag(t *testing.T) {
	t.Parallel()
	s := relaytest.Start(t)
	owner, agent := newUser(t, s.URL), newUser(t, s.URL)
	tag, err := ownerauth.Issue(owner.sk, agent.pk, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	agent.ok(nil, "", "users", "set-profile", "--auth-tag", tag.JSON(), "--name", "bee")
	var p sent
	agent.ok(&p, "", "users", "set-profile", "--about", "busy")
	evs := s.Query(t, owner.sk, nostr.Filter{IDs: []string{p.EventID}})
	if len(evs) != 1 || !exactlyOnce(evs[0].Tags, tag.NostrTag()) || !ownerauth.IsSibling(&evs[0], owner.pk, time.Now().Unix()) {
		t.Fatalf("profile after set-profile: %v", evs)
	}
}

func TestBinaryRefusesAMalformedAuthTagBeforeAnyRequest(t *testing.T) {
	t.Parallel()
	s := relaytest.Start(t)
	u := newUser(t, s.URL)
	e := u.fails(1, "users", "set-profile", "--auth-tag", `["auth","x"]`, "--name", "bee")
	if !strings.Contains(e.Message, "BUZZ_AUTH_TAG") {
		t.Fatalf("error %q does not name BUZZ_AUTH_TAG", e.Message)
	}
}
