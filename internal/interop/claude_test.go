package interop

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/buzz-harness/buzz/internal/fakemodel"
	"github.com/buzz-harness/buzz/internal/harness"
	"github.com/buzz-harness/buzz/internal/protocol"
)

// baseMarker is a line of internal/prompt/base_prompt.md distinctive enough that finding it
// proves the [Base] prompt reached that place.
const baseMarker = "Everything you say in Buzz goes"

func startAnthropic(t *testing.T, reply ReplyFunc) *fakemodel.Server {
	return fakemodel.NewAnthropic(t, ClaudeScript(reply))
}

// manualPermissions makes Claude Code ask the client (session/request_permission, which buzz-acp
// answers allow_once) instead of 0.101's default "auto" mode, where a model-side safety classifier
// decides; the fake model does not imitate it, and Claude then denies the tool call
// ("Classifier unavailable") without asking the client.
func manualPermissions(t *testing.T, home string) {
	t.Helper()
	dir := filepath.Join(home, ".claude")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "settings.json"), []byte(`{"permissions":{"defaultMode":"default"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
}

func claudeEnv(m *fakemodel.Server) []string {
	return []string{"ANTHROPIC_BASE_URL=" + m.URL, "ANTHROPIC_API_KEY=sk-ant-dummy"}
}

// checkClaudeTurn runs one mention through a claude-agent-acp flavour and checks the [Base]
// prompt went to the model's system prompt and into no user message. It returns the activity
// log lines for flavour-specific checks.
func checkClaudeTurn(t *testing.T, a adapter) []acpLine {
	node, script := a.command(t)
	m := startAnthropic(t, nil)
	s := newStack(t)
	t.Cleanup(func() { dumpOnFailure(t, s, m.Requests()) })
	manualPermissions(t, s.home)
	s.start(node, []string{script}, claudeEnv(m)...)

	start := time.Now()
	mention := s.mention("ping")
	reply := s.waitReply(mention.ID, 2*time.Minute)
	t.Logf("%s: mention → channel reply in %v", a.pkg, time.Since(start).Round(time.Millisecond))
	if reply.Content != "pong" {
		t.Fatalf("reply content %q, want pong", reply.Content)
	}
	if ref := protocol.ParseThread(reply.Tags); ref.Parent != mention.ID {
		t.Fatalf("reply not threaded under the mention: %+v", ref)
	}
	s.waitTurns(1, 30*time.Second)

	var main int
	for _, r := range m.Requests() {
		for _, u := range r.UserTexts() {
			if strings.Contains(u, "[Base]") || strings.Contains(u, baseMarker) {
				t.Errorf("a user message carries the [Base] prompt:\n%.400s", u)
			}
		}
		if r.HasTool("Bash") {
			main++
			if !strings.Contains(r.System, baseMarker) {
				t.Errorf("main model request's system prompt lacks the [Base] text:\n%.600s", r.System)
			}
		}
	}
	if main < 2 {
		t.Fatalf("%d model requests with tools, want ≥2 (tool_use, then tool_result)", main)
	}
	lines := s.acpLines(s.activity)
	checkPermissionAllowed(t, lines)
	return lines
}

// checkPermissionAllowed: the agent asked before running Bash and buzz-acp's answer (its default
// --permissions allow) was the allow_once option.
func checkPermissionAllowed(t *testing.T, lines []acpLine) {
	t.Helper()
	var asked json.RawMessage
	kinds := map[string]string{} // optionId → kind, from the request
	for _, l := range lines {
		if l.Dir == "recv" && l.Method == "session/request_permission" {
			asked = l.ID
			var p struct {
				Options []struct{ OptionID, Kind string } `json:"options"`
			}
			_ = json.Unmarshal(l.Params, &p)
			for _, o := range p.Options {
				kinds[o.OptionID] = o.Kind
			}
			continue
		}
		if asked != nil && l.Dir == "send" && l.Method == "" && string(l.ID) == string(asked) {
			var r struct {
				Outcome struct{ Outcome, OptionID string } `json:"outcome"`
			}
			_ = json.Unmarshal(l.Result, &r)
			if r.Outcome.Outcome != "selected" || kinds[r.Outcome.OptionID] != "allow_once" {
				t.Fatalf("permission answer %s, want the allow_once option (options %v)", l.Raw, kinds)
			}
			return
		}
	}
	t.Fatalf("no session/request_permission answered (asked id %s)", asked)
}

func TestClaudeAgentACP0101GetsBasePromptAsSpecSystemPrompt(t *testing.T) {
	t.Parallel()
	lines := checkClaudeTurn(t, claudeACP)
	var p struct {
		SystemPrompt *struct {
			Mode    string                  `json:"mode"`
			Content []struct{ Text string } `json:"content"`
		} `json:"systemPrompt"`
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	news := sent(lines, "session/new")
	if len(news) != 1 {
		t.Fatalf("session/new sent %d times, want 1", len(news))
	}
	if err := json.Unmarshal(news[0], &p); err != nil {
		t.Fatal(err)
	}
	// 0.101 advertises sessionCapabilities.systemPrompt, so the spec field is the route.
	if p.SystemPrompt == nil || p.SystemPrompt.Mode != "append" || len(p.SystemPrompt.Content) == 0 ||
		!strings.Contains(p.SystemPrompt.Content[0].Text, "[Base]") {
		t.Fatalf("session/new systemPrompt = %s", news[0])
	}
	if _, ok := p.Meta["systemPrompt"]; ok {
		t.Fatalf("session/new also sent _meta.systemPrompt: %s", news[0])
	}
}

func TestZedClaudeAgentACP0231GetsBasePromptAsMetaAppend(t *testing.T) {
	t.Parallel()
	lines := checkClaudeTurn(t, zedClaudeACP)
	news := sent(lines, "session/new")
	if len(news) != 1 {
		t.Fatalf("session/new sent %d times, want 1", len(news))
	}
	var p struct {
		SystemPrompt json.RawMessage `json:"systemPrompt"`
		Meta         struct {
			SystemPrompt struct {
				Append string `json:"append"`
			} `json:"systemPrompt"`
		} `json:"_meta"`
	}
	if err := json.Unmarshal(news[0], &p); err != nil {
		t.Fatal(err)
	}
	// 0.23.1 has no spec systemPrompt capability; it reads only _meta.systemPrompt.append.
	if p.SystemPrompt != nil || !strings.Contains(p.Meta.SystemPrompt.Append, "[Base]") {
		t.Fatalf("session/new params = %s", news[0])
	}
}

// A model that answers in text and never calls a tool: claude-agent-acp ends the turn with the
// answer in its session text only, and buzz-acp's safety net posts it in the thread.
func TestClaudeAgentACP0101TextOnlyAnswerIsPostedByTheSafetyNet(t *testing.T) {
	node, script := claudeACP.command(t)
	m := fakemodel.NewAnthropic(t, func(int, fakemodel.Request) fakemodel.Reply {
		return fakemodel.Reply{Text: []string{"The answer is 42."}, InputTokens: 100, OutputTokens: 10}
	})
	s := newStack(t)
	t.Cleanup(func() { dumpOnFailure(t, s, m.Requests()) })
	manualPermissions(t, s.home)
	s.start(node, []string{script}, claudeEnv(m)...)

	mention := s.mention("what is the answer?")
	reply := s.waitReply(mention.ID, 60*time.Second)
	if reply.Content != "The answer is 42." {
		t.Fatalf("reply content %q, want the model's text", reply.Content)
	}
	fallback := false
	for _, tag := range reply.Tags {
		fallback = fallback || len(tag) >= 2 && tag[0] == harness.FallbackMarker && tag[1] == "1"
	}
	if ref := protocol.ParseThread(reply.Tags); !fallback || ref.Parent != mention.ID {
		t.Fatalf("reply is not the safety net's, threaded on the mention: tags %v", reply.Tags)
	}
}
