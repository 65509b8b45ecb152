package interop

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/buzz-harness/buzz/internal/fakemodel"
)

func startOpenAI(t *testing.T) *fakemodel.Server {
	return fakemodel.NewResponses(t, CodexScript(nil))
}

// codexHome writes a CODEX_HOME whose config points codex at the fake model (acp-client.md §11.4;
// OPENAI_BASE_URL is ignored by codex, a custom provider is the way).
func codexHome(t *testing.T, dir, baseURL string) string {
	t.Helper()
	home := filepath.Join(dir, "codex")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := `model = "gpt-mock"
model_provider = "mock"

[model_providers.mock]
name = "mock"
base_url = "` + baseURL + `/v1"
wire_api = "responses"
env_key = "OPENAI_API_KEY"
`
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return home
}

func TestZedCodexACPGetsStandingSectionsInFirstUserMessageOnly(t *testing.T) {
	t.Parallel()
	node, script := zedCodexACP.command(t)
	m := startOpenAI(t)
	s := newStack(t)
	t.Cleanup(func() { dumpOnFailure(t, s, m.Requests()) })
	s.start(node, []string{script},
		"CODEX_HOME="+codexHome(t, s.home, m.URL), "OPENAI_API_KEY=sk-dummy")

	start := time.Now()
	first := s.mention("ping")
	s.waitReply(first.ID, 2*time.Minute)
	t.Logf("first mention → channel reply in %v", time.Since(start).Round(time.Millisecond))
	s.waitTurns(1, 30*time.Second)
	second := s.mention("ping again")
	s.waitReply(second.ID, 2*time.Minute)
	s.waitTurns(2, 30*time.Second)

	// The model's view: the request opening each turn is the one whose newest item is the
	// mention prompt (later requests carry tool output).
	var opening []fakemodel.Request
	for _, r := range m.Requests() {
		if n := len(r.Messages); n > 0 && r.Messages[n-1].Role == "user" {
			if _, _, ok := ReplyTarget(r.Messages[n-1].Text); ok {
				opening = append(opening, r)
			}
		}
	}
	if len(opening) != 2 {
		t.Fatalf("%d turn-opening model requests, want 2", len(opening))
	}
	if u := opening[0].LastUser().Text; !strings.HasPrefix(u, "[Base]") || !strings.Contains(u, baseMarker) {
		t.Fatalf("first turn's user message does not lead with [Base]:\n%.300s", u)
	}
	if u := opening[1].LastUser().Text; strings.Contains(u, "[Base]") || strings.Contains(u, baseMarker) {
		t.Fatalf("second turn's newest user message repeats the standing sections:\n%.300s", u)
	}
	if strings.Contains(opening[0].System, baseMarker) {
		t.Fatal("codex 0.16 has no system-prompt route, yet [Base] reached its instructions")
	}

	// The wire view: what buzz-acp wrote to the adapter's stdin.
	lines := s.acpLines(s.activity)
	news := sent(lines, "session/new")
	if len(news) != 1 || strings.Contains(string(news[0]), "systemPrompt") {
		t.Fatalf("session/new ×%d %s; want one, with no systemPrompt route", len(news), news)
	}
	prompts := sent(lines, "session/prompt")
	if len(prompts) != 2 {
		t.Fatalf("%d session/prompt sent, want 2", len(prompts))
	}
	if !strings.Contains(string(prompts[0]), `"text":"[Base]\n`) || strings.Contains(string(prompts[1]), "[Base]") {
		t.Fatalf("session/prompt params: first should carry [Base], second not:\n%.300s\n%.300s", prompts[0], prompts[1])
	}
	checkPermissionAllowed(t, lines)
}
