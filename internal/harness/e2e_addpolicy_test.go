package harness_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/protocol/ownerauth"
)

// A stranger's add-member is refused once buzz-acp has published owner_only with the owner's
// attestation; the owner's own add still works.
func TestChannelAddPolicyPublishedAtStartKeepsStrangersFromAddingTheAgent(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	tag, err := ownerauth.Issue(s.ownerSK, s.agentPK, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	s.start(nil, "BUZZ_ACP_CHANNEL_ADD_POLICY=owner_only", "BUZZ_AUTH_TAG="+tag.JSON())

	profiles := s.relay.Query(t, s.ownerSK, nostr.Filter{Kinds: []int{protocol.KindAgentProfile}, Authors: []string{s.agentPK}})
	if len(profiles) != 1 {
		t.Fatalf("agent profiles = %d, want 1", len(profiles))
	}
	var c map[string]any
	_ = json.Unmarshal([]byte(profiles[0].Content), &c)
	if c["channel_add_policy"] != "owner_only" {
		t.Fatalf("profile content %s", profiles[0].Content)
	}
	if got, err := ownerauth.OfEvent(&profiles[0]); err != nil || got.Owner != s.ownerPK {
		t.Fatalf("profile auth tag: owner %q, err %v", got.Owner, err)
	}

	strangerSK, _ := newKey(t)
	lure := s.relay.CreateChannel(t, strangerSK, "general", false)
	_, res := s.relay.TryPublish(t, strangerSK, &nostr.Event{Kind: protocol.KindPutUser, Tags: nostr.Tags{{"h", lure}, {"p", s.agentPK}}})
	if res.Accepted || !strings.Contains(res.Message+res.Error, "owner_only") {
		t.Fatalf("stranger's add = %+v, want the owner_only refusal", res)
	}
	mine := s.relay.CreateChannel(t, s.ownerSK, "work", false)
	s.relay.AddMember(t, s.ownerSK, mine, s.agentPK, "bot")
}

func TestBadChannelAddPolicyOrForeignAuthTagStopsTheStart(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	_, otherPK := newKey(t)
	foreign, _ := ownerauth.Issue(s.ownerSK, otherPK, "", nil)
	for _, env := range [][]string{
		{"BUZZ_ACP_CHANNEL_ADD_POLICY=owners"},
		{"BUZZ_ACP_CHANNEL_ADD_POLICY=owner_only", "BUZZ_AUTH_TAG=" + foreign.JSON()},
	} {
		out := runBuzzACPEnv(t, s, env...)
		if !strings.Contains(out, "--channel-add-policy") && !strings.Contains(out, "--auth-tag") {
			t.Fatalf("env %v: output %q names neither flag", env, out)
		}
	}
}

// runBuzzACPEnv runs buzz-acp with extra env and returns its output once it exits (it is
// expected to refuse to start).
func runBuzzACPEnv(t *testing.T, s *stack, env ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(s.bin, "buzz-acp"),
		"--agent-command", filepath.Join(s.bin, "testagent"),
		"--relay-url", s.relay.URL, "--state-dir", t.TempDir(), "--agent-cwd", t.TempDir())
	cmd.Env = append(append(os.Environ(), "BUZZ_PRIVATE_KEY="+s.agentSK), env...)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("buzz-acp with %v exited 0; output:\n%s", env, out)
	}
	return string(out)
}
