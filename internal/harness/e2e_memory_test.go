package harness_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/protocol/engram"
)

const coreLabel = "[Agent Memory — core]\n"

// buzzAsAgent runs the real buzz CLI with the agent's key and owner, as the agent itself would.
func (s *stack) buzzAsAgent(stdin string, args ...string) string {
	s.t.Helper()
	cmd := exec.Command(filepath.Join(s.bin, "buzz"), args...)
	cmd.Env = append(os.Environ(), "BUZZ_RELAY_URL="+s.relay.URL, "BUZZ_PRIVATE_KEY="+s.agentSK,
		"BUZZ_AGENT_OWNER="+s.ownerPK)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		s.t.Fatalf("buzz %v: %v; stderr %s", args, err, errb.String())
	}
	return out.String()
}

// firstPrompt mentions the agent once and returns the first prompt of the new session.
func firstPrompt(t *testing.T, s *stack) string {
	t.Helper()
	m := s.mention(s.ownerSK, "who are you?")
	s.waitReply(m.ID)
	ps := s.prompts()
	if len(ps) == 0 || !strings.HasPrefix(ps[0], "[Base]\n") {
		t.Fatalf("first prompt is not briefed: %q", ps)
	}
	return ps[0]
}

func TestCoreMemoryWrittenWithBuzzMemLeadsTheNextSession(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	profile := "I am Hexa, the build bee.\nI never merge on Fridays."
	s.buzzAsAgent(profile, "mem", "set", "core", "-")
	s.start(nil)
	p := firstPrompt(t, s)
	if !strings.Contains(p, coreLabel+profile+"\n") {
		t.Fatalf("the core profile is not the memory section:\n%s", p)
	}
	if strings.Contains(p, "buzz mem set core") {
		t.Fatal("an agent with a core memory was still nudged to create one")
	}
}

func TestNoCoreMemoryNudgesTheAgentToWriteOne(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start(nil)
	p := firstPrompt(t, s)
	i := strings.Index(p, coreLabel)
	if i < 0 || !strings.Contains(p[i:], "buzz mem set core -") {
		t.Fatalf("no onboarding nudge in the memory section:\n%s", p)
	}
}

func TestUnreadableCoreMemoryGivesNoMemorySection(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	pair, err := engram.AgentSide(s.agentSK, s.ownerPK)
	if err != nil {
		t.Fatal(err)
	}
	// A record under the right d tag whose content is not NIP-44 ciphertext: the relay answers,
	// but nothing in the answer can be read. That must not read as "no memory yet".
	s.relay.Publish(t, s.agentSK, nostr.Event{Kind: protocol.KindEngram, Content: "not-ciphertext",
		Tags: nostr.Tags{{"d", pair.DTag(engram.CoreSlug)}, {"p", s.ownerPK}}})
	s.start(nil)
	p := firstPrompt(t, s)
	if strings.Contains(p, "Agent Memory") {
		t.Fatalf("an unreadable core gave a memory section:\n%s", p)
	}
	s.waitLog("core memory: unreadable", 5*time.Second)
}

func TestNoMemoryFlagSkipsCoreMemory(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.buzzAsAgent("I am Hexa.", "mem", "set", "core", "-")
	s.start([]string{"--no-memory"})
	if p := firstPrompt(t, s); strings.Contains(p, "Agent Memory") {
		t.Fatalf("--no-memory still gave a memory section:\n%s", p)
	}
}
