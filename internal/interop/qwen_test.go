package interop

import (
	"testing"

	"github.com/buzz-harness/buzz/internal/fakemodel"
)

var qwenCode = adapter{"qwen-code-0.24.4", "@qwen-code/qwen-code", "0.24.4", "cli-entry.js"}

// qwenEnv is what qwen-code needs to run offline: its OpenAI-compatible provider pointed at the
// fake chat-completions server, with a dummy key and a model name, and mode yolo: its default
// mode "auto" sends every shell command to an LLM classifier first (one more model call per
// command, and the client never sees a permission request).
func qwenEnv(m *fakemodel.Server) []string {
	return []string{"OPENAI_API_KEY=sk-dummy", "OPENAI_BASE_URL=" + m.BaseURL, "OPENAI_MODEL=gpt-mock",
		"BUZZ_ACP_PERMISSION_MODE=yolo"}
}

func TestQwenCodeRepliesWithItsShellAndResumesItsSessionAcrossSIGKILL(t *testing.T) {
	t.Parallel()
	node, script := qwenCode.command(t)
	m := fakemodel.NewOpenAI(t, ChatScript(rememberCodeword))
	s := newStack(t)
	run := func() agentRun {
		return agentRun{node, []string{script, "--acp", "--auth-type", "openai"}, qwenEnv(m)}
	}
	repliesAndResumesAcrossSIGKILL(t, s, m, run, "session/resume")
}
