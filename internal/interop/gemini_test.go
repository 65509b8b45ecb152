package interop

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/buzz-harness/buzz/internal/fakemodel"
)

var geminiCLI = adapter{"gemini-cli-0.61.0", "@google/gemini-cli", "0.61.0", "bundle/gemini.js"}

// geminiSettings writes gemini-cli's user settings into home: no usage statistics (its
// Clearcut logging), no telemetry, no update check, so nothing leaves 127.0.0.1 (an strace
// of a turn saw two connects, both to 127.0.0.1: the fake model and the relay).
func geminiSettings(t *testing.T, home string) {
	t.Helper()
	dir := filepath.Join(home, ".gemini")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := `{"general":{"enableAutoUpdate":false,"enableAutoUpdateNotification":false},
"privacy":{"usageStatisticsEnabled":false},"telemetry":{"enabled":false}}`
	if err := os.WriteFile(filepath.Join(dir, "settings.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
}

// geminiEnv is what gemini-cli 0.61 needs to run offline: its "gateway" auth (chosen because
// GOOGLE_GEMINI_BASE_URL is set) pointed at the fake Gemini API with a dummy key; a fixed model,
// since its default "auto" asks a classifier model for a JSON score before every turn; and no
// relaunch, which would start a second Node process only to raise its heap limit.
func geminiEnv(m *fakemodel.Server) []string {
	return []string{"GEMINI_API_KEY=dummy", "GOOGLE_GEMINI_BASE_URL=" + m.BaseURL,
		"GEMINI_MODEL=gemini-2.5-flash", "GEMINI_CLI_NO_RELAUNCH=true"}
}

// geminiFirstTurn starts buzz-acp with gemini-cli, has it answer a mention through its own
// shell tool (approved by buzz-acp's default --permissions allow), kills both, and returns
// the session gemini-cli created.
func geminiFirstTurn(t *testing.T, s *stack, node, script string, m *fakemodel.Server) string {
	t.Helper()
	geminiSettings(t, s.home)
	s.start(node, []string{script, "--acp"}, geminiEnv(m)...)
	start := time.Now()
	first := s.mention("codeword=MANGO")
	if got := s.waitReply(first.ID, time.Minute); got.Content != "no codeword in history" {
		t.Fatalf("first reply %q is not the one the agent's shell sent", got.Content)
	}
	t.Logf("first mention → channel reply in %v", time.Since(start).Round(time.Millisecond))
	s.waitTurns(1, 30*time.Second)
	lines := s.acpLines(s.activity)
	var sess struct {
		SessionID string `json:"sessionId"`
	}
	if err := json.Unmarshal(resultOf(t, lines, "session/new"), &sess); err != nil || sess.SessionID == "" {
		t.Fatal("session/new answered no sessionId")
	}
	s.kill() // SIGKILL to buzz-acp and the agent: no chance to clean up
	return sess.SessionID
}

// loadAnswer is the agent's answer to the single session/load of a run: its error message, or ""
// if it succeeded.
func loadAnswer(t *testing.T, lines []acpLine, sessionID string) string {
	t.Helper()
	var id json.RawMessage
	for _, l := range lines {
		if l.Dir == "send" && l.Method == "session/load" {
			var q struct {
				SessionID string `json:"sessionId"`
			}
			_ = json.Unmarshal(l.Params, &q)
			if id != nil || q.SessionID != sessionID {
				t.Fatalf("second run's session/load %s; want one, of %s", l.Params, sessionID)
			}
			id = l.ID
		}
	}
	for _, l := range lines {
		var e struct {
			ID    json.RawMessage `json:"id"`
			Error *struct {
				Data struct{ Details string }
			} `json:"error"`
		}
		if l.Dir != "recv" || l.Method != "" || json.Unmarshal([]byte(l.Raw), &e) != nil || string(e.ID) != string(id) {
			continue
		}
		if e.Error == nil {
			return ""
		}
		return "error: " + e.Error.Data.Details
	}
	t.Fatalf("session/load (id %s) was never answered", id)
	return ""
}

// gemini-cli names a session's recording after the minute it starts (session-<minute>-<id8>), and
// session/load starts a recording of the loaded session too, before reading it back: within the
// session's minute that overwrites the history with an empty one, and the load answers "No
// previous sessions found". buzz-acp must then answer the mention from a new session. The test
// keeps the first turn and the reload inside one minute by starting early enough in it.
func TestGeminiCLI061ReloadWithinItsMinuteFailsAndANewSessionAnswers(t *testing.T) {
	t.Parallel()
	node, script := geminiCLI.command(t)
	m := fakemodel.NewGemini(t, GeminiScript(rememberCodeword))
	s := newStack(t)
	t.Cleanup(func() { dumpOnFailure(t, s, m.Requests()) })
	// Both runs take 10–20s under -race; past the minute's 20th second, start with the next one.
	if now := time.Now().UTC(); now.Second() >= 20 {
		time.Sleep(now.Truncate(time.Minute).Add(time.Minute).Sub(now))
	}
	began := time.Now().UTC()
	id := geminiFirstTurn(t, s, node, script, m)

	restarted := time.Now()
	s.start(node, []string{script, "--acp"}, geminiEnv(m)...)
	second := s.mention("what was the codeword?")
	reply := s.waitReply(second.ID, time.Minute)
	t.Logf("restart → answer from the new session in %v", time.Since(restarted).Round(time.Millisecond))
	lines := s.acpLines(s.activity)
	got := loadAnswer(t, lines, id)
	if !time.Now().UTC().Truncate(time.Minute).Equal(began.Truncate(time.Minute)) {
		t.Fatalf("the runs crossed into the next minute (%v after the first began): this test needs the reload within the session's minute", time.Since(began))
	}
	if got != "error: No previous sessions found for this project." {
		t.Fatalf("session/load answered %q; want gemini-cli 0.61's same-minute failure", got)
	}
	if !strings.Contains(s.logs.String(), `msg="resume refused; starting a new session"`) {
		t.Fatal("buzz-acp did not log the fallback to a new session")
	}
	if n := len(sent(lines, "session/new")); n != 1 {
		t.Fatalf("second run sent session/new %d times, want 1", n)
	}
	if reply.Content != "no codeword in history" {
		t.Fatalf("reply %q; want the new session's answer, which has no history", reply.Content)
	}
}

var geminiRecordingRE = regexp.MustCompile(`^session-(\d{4}-\d\d-\d\dT\d\d-\d\d)-([0-9a-f]{8})\.jsonl$`)

// A session older than its minute reloads, but gemini-cli 0.61 rebuilds each tool call's turn
// with its result twice, which the Gemini API refuses (the fake does as the real one does), so
// every prompt on the reloaded session fails. buzz-acp drops it at the second failure and
// answers from a new session. Renaming the recording into an earlier minute stands in for the
// minute passing (only the file name depends on it) rather than waiting one out.
func TestGeminiCLI061ReloadedSessionFailsItsPromptsAndANewSessionAnswers(t *testing.T) {
	t.Parallel()
	node, script := geminiCLI.command(t)
	m := fakemodel.NewGemini(t, GeminiScript(rememberCodeword))
	s := newStack(t)
	t.Cleanup(func() { dumpOnFailure(t, s, m.Requests()) })
	id := geminiFirstTurn(t, s, node, script, m)

	files, _ := filepath.Glob(filepath.Join(s.home, ".gemini", "tmp", "*", "chats", "session-*.jsonl"))
	aged := 0
	for _, f := range files {
		sub := geminiRecordingRE.FindStringSubmatch(filepath.Base(f))
		if sub == nil || sub[2] != id[:8] {
			continue
		}
		minute, err := time.Parse("2006-01-02T15-04", sub[1])
		if err != nil {
			t.Fatal(err)
		}
		older := "session-" + minute.Add(-time.Minute).Format("2006-01-02T15-04") + "-" + sub[2] + ".jsonl"
		if err := os.Rename(f, filepath.Join(filepath.Dir(f), older)); err != nil {
			t.Fatal(err)
		}
		aged++
	}
	if aged != 1 {
		t.Fatalf("found %d recordings of session %s among %v, want 1", aged, id, files)
	}

	restarted := time.Now()
	before := len(m.Requests())
	s.start(node, []string{script, "--acp"}, geminiEnv(m)...)
	second := s.mention("what was the codeword?")
	reply := s.waitReply(second.ID, 2*time.Minute)
	t.Logf("restart → answer from the new session in %v", time.Since(restarted).Round(time.Millisecond))
	lines := s.acpLines(s.activity)
	if got := loadAnswer(t, lines, id); got != "" {
		t.Fatalf("session/load of a session from an earlier minute answered %q, want success", got)
	}
	// The first request after the load carries the first turn, its tool result twice.
	reloaded := m.Requests()[before]
	tools := 0
	for _, msg := range reloaded.Messages {
		if msg.Role == "tool" {
			tools++
		}
	}
	if rememberCodeword(reloaded) != "the codeword is MANGO" || tools != 2 {
		t.Fatalf("reloaded history: codeword answer %q, %d tool results for one call; want MANGO and 2",
			rememberCodeword(reloaded), tools)
	}
	if !strings.Contains(s.logs.String(), fakemodel.GeminiCallMismatch) {
		t.Fatal("the prompt on the reloaded session did not fail with the API's refusal")
	}
	if !strings.Contains(s.logs.String(), "prompts keep failing on the reopened session") {
		t.Fatal("buzz-acp did not log dropping the reopened session")
	}
	if n := len(sent(lines, "session/new")); n != 1 {
		t.Fatalf("second run sent session/new %d times, want 1", n)
	}
	if reply.Content != "no codeword in history" {
		t.Fatalf("reply %q; want the new session's answer", reply.Content)
	}
}
