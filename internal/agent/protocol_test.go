package agent

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/buzz-harness/buzz/internal/acp"
	"github.com/buzz-harness/buzz/internal/fakemodel"
)

func rpcCode(err error) int {
	var re *acp.RPCError
	if errors.As(err, &re) {
		return re.Code
	}
	return 0
}

func TestInitializeAdvertisesLoadResumeAndSystemPrompt(t *testing.T) {
	p := startBinary(t, baseEnv(), "--state-dir", t.TempDir())
	res := p.initialize()
	b, _ := json.Marshal(res)
	var got struct {
		ProtocolVersion   int `json:"protocolVersion"`
		AgentCapabilities struct {
			LoadSession         bool                       `json:"loadSession"`
			SessionCapabilities map[string]json.RawMessage `json:"sessionCapabilities"`
		} `json:"agentCapabilities"`
		AgentInfo acp.Implementation `json:"agentInfo"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.ProtocolVersion != 1 || !got.AgentCapabilities.LoadSession || got.AgentInfo.Name != "buzz-agent" || got.AgentInfo.Version == "" {
		t.Errorf("initialize = %s", b)
	}
	for _, k := range []string{"systemPrompt", "resume"} {
		if string(got.AgentCapabilities.SessionCapabilities[k]) != "{}" {
			t.Errorf("sessionCapabilities.%s = %s, want {}", k, got.AgentCapabilities.SessionCapabilities[k])
		}
	}
}

func TestUnknownMethodIsMethodNotFound(t *testing.T) {
	c := startInProcess(t, Config{})
	for _, m := range []string{"session/fork", "_probe/unknown"} {
		if err := c.call(m, map[string]any{}, nil); rpcCode(err) != acp.CodeMethodNotFound {
			t.Errorf("%s: err = %v, want -32601", m, err)
		}
	}
}

func TestSessionNewRejectsBadSystemPromptAndRelativeCwd(t *testing.T) {
	c := startInProcess(t, Config{})
	cases := map[string]map[string]any{
		"unknown mode":  {"cwd": t.TempDir(), "mcpServers": []any{}, "systemPrompt": map[string]any{"mode": "bogus", "content": []any{acp.TextBlock("x")}}},
		"image block":   {"cwd": t.TempDir(), "mcpServers": []any{}, "systemPrompt": map[string]any{"mode": "append", "content": []any{map[string]any{"type": "image", "data": "", "mimeType": "image/png"}}}},
		"array":         {"cwd": t.TempDir(), "mcpServers": []any{}, "systemPrompt": []any{"x"}},
		"relative cwd":  {"cwd": "rel/dir", "mcpServers": []any{}},
		"no cwd at all": {"mcpServers": []any{}},
	}
	for name, params := range cases {
		if err := c.call("session/new", params, nil); rpcCode(err) != acp.CodeInvalidParams {
			t.Errorf("%s: err = %v, want -32602", name, err)
		}
	}
}

func TestLoadOfUnknownSessionIsResourceNotFound(t *testing.T) {
	c := startInProcess(t, Config{})
	for _, m := range []string{"session/load", "session/resume"} {
		err := c.call(m, map[string]any{"sessionId": "no-such-session", "cwd": t.TempDir(), "mcpServers": []any{}}, nil)
		if rpcCode(err) != acp.CodeResourceNotFound {
			t.Errorf("%s: err = %v, want -32002", m, err)
		}
	}
	if err := c.call("session/prompt", acp.PromptParams{SessionID: "../../etc/passwd", Prompt: textBlocks("x")}, nil); rpcCode(err) != acp.CodeResourceNotFound {
		t.Errorf("prompt with a path-like id: err = %v, want -32002", err)
	}
}

func TestSessionFileIsPrivateAndHasNoTempLeftovers(t *testing.T) {
	state := t.TempDir()
	c := startInProcess(t, Config{StateDir: state})
	sid := c.newSession(specPrompt("[Base]\nx"))
	c.prompt(sid, "hello")
	dir := filepath.Join(state, "sessions")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != sid+".json" {
		t.Fatalf("session dir holds %v", entries)
	}
	info, _ := entries[0].Info()
	if info.Mode().Perm() != 0o600 {
		t.Errorf("session file mode = %v", info.Mode().Perm())
	}
	var d sessionData
	b, _ := os.ReadFile(filepath.Join(dir, sid+".json"))
	if err := json.Unmarshal(b, &d); err != nil || d.SystemPrompt != "[Base]\nx" || len(d.Messages) != 2 {
		t.Errorf("session file = %s (%v)", b, err)
	}
}

// restartable runs the real binary twice on one state dir.
func TestLoadReplaysHistoryAndResumeDoesNotAfterRestart(t *testing.T) {
	state := t.TempDir()
	env := baseEnv()
	first := startBinary(t, env, "--state-dir", state)
	first.initialize()
	sid := first.newSession(nil)
	first.prompt(sid, "hello replay")
	first.stop(t)

	second := startBinary(t, env, "--state-dir", state)
	second.initialize()
	second.mustCall("session/resume", map[string]any{"sessionId": sid, "cwd": t.TempDir(), "mcpServers": []any{}}, nil)
	// Call returns after every notification read before its response was
	// handled, so anything replayed would already be recorded.
	if ups := second.sessionUpdates(sid, ""); len(ups) != 0 {
		t.Fatalf("resume replayed %d updates: %+v", len(ups), ups)
	}
	second.mustCall("session/load", map[string]any{"sessionId": sid, "cwd": t.TempDir(), "mcpServers": []any{}}, nil)
	ups := second.sessionUpdates(sid, "")
	if len(ups) < 2 || ups[0].Kind != acp.UpdateUserMessageChunk || ups[0].Text != "hello replay" {
		t.Fatalf("load replay = %+v", ups)
	}
	if !strings.HasPrefix(second.agentText(sid), "echo: hello replay") {
		t.Errorf("replayed agent text = %q", second.agentText(sid))
	}
}

func TestSystemPromptSurvivesAgentRestart(t *testing.T) {
	srv := fakemodel.NewOpenAI(t, func(n int, r fakemodel.Request) fakemodel.Reply {
		return fakemodel.Reply{Text: []string{"ok"}}
	})
	state := t.TempDir()
	env := baseEnv("OPENAI_API_KEY=sk-test", "OPENAI_BASE_URL="+srv.BaseURL, "BUZZ_AGENT_STATE_DIR="+state)
	first := startBinary(t, env)
	first.initialize()
	sid := first.newSession(specPrompt("[Base]\nbase text\n\n[System]\npersona"))
	first.prompt(sid, "one")
	first.stop(t)

	second := startBinary(t, env)
	second.initialize()
	second.mustCall("session/load", map[string]any{"sessionId": sid, "cwd": t.TempDir(), "mcpServers": []any{}}, nil)
	second.prompt(sid, "two")
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("model calls = %d", len(reqs))
	}
	if reqs[1].System != "[Base]\nbase text\n\n[System]\npersona" {
		t.Errorf("system prompt after restart = %q", reqs[1].System)
	}
	if msgs := reqs[1].Messages; len(msgs) != 3 || msgs[0].Text != "one" || msgs[2].Text != "two" {
		t.Errorf("history after restart = %+v", msgs)
	}
	if !strings.Contains(first.stderr.String(), "provider openai") {
		t.Errorf("stderr = %q", first.stderr.String())
	}
}

func TestVersionFlagPrintsVersion(t *testing.T) {
	out, err := exec.Command(filepath.Join(binDir, "buzz-agent"), "--version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "buzz-agent") || !strings.Contains(string(out), "dev") {
		t.Errorf("--version: %q, %v", out, err)
	}
}

func TestUnknownProviderIsAOneLineError(t *testing.T) {
	cmd := exec.Command(filepath.Join(binDir, "buzz-agent"), "--provider", "llama")
	cmd.Env = baseEnv()
	out, err := cmd.CombinedOutput()
	if err == nil || strings.TrimSpace(string(out)) != `buzz-agent: unknown provider "llama" (want openai, anthropic or echo)` {
		t.Errorf("output %q, err %v", out, err)
	}
}

func TestUnparseableEnvironmentSettingIsAOneLineErrorNotTheDefault(t *testing.T) {
	cmd := exec.Command(filepath.Join(binDir, "buzz-agent"))
	cmd.Env = append(baseEnv(), "BUZZ_AGENT_SHELL_TIMEOUT=2 minutes")
	out, err := cmd.CombinedOutput()
	if err == nil || strings.TrimSpace(string(out)) != `buzz-agent: BUZZ_AGENT_SHELL_TIMEOUT="2 minutes" is not a duration (e.g. 90s, 2m)` {
		t.Errorf("output %q, err %v", out, err)
	}
}

func TestProviderFlagWinsOverItsEnvironmentVariable(t *testing.T) {
	cmd := exec.Command(filepath.Join(binDir, "buzz-agent"), "--provider", "llama")
	cmd.Env = append(baseEnv(), "BUZZ_AGENT_PROVIDER=echo")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), `unknown provider "llama"`) {
		t.Errorf("output %q, err %v", out, err)
	}
}
