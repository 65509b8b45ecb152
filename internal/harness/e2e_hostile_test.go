package harness_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/testwait"
)

func TestAgentWritingGarbageLinesStillAnswers(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start(nil, "TESTAGENT_GARBAGE=1")
	if r := s.waitReply(s.mention(s.ownerSK, "through the noise").ID); !strings.Contains(r.Content, "through the noise") {
		t.Fatalf("reply %q", r.Content)
	}
}

func TestAgentWriting100MBLineDoesNotTakeTheHarnessDown(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("moves 100 MB through a pipe")
	}
	s := newStack(t)
	activity := filepath.Join(t.TempDir(), "activity.jsonl")
	s.start([]string{"--activity-log", activity}, "TESTAGENT_BIG_CHUNK=104857600")
	// Generous bounds, only for when to give up: with the race detector on, each side's JSON
	// handling of the 100 MB line takes tens of seconds of CPU (buzz-acp decodes it three
	// times), and at a load average of 30 the test gets a few percent of a core.
	m := s.mention(s.ownerSK, "big")
	s.waitEvent(10*time.Minute, nostr.Filter{Kinds: []int{9}, Authors: []string{s.agentPK}, Tags: nostr.TagMap{"e": {m.ID}}})
	s.waitLog("turn done", 10*time.Minute)
	st, err := os.Stat(activity)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() > 8<<20 {
		t.Fatalf("activity log is %d bytes: a 100 MB line was copied into the feed", st.Size())
	}
}

func TestAgentThatNeverAnswersInitializeIsKilledAndReplacedWithClearLog(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start([]string{"--agent-init-timeout", "1"}, "TESTAGENT_NO_INIT=1")
	s.waitLog("agent failed to start", 20*time.Second)
	logs := s.logs.String()
	if !strings.Contains(logs, "initialize") {
		t.Fatalf("the failure does not say initialize timed out:\n%s", logs)
	}
	// It is respawned after a backoff (1 s the first time).
	testwait.Eventually(t, 20*time.Second, func() bool { return strings.Count(s.logs.String(), "testagent: started pid") >= 2 },
		"a second agent to replace the silent one")
}

func TestSecretsNeverReachLogsOrActivityFeed(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	activity := filepath.Join(t.TempDir(), "activity.jsonl")
	s.start([]string{"--activity-log", activity})
	s.waitReply(s.mention(s.ownerSK, "keep my secrets").ID)
	s.kill()
	feed, err := os.ReadFile(activity)
	if err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"logs": s.logs.String(), "activity feed": string(feed)} {
		for _, secret := range []string{s.agentSK, protocol.Nsec(s.agentSK)} {
			if strings.Contains(text, secret) {
				t.Errorf("the agent's private key appears in the %s", name)
			}
		}
	}
}

func TestGateDroppedMentionIsNotPromptedAfterRestartReplay(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	strangerSK, _ := newKey(t)
	s.start(nil) // owner-only
	dropped := s.mention(strangerSK, "let me in")
	s.waitOutcome(s.mention(s.ownerSK, "!status").ID)
	s.kill()
	s.start(nil) // the relay replays since the journal's watermark, which covers both events
	s.waitReply(s.mention(s.ownerSK, "after restart").ID)
	for _, p := range s.prompts() {
		if strings.Contains(p, dropped.ID) {
			t.Fatal("a mention the author gate dropped was prompted after the restart")
		}
	}
	if n := len(s.methods("session/prompt")); n != 1 {
		t.Fatalf("%d prompts, want 1 (the replayed !status must not run again either)", n)
	}
}

// The agent is told which key is its owner's, once per session, so a stranger's message laid
// out like the owner's (issue 28, forged context) can be told apart.
func TestFirstPromptOfASessionNamesTheOwnersKey(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start(nil)
	one := s.mention(s.ownerSK, "one")
	first := s.waitReply(one.ID)
	s.mention(s.ownerSK, "two", replyTo(one.ID))
	s.waitNewReply(one.ID, first)
	ps := s.prompts()
	if len(ps) != 2 {
		t.Fatalf("%d prompts, want 2", len(ps))
	}
	if !strings.Contains(ps[0], "[Owner]\nYour owner is ") || !strings.Contains(ps[0], "exactly "+s.ownerPK+";") {
		t.Fatalf("first prompt does not name the owner's key:\n%.600s", ps[0])
	}
	if strings.Contains(ps[1], "[Owner]") {
		t.Fatal("the owner section was sent again in the same session")
	}
}

// !status typed in an open channel is read by everyone there: it lists that channel and the
// open ones, never the ids of the agent's private channels and DMs (issue 28), only their count.
func TestOwnerStatusInAnOpenChannelLeavesPrivateChannelsAndDMsOut(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	secret := s.relay.CreateChannel(t, s.ownerSK, "secret", true)
	s.relay.AddMember(t, s.ownerSK, secret, s.agentPK, "member")
	dm := nostr.Event{Kind: protocol.KindDMOpen, CreatedAt: nostr.Now(), Tags: nostr.Tags{{"p", s.agentPK}}}
	s.relay.Publish(t, s.ownerSK, dm)
	dm.PubKey = s.ownerPK
	dmID, _ := protocol.DMOpenChannel(&dm)
	s.start(nil)
	m := s.mention(s.ownerSK, "!status")
	out := s.waitOutcome(m.ID)
	raw := s.waitEvent(5*time.Second, nostr.Filter{Kinds: []int{protocol.KindSystemMessage}, Authors: []string{s.agentPK}, Tags: nostr.TagMap{"e": {m.ID}}}).Content
	st, _ := out["status"].(map[string]any)
	chans, _ := st["channels"].(map[string]any)
	others, _ := st["others"].(map[string]any)
	if _, ok := chans[s.channel]; !ok || len(chans) != 1 {
		t.Fatalf("listed channels %v, want only the open %s", chans, s.channel)
	}
	if strings.Contains(raw, secret) || strings.Contains(raw, dmID) {
		t.Fatalf("the status row names a private channel or DM: %s", raw)
	}
	if others["channels"] != 2.0 {
		t.Fatalf("others %v, want the 2 private channels counted", others)
	}
}
