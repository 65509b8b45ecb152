package interop

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/buzz-harness/buzz/internal/fakemodel"
)

// opencode-ai ships its program as a native binary in a per-platform optional dependency
// (opencode-linux-x64, …); its postinstall links that binary over the package's
// bin/opencode.exe. opencodePlugin is what opencode would otherwise install from npm into its
// config dir on every start.
var (
	opencodeAI     = adapter{"opencode-1.18.33", "opencode-ai", "1.18.33", "bin/opencode.exe"}
	opencodePlugin = adapter{"opencode-plugin-1.18.33", "@opencode-ai/plugin", "1.18.33", "package.json"}
)

// opencodeBinary returns the installed opencode binary, skipping (or failing under
// BUZZ_INTEROP=1) unless it is the real one at the pinned version: the file npm unpacks there
// is a placeholder until the postinstall has run.
func opencodeBinary(t *testing.T) string {
	t.Helper()
	_, bin := opencodeAI.command(t)
	out, err := exec.Command(bin, "--version").Output()
	if got := strings.TrimSpace(string(out)); err != nil || got != opencodeAI.version {
		msg := bin + " --version: " + got + " (" + errString(err) + "), want " + opencodeAI.version +
			"; the platform package or its postinstall is missing: rerun scripts/install-adapters.sh"
		if os.Getenv("BUZZ_INTEROP") == "1" {
			t.Fatal("BUZZ_INTEROP=1: " + msg)
		}
		t.Skip(msg)
	}
	return bin
}

func errString(err error) string {
	if err == nil {
		return "exit 0"
	}
	return err.Error()
}

// opencodeEnv is what opencode needs to run offline, in s.home (kept across restarts, so its
// session database survives the SIGKILL):
//   - its global config: an OpenAI-compatible provider (@ai-sdk/openai-compatible, bundled in
//     the binary) at the fake chat-completions server, and that provider's model as default;
//   - OPENCODE_DISABLE_MODELS_FETCH: else it fetches the models.dev catalogue at start; the
//     other switches (update check, default plugins, LSP downloads) changed nothing in 1.18.33's
//     ACP mode and are there so a later version does not start fetching unseen;
//   - its config dir's dependencies already installed, from the adapter cache: without them it
//     runs an npm install of @opencode-ai/plugin there at every start (no switch turns it off;
//     it skips the install when node_modules exists and the lockfile lists the package);
//   - XDG dirs of its own, so none from the machine's environment leaks in.
func opencodeEnv(t *testing.T, s *stack, m *fakemodel.Server) []string {
	t.Helper()
	_, _ = opencodePlugin.command(t) // skips unless installed at its pinned version
	deps := filepath.Join(adapterCache(), opencodePlugin.dir)
	xdg := map[string]string{"XDG_CONFIG_HOME": ".config", "XDG_DATA_HOME": ".local/share",
		"XDG_STATE_HOME": ".local/state", "XDG_CACHE_HOME": ".cache"}
	env := []string{
		"OPENCODE_DISABLE_AUTOUPDATE=1", "OPENCODE_DISABLE_MODELS_FETCH=1",
		"OPENCODE_DISABLE_DEFAULT_PLUGINS=1", "OPENCODE_DISABLE_LSP_DOWNLOAD=1",
	}
	for k, v := range xdg {
		env = append(env, k+"="+filepath.Join(s.home, v))
	}
	dir := filepath.Join(s.home, ".config", "opencode")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"node_modules", "package.json", "package-lock.json"} {
		if err := os.Symlink(filepath.Join(deps, f), filepath.Join(dir, f)); err != nil && !os.IsExist(err) {
			t.Fatal(err)
		}
	}
	cfg := map[string]any{
		"$schema": "https://opencode.ai/config.json",
		"provider": map[string]any{"fake": map[string]any{
			"npm":     "@ai-sdk/openai-compatible",
			"name":    "Fake",
			"options": map[string]any{"baseURL": m.BaseURL, "apiKey": "sk-dummy"},
			"models":  map[string]any{"gpt-mock": map[string]any{"name": "gpt-mock"}},
		}},
		"model":      "fake/gpt-mock",
		"autoupdate": false,
		"share":      "disabled",
	}
	b, _ := json.MarshalIndent(cfg, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, "opencode.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return env
}

func TestOpencodeRepliesWithItsBashToolAndKeepsItsSessionAcrossSIGKILL(t *testing.T) {
	t.Parallel()
	bin := opencodeBinary(t)
	m := fakemodel.NewOpenAI(t, ChatScript(rememberCodeword))
	s := newStack(t)
	egress := trapEgress(t)
	run := func() agentRun { return agentRun{bin, []string{"acp"}, append(opencodeEnv(t, s, m), egress.env()...)} }
	repliesAndResumesAcrossSIGKILL(t, s, m, run, "session/resume")
	egress.none()
}
