package harness_test

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/testwait"
)

// permissionAnswer is the optionId (or "cancelled") buzz-acp answered the test agent's
// permission request with.
func (s *stack) permissionAnswer() string {
	s.t.Helper()
	answer := ""
	testwait.Eventually(s.t, 20*time.Second, func() bool {
		for _, r := range s.recordedRaw() {
			if r.Type != "response" || r.Method != "session/request_permission" {
				continue
			}
			var res struct {
				Outcome struct{ Outcome, OptionID string } `json:"outcome"`
			}
			_ = json.Unmarshal(r.Result, &res)
			answer = res.Outcome.OptionID
			if res.Outcome.Outcome == "cancelled" {
				answer = "cancelled"
			}
			return true
		}
		return false
	}, "buzz-acp to answer the agent's permission request")
	return answer
}

type rawRecord struct {
	Type   string          `json:"type"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
}

func (s *stack) recordedRaw() []rawRecord {
	var out []rawRecord
	b, _ := os.ReadFile(s.record)
	for _, line := range strings.Split(string(b), "\n") {
		var r rawRecord
		if json.Unmarshal([]byte(line), &r) == nil {
			out = append(out, r)
		}
	}
	return out
}

// waitQuestion waits for the agent's permission question in the thread rooted at root.
func (s *stack) waitQuestion(root string) nostr.Event {
	s.t.Helper()
	return s.waitEvent(20*time.Second, nostr.Filter{Kinds: []int{9}, Authors: []string{s.agentPK},
		Tags: nostr.TagMap{"e": {root}, "p": {s.ownerPK}}})
}

func TestAskPutsThePermissionRequestInTheThreadAndTheOwnersNumberAnswersIt(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start([]string{"--permissions", "ask"}, "TESTAGENT_PERMISSION=1")
	m := s.mention(s.ownerSK, "deploy it")
	q := s.waitQuestion(m.ID)
	if ref := protocol.ParseThread(q.Tags); ref.Root != m.ID {
		t.Fatalf("question not in the mention's thread: %+v", ref)
	}
	for _, want := range []string{"nostr:" + protocol.Npub(s.ownerPK), "buzz messages send (execute)", "1. Reject", "2. Always allow", "3. Allow", "4. Never"} {
		if !strings.Contains(q.Content, want) {
			t.Fatalf("question lacks %q:\n%s", want, q.Content)
		}
	}
	// The console builds its buttons from the option tags: the same options, in order.
	if opts := protocol.PermissionOptions(q.Tags); len(opts) != 4 || !strings.Contains(q.Content, "\n1. "+opts[0]+"\n2. "+opts[1]+"\n3. "+opts[2]+"\n4. "+opts[3]+"\n") {
		t.Fatalf("option tags %q do not match the question:\n%s", opts, q.Content)
	}
	// A stranger's answer does not count; the owner's does.
	strangerSK, strangerPK := newKey(t)
	s.relay.AddMember(t, s.ownerSK, s.channel, strangerPK, "member")
	s.mention(strangerSK, "2", replyTo(m.ID))
	s.mention(s.ownerSK, "@bot 3", replyTo(m.ID))
	if got := s.permissionAnswer(); got != "opt-c42" {
		t.Fatalf("answered %q, want the owner's choice 3 (opt-c42, Allow)", got)
	}
	reply := s.waitNewReply(m.ID, q)
	if !strings.Contains(reply.Content, "echo: deploy it") {
		t.Fatalf("after the owner allowed it the reply is %q", reply.Content)
	}
}

func TestAskWithoutAnAnswerPicksRejectAtTheTimeout(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start([]string{"--permissions", "ask", "--permission-timeout", "1"}, "TESTAGENT_PERMISSION=1")
	m := s.mention(s.ownerSK, "deploy it")
	s.waitQuestion(m.ID)
	if got := s.permissionAnswer(); got != "opt-3f9" {
		t.Fatalf("answered %q at the timeout, want the reject_once option opt-3f9", got)
	}
	s.waitLog(`decision=reject_once by=timeout`, 10*time.Second)
}

func TestOwnerCancelWhileAskingCancelsThePermissionRequest(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start([]string{"--permissions", "ask"}, "TESTAGENT_PERMISSION=1")
	m := s.mention(s.ownerSK, "deploy it")
	s.waitQuestion(m.ID)
	if out := s.waitOutcome(s.mention(s.ownerSK, "!cancel", replyTo(m.ID)).ID); out["type"] != "agent_turn_cancelled" {
		t.Fatalf("outcome %v", out)
	}
	// The test agent stops waiting for the answer once cancelled, so the harness's log says it.
	s.waitLog(`decision=cancelled by=cancelled`, 10*time.Second)
}

func TestAskNeedsAnOwner(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	out := runBuzzACPEnv(t, s, "BUZZ_ACP_PERMISSIONS=ask")
	if !strings.Contains(out, "--permissions ask needs an owner") {
		t.Fatalf("output:\n%s", out)
	}
}

func TestHarnessKilledWhileAskingTellsTheThreadAndDoesNotRunTheTurnAgain(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	args := []string{"--permissions", "ask"}
	s.start(args, "TESTAGENT_PERMISSION=1")
	m := s.mention(s.ownerSK, "deploy it")
	q := s.waitQuestion(m.ID)
	s.kill()
	s.start(args, "TESTAGENT_PERMISSION=1")
	notice := s.waitNewReply(m.ID, q)
	if !strings.Contains(notice.Content, "restarted while waiting for your answer about buzz messages send") || !protocol.Mentioned(notice.Tags, s.ownerPK) {
		t.Fatalf("notice %q (tags %v)", notice.Content, notice.Tags)
	}
	// The next mention is the next prompt: the cancelled turn was not run again.
	next := s.mention(s.ownerSK, "something else")
	s.waitQuestion(next.ID)
	prompts := s.prompts()
	if len(prompts) != 2 || strings.Contains(prompts[1], "Event ID: "+m.ID) {
		t.Fatalf("%d prompts; the second must be the new mention only", len(prompts))
	}
}

func TestAgentDyingWhileAskingRetriesTheTurnAndAsksAgain(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start([]string{"--permissions", "ask"}, "TESTAGENT_PERMISSION=1")
	m := s.mention(s.ownerSK, "deploy it")
	q := s.waitQuestion(m.ID)
	var pid int
	if _, err := fmt.Sscanf(s.logs.String()[strings.Index(s.logs.String(), "testagent: started pid "):], "testagent: started pid %d", &pid); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// The question in the thread is not the turn's reply: the batch is retried on a new agent.
	again := s.waitNewReply(m.ID, q)
	if !strings.Contains(again.Content, "permission needed") {
		t.Fatalf("after the agent died the thread got %q, want the question asked again", again.Content)
	}
}
