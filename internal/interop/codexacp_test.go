package interop

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/buzz-harness/buzz/internal/fakemodel"
)

// codexACPEnv is what @agentclientprotocol/codex-acp 2.6 needs to run offline: codex's config with
// a custom provider at the fake Responses API, a dummy key, and a mode that runs commands itself
// (its default mode hands shell escalations to its own reviewer, never to the client).
func codexACPEnv(t *testing.T, s *stack, m *fakemodel.Server) []string {
	return []string{"CODEX_HOME=" + codexHome(t, s.home, m.URL), "OPENAI_API_KEY=sk-dummy",
		"BUZZ_ACP_PERMISSION_MODE=agent-full-access"}
}

func TestCodexACP26RepliesWithItsShellAndKeepsItsSessionAcrossSIGKILL(t *testing.T) {
	t.Parallel()
	node, script := codexACP.command(t)
	m := fakemodel.NewResponses(t, CodexFullAccessScript(rememberCodeword))
	s := newStack(t)
	t.Cleanup(func() { dumpOnFailure(t, s, m.Requests()) })
	s.start(node, []string{script}, codexACPEnv(t, s, m)...)

	start := time.Now()
	first := s.mention("codeword=MANGO")
	if r := s.waitReply(first.ID, 2*time.Minute); r.Content != "no codeword in history" {
		t.Fatalf("first reply %q is not the one the agent's shell sent", r.Content)
	}
	t.Logf("first mention → channel reply in %v", time.Since(start).Round(time.Millisecond))
	s.waitTurns(1, 30*time.Second)
	lines := s.acpLines(s.activity)
	news := sent(lines, "session/new")
	if len(news) != 1 || !strings.Contains(string(news[0]), `"systemPrompt":{"mode":"append"`) {
		t.Fatalf("session/new ×%d %.300s; want one carrying the standing context as systemPrompt", len(news), news)
	}
	for _, p := range sent(lines, "session/prompt") {
		if strings.Contains(string(p), "[Base]") {
			t.Fatal("the standing context also went out in the user message")
		}
	}
	modeSet := false
	for _, method := range []string{"session/set_config_option", "session/set_mode"} {
		for _, p := range sent(lines, method) {
			modeSet = modeSet || strings.Contains(string(p), `"agent-full-access"`)
		}
	}
	if !modeSet {
		t.Fatal("--permission-mode agent-full-access, a mode only codex-acp 2.6 has, was not set")
	}
	briefed := false
	for _, r := range m.Requests() {
		for _, msg := range r.Messages {
			briefed = briefed || msg.Role == "developer" && strings.Contains(msg.Text, baseMarker)
		}
	}
	if !briefed {
		t.Fatal("no model request carried [Base] as a developer message")
	}

	s.kill() // SIGKILL to buzz-acp and the adapter
	restarted := time.Now()
	s.start(node, []string{script}, codexACPEnv(t, s, m)...)
	second := s.mention("what was the codeword?")
	reply := s.waitReply(second.ID, 2*time.Minute)
	t.Logf("restart → answer from the resumed session in %v", time.Since(restarted).Round(time.Millisecond))
	if reply.Content != "the codeword is MANGO" {
		t.Fatalf("reply %q: the model did not see the first turn, so the session was not resumed", reply.Content)
	}
	lines = s.acpLines(s.activity)
	if n := len(sent(lines, "session/new")); n != 0 {
		t.Fatalf("second run sent session/new %d times, want 0", n)
	}
	resumes := sent(lines, "session/resume")
	var q struct {
		SessionID string `json:"sessionId"`
	}
	if len(resumes) == 1 {
		_ = json.Unmarshal(resumes[0], &q)
	}
	if len(resumes) != 1 || q.SessionID == "" {
		t.Fatalf("second run sent session/resume ×%d, want one", len(resumes))
	}
}
