// Package interop runs real, published ACP agents (claude-agent-acp, codex-acp, qwen-code,
// copilot, opencode, gemini-cli, installed from npm by scripts/install-adapters.sh) through the real buzz-acp binary and relay, offline: the
// adapters talk to internal/fakemodel servers on 127.0.0.1, driven by the scripts defined here.
// The scripts play the model's part just far enough for a turn to reach the channel (a shell
// tool call running `buzz messages send`); the servers record every request, so tests can check
// what the harness's prompts became on the wire.
package interop
