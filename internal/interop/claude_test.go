package interop

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/buzz-harness/buzz/internal/protocol"
)

// baseMarker is a line of internal/prompt/base_prompt.md distinctive enough that finding it
// proves the [Base] prompt reached that place.
const baseMarker = "Everything you say in Buzz goes"

func startAnthropic(t *testing.T) *Anthropic {
	t.Helper()
	m, err := StartAnthropic()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

func claudeEnv(m *Anthropic) []string {
	return []string{"ANTHROPIC_BASE_URL=" + m.URL, "ANTHROPIC_API_KEY=sk-ant-dummy"}
}

// checkClaudeTurn runs one mention through a claude-agent-acp flavour and checks the [Base]
// prompt went to the model's system prompt and into no user message. It returns the activity
// log lines for flavour-specific checks.
func checkClaudeTurn(t *testing.T, a adapter) []acpLine {
	node, script := a.command(t)
	m := startAnthropic(t)
	s := newStack(t)
	s.start(node, []string{script}, claudeEnv(m)...)

	start := time.Now()
	mention := s.mention("ping")
	reply := s.waitReply(mention.ID, 60*time.Second)
	t.Logf("%s: mention → channel reply in %v", a.pkg, time.Since(start).Round(time.Millisecond))
	if reply.Content != "pong" {
		t.Fatalf("reply content %q, want pong", reply.Content)
	}
	if ref := protocol.ParseThread(reply.Tags); ref.Parent != mention.ID {
		t.Fatalf("reply not threaded under the mention: %+v", ref)
	}

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
	return s.acpLines(s.activity)
}

func TestClaudeAgentACP0101GetsBasePromptAsSpecSystemPrompt(t *testing.T) {
	lines := checkClaudeTurn(t, claudeACP)
	news := sent(lines, "session/new")
	if len(news) != 1 {
		t.Fatalf("session/new sent %d times, want 1", len(news))
	}
	var p struct {
		SystemPrompt *struct {
			Mode    string `json:"mode"`
			Content []struct{ Text string } `json:"content"`
		} `json:"systemPrompt"`
		Meta map[string]json.RawMessage `json:"_meta"`
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
