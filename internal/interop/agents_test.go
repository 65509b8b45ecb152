package interop

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/buzz-harness/buzz/internal/fakemodel"
)

// agentRun is how one agent is started under buzz-acp: command, arguments and environment.
type agentRun struct {
	command string
	args    []string
	env     []string
}

// repliesAndResumesAcrossSIGKILL is the two turns every agent of the suite must pass: a mention
// the agent answers by running `buzz messages send` with its own shell tool, then a SIGKILL of
// buzz-acp and its agent, a restart, and a mention only the first turn's history can answer —
// reopened with reopen ("session/load" or "session/resume"), never with a new session.
func repliesAndResumesAcrossSIGKILL(t *testing.T, s *stack, m *fakemodel.Server, run func() agentRun, reopen string) {
	t.Helper()
	t.Cleanup(func() { dumpOnFailure(t, s, m.Requests()) })
	r := run()
	s.start(r.command, r.args, r.env...)

	start := time.Now()
	first := s.mention("codeword=MANGO")
	if got := s.waitReply(first.ID, time.Minute); got.Content != "no codeword in history" {
		t.Fatalf("first reply %q is not the one the agent's shell sent", got.Content)
	}
	t.Logf("first mention → channel reply in %v", time.Since(start).Round(time.Millisecond))
	s.waitTurns(1, 30*time.Second)
	created := resultOf(t, s.acpLines(s.activity), "session/new")
	var sess struct {
		SessionID string `json:"sessionId"`
	}
	if err := json.Unmarshal(created, &sess); err != nil || sess.SessionID == "" {
		t.Fatalf("session/new result %s has no sessionId", created)
	}

	s.kill() // SIGKILL to buzz-acp and the agent: no chance to clean up
	restarted := time.Now()
	r = run()
	s.start(r.command, r.args, r.env...)
	second := s.mention("what was the codeword?")
	reply := s.waitReply(second.ID, time.Minute)
	t.Logf("restart → answer from the reopened session in %v", time.Since(restarted).Round(time.Millisecond))
	if reply.Content != "the codeword is MANGO" {
		t.Fatalf("reply %q: the model did not see the first turn, so the session was not kept", reply.Content)
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
	if len(reopened) != 1 || reopened[0] != reopen+" "+sess.SessionID {
		t.Fatalf("second run reopened %v, want exactly %s of %s", reopened, reopen, sess.SessionID)
	}
}
