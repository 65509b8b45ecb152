package harness_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/clock"
	"github.com/buzz-harness/buzz/internal/harness"
	"github.com/buzz-harness/buzz/internal/sessionstore"
	"github.com/buzz-harness/buzz/internal/testwait"
)

type sessionParams struct {
	SessionID    string `json:"sessionId"`
	Cwd          string `json:"cwd"`
	McpServers   []any  `json:"mcpServers"`
	SystemPrompt *struct {
		Mode    string `json:"mode"`
		Content []struct {
			Type, Text string
		} `json:"content"`
	} `json:"systemPrompt"`
	Meta map[string]any `json:"_meta"`
}

func decodeSession(t *testing.T, r record) sessionParams {
	t.Helper()
	var p sessionParams
	if err := json.Unmarshal(r.Params, &p); err != nil {
		t.Fatalf("%s params: %v", r.Method, err)
	}
	return p
}

func TestSessionSurvivesHarnessSIGKILLViaSessionLoad(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start(nil) // the test agent advertises loadSession and persists its sessions
	first := s.mention(s.ownerSK, "codeword=PAPAYA")
	r1 := s.waitReply(first.ID)
	s.waitLog("turn done", 20*time.Second) // the test agent saves its history after posting the reply
	s.waitStored(first.ID)
	s.kill()

	s.start(nil, "TESTAGENT_REPLY=answer {codeword}")
	s.mention(s.ownerSK, "codeword?", replyTo(first.ID))
	reply := s.waitNewReply(first.ID, r1)
	if !strings.Contains(reply.Content, "PAPAYA") {
		t.Fatalf("reply %q does not remember the codeword: the session was not resumed", reply.Content)
	}
	news, loads := s.methods("session/new"), s.methods("session/load")
	if len(news) != 1 || len(loads) != 1 {
		t.Fatalf("session/new ×%d, session/load ×%d; want 1 and 1", len(news), len(loads))
	}
	id := decodeSession(t, loads[0]).SessionID
	if id == "" {
		t.Fatal("session/load carried no session id")
	}
	// The reply lands before the turn ends; the turn's log line names the session it used.
	s.waitLog("session="+id, 10*time.Second)
	if n := len(s.methods("session/prompt")); n != 2 {
		t.Fatalf("%d prompts, want 2 (one turn per mention)", n)
	}
}

func TestSessionResumePreferredWhenAdvertised(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start(nil, "TESTAGENT_CAPS=resume")
	first := s.mention(s.ownerSK, "codeword=KIWI")
	r1 := s.waitReply(first.ID)
	s.waitLog("turn done", 20*time.Second) // the test agent saves its history after posting the reply
	s.waitStored(first.ID)
	s.kill()
	s.start(nil, "TESTAGENT_CAPS=resume", "TESTAGENT_REPLY=answer {codeword}")
	s.mention(s.ownerSK, "codeword?", replyTo(first.ID))
	if reply := s.waitNewReply(first.ID, r1); !strings.Contains(reply.Content, "KIWI") {
		t.Fatalf("reply %q", reply.Content)
	}
	if len(s.methods("session/resume")) != 1 || len(s.methods("session/load")) != 0 {
		t.Fatalf("resume ×%d load ×%d; want resume only", len(s.methods("session/resume")), len(s.methods("session/load")))
	}
}

func TestRefusedResumeForgetsRecordAndFallsBackInSameTurn(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start(nil)
	first := s.mention(s.ownerSK, "hello")
	r1 := s.waitReply(first.ID)
	s.waitStored(first.ID)
	s.kill()
	// A fresh agent state dir: the agent no longer knows the session and answers -32002.
	s.agentDir = t.TempDir()
	s.start(nil)
	s.mention(s.ownerSK, "again", replyTo(first.ID))
	s.waitNewReply(first.ID, r1)
	if len(s.methods("session/load")) != 1 || len(s.methods("session/new")) != 2 {
		t.Fatalf("load ×%d new ×%d; want 1 and 2", len(s.methods("session/load")), len(s.methods("session/new")))
	}
	if !strings.Contains(s.logs.String(), "resume refused") {
		t.Fatal("no log of the refused resume")
	}
}

// A loaded session whose every prompt fails with an agent error (gemini-cli 0.61 reloads a
// history its model refuses) is dropped after the second failure: the retry opens a new session
// and answers, where keeping it would fail the conversation's every turn.
func TestReopenedSessionFailingEveryPromptIsReplacedByANewSession(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start(nil)
	first := s.mention(s.ownerSK, "codeword=FIG")
	r1 := s.waitReply(first.ID)
	s.waitLog("turn done", 20*time.Second)
	s.waitStored(first.ID)
	s.kill()
	// In process on a fake clock: the two failures' backoff (5 s, then 10 s) passes as the test
	// moves the clock, not in real time against the reply's deadline.
	clk := clock.NewFake(time.Now())
	cancel, _ := s.runInProcess(t, harness.Config{Clock: clk}, "TESTAGENT_FAIL_LOADED=1", "TESTAGENT_REPLY=answer {codeword}")
	defer cancel()
	s.mention(s.ownerSK, "codeword?", replyTo(first.ID))
	var reply nostr.Event
	testwait.Eventually(t, 30*time.Second, func() (ok bool) {
		if reply, ok = s.newReply(first.ID, r1); !ok {
			clk.Advance(time.Second)
		}
		return ok
	}, "a new agent reply in thread "+first.ID)
	if strings.Contains(reply.Content, "FIG") {
		t.Fatalf("reply %q came from the loaded session, whose prompts all fail", reply.Content)
	}
	if loads, news, prompts := len(s.methods("session/load")), len(s.methods("session/new")), len(s.methods("session/prompt")); loads != 1 || news != 2 || prompts != 4 {
		t.Fatalf("load ×%d new ×%d prompt ×%d; want 1, 2 (before and after) and 4 (1, 2 failing, 1)", loads, news, prompts)
	}
	if !strings.Contains(s.logs.String(), "prompts keep failing on the reopened session") {
		t.Fatal("no log of the dropped session")
	}
}

func TestNoResumeSessionsOptsOut(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start([]string{"--no-resume-sessions"})
	first := s.mention(s.ownerSK, "hello")
	r1 := s.waitReply(first.ID)
	s.kill()
	s.start([]string{"--no-resume-sessions"})
	s.mention(s.ownerSK, "again", replyTo(first.ID))
	s.waitNewReply(first.ID, r1)
	if len(s.methods("session/load")) != 0 || len(s.methods("session/new")) != 2 {
		t.Fatalf("load ×%d new ×%d", len(s.methods("session/load")), len(s.methods("session/new")))
	}
}

func TestSecondHarnessOnSameKeyAndStateDirExitsNamingHolderPID(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start(nil)
	first := s.harness
	s.harness = nil // keep the first running; start a second with the same key and state dir
	defer func() { s.harness = first }()
	cmdOut := runBuzzACP(t, s)
	if !strings.Contains(cmdOut, "locked by pid") {
		t.Fatalf("second harness output %q does not name the lock holder", cmdOut)
	}
}

func TestSessionNewCarriesChannelIdentityAndTitleInOneMeta(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start([]string{"--session-title", "Helper"})
	m := s.mention(s.ownerSK, "hi")
	s.waitReply(m.ID)
	p := decodeSession(t, s.methods("session/new")[0])
	if p.Meta["channelId"] != s.channel || p.Meta["channelType"] != "stream" || p.Meta["sessionTitle"] != "Helper · #general" {
		t.Fatalf("_meta = %v", p.Meta)
	}
	if p.McpServers == nil {
		t.Fatal("mcpServers is null; it must be an array")
	}
	if !strings.HasPrefix(p.Cwd, "/") {
		t.Fatalf("cwd %q is not absolute", p.Cwd)
	}
}

func TestAgentDyingDuringLoadIsRespawnedAndLoadRetriedOnce(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start(nil)
	first := s.mention(s.ownerSK, "codeword=MANGO")
	r1 := s.waitReply(first.ID)
	s.waitLog("turn done", 20*time.Second) // the test agent saves its history after posting the reply
	s.kill()
	s.start(nil, "TESTAGENT_CRASH_ON_LOAD=1", "TESTAGENT_REPLY=answer {codeword}")
	s.mention(s.ownerSK, "codeword?", replyTo(first.ID))
	reply := s.waitNewReply(first.ID, r1)
	if !strings.Contains(reply.Content, "MANGO") {
		t.Fatalf("reply %q: the session was not resumed after the retry", reply.Content)
	}
	if loads, news := len(s.methods("session/load")), len(s.methods("session/new")); loads != 2 || news != 1 {
		t.Fatalf("session/load ×%d, session/new ×%d; want 2 (one lost with the agent, one retried) and 1", loads, news)
	}
}

// waitStored waits until the session store on disk holds the session of the thread rooted at
// root in the stack's channel. A new session's record is written off the loop, normally before
// its first prompt (awaitStored, at most a second); a SIGKILL test must not outrun a slow disk.
func (s *stack) waitStored(root string) {
	s.t.Helper()
	path := filepath.Join(s.stateDir, sessionstore.FileName(s.agentPK))
	testwait.Eventually(s.t, 20*time.Second, func() bool {
		raw, err := os.ReadFile(path)
		var file struct {
			Sessions map[string]json.RawMessage `json:"sessions"`
		}
		return err == nil && json.Unmarshal(raw, &file) == nil && file.Sessions[s.channel+":"+root] != nil
	}, "the thread's session on disk")
}
