package interop

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/buzz-harness/buzz/internal/fakemodel"
)

var codewordRE = regexp.MustCompile(`codeword=([A-Z]+)`)

// rememberCodeword answers with the codeword found in an earlier user message of the
// conversation the adapter sent — never the newest, so only session history can supply it.
func rememberCodeword(r fakemodel.Request) string {
	users := r.UserTexts()
	for i := len(users) - 2; i >= 0; i-- {
		if m := codewordRE.FindStringSubmatch(users[i]); m != nil {
			return "the codeword is " + m[1]
		}
	}
	return "no codeword in history"
}

func TestClaudeAgentACPSessionSurvivesHarnessSIGKILL(t *testing.T) {
	t.Parallel()
	node, script := claudeACP.command(t)
	m := startAnthropic(t, rememberCodeword)
	s := newStack(t)
	t.Cleanup(func() { dumpOnFailure(t, s, m.Requests()) })
	manualPermissions(t, s.home) // HOME (Claude's session transcripts) persists across the restart
	s.start(node, []string{script}, claudeEnv(m)...)

	first := s.mention("codeword=PAPAYA")
	s.waitReply(first.ID, 2*time.Minute)
	s.waitTurns(1, 30*time.Second)
	created := resultOf(t, s.acpLines(s.activity), "session/new")
	var sess struct {
		SessionID string `json:"sessionId"`
	}
	if err := json.Unmarshal(created, &sess); err != nil || sess.SessionID == "" {
		t.Fatalf("session/new result %s has no sessionId", created)
	}

	s.kill() // SIGKILL to buzz-acp and the adapter: no chance to clean up
	restarted := time.Now()
	s.start(node, []string{script}, claudeEnv(m)...)
	second := s.mention("what was the codeword?")
	reply := s.waitReply(second.ID, 2*time.Minute)
	t.Logf("restart → answer from the resumed session in %v", time.Since(restarted).Round(time.Millisecond))
	if reply.Content != "the codeword is PAPAYA" {
		t.Fatalf("reply %q: the model did not see the first turn, so the session was not resumed", reply.Content)
	}

	lines := s.acpLines(s.activity)
	if n := len(sent(lines, "session/new")); n != 0 {
		t.Fatalf("second run sent session/new %d times, want 0", n)
	}
	var reopened []string
	for _, method := range []string{"session/load", "session/resume"} {
		for _, p := range sent(lines, method) {
			var q struct {
				SessionID string `json:"sessionId"`
			}
			_ = json.Unmarshal(p, &q)
			reopened = append(reopened, method+" "+q.SessionID)
		}
	}
	if len(reopened) != 1 || !strings.HasSuffix(reopened[0], " "+sess.SessionID) {
		t.Fatalf("second run reopened %v, want exactly one session/load or session/resume of %s", reopened, sess.SessionID)
	}
	t.Logf("reopened with %s", reopened[0])
}
