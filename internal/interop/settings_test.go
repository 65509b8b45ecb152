package interop

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/testwait"
)

// answers pairs each request buzz-acp sent with method to the agent's result (nil if it
// answered with an error or not at all).
func answers(lines []acpLine, method string) (params, results []json.RawMessage) {
	for _, l := range lines {
		if l.Dir != "send" || l.Method != method {
			continue
		}
		params = append(params, l.Params)
		var res json.RawMessage
		for _, r := range lines {
			if r.Dir == "recv" && r.Method == "" && string(r.ID) == string(l.ID) {
				res = r.Result
			}
		}
		results = append(results, res)
	}
	return params, results
}

// TestClaudeAgentACP0101TakesModelAndPermissionModeFromFlags: no settings file here, so without
// --permission-mode the adapter stays in its "auto" mode and denies the Bash call on its own; the
// turn reaching the channel through a permission request shows "default" took effect, and the
// adapter's answers and the model requests show the model did.
func TestClaudeAgentACP0101TakesModelAndPermissionModeFromFlags(t *testing.T) {
	t.Parallel()
	node, script := claudeACP.command(t)
	m := startAnthropic(t, nil)
	s := newStack(t)
	t.Cleanup(func() { dumpOnFailure(t, s, m.Requests()) })
	s.start(node, []string{script}, append(claudeEnv(m), "BUZZ_ACP_MODEL=sonnet", "BUZZ_ACP_PERMISSION_MODE=default")...)

	mention := s.mention("ping")
	if reply := s.waitReply(mention.ID, 3*time.Minute); reply.Content != "pong" {
		t.Fatalf("reply %q, want pong", reply.Content)
	}
	s.waitTurns(1, 30*time.Second)
	lines := s.acpLines(s.activity)
	params, results := answers(lines, "session/set_config_option")
	if len(params) != 2 {
		t.Fatalf("session/set_config_option sent %d times, want 2 (model, then mode)", len(params))
	}
	for i, want := range []struct{ configID, value string }{{"model", "sonnet"}, {"mode", "default"}} {
		var p struct{ ConfigID, Value string }
		_ = json.Unmarshal(params[i], &p)
		if p.ConfigID != want.configID || p.Value != want.value {
			t.Fatalf("set_config_option #%d = %s, want %s=%s", i+1, params[i], want.configID, want.value)
		}
		// The adapter answers with its whole state: it now reports the value as current.
		var r struct {
			ConfigOptions []struct{ ID, CurrentValue string } `json:"configOptions"`
		}
		if results[i] == nil || json.Unmarshal(results[i], &r) != nil {
			t.Fatalf("set_config_option %s not answered with a result", want.configID)
		}
		found := false
		for _, o := range r.ConfigOptions {
			found = found || o.ID == want.configID && o.CurrentValue == want.value
		}
		if !found {
			t.Fatalf("after set_config_option %s=%s the adapter reports %s", want.configID, want.value, results[i])
		}
	}
	checkPermissionAllowed(t, lines)
	for _, r := range m.Requests() {
		if r.HasTool("Bash") && !strings.Contains(r.Model, "sonnet") {
			t.Fatalf("main model request for model %q, want a sonnet model", r.Model)
		}
	}
}

// waitAgentMessage waits for the agent's kind-9 message referencing id whose content matches.
func (s *stack) waitAgentMessage(id, what string, match func(string) bool, timeout time.Duration) nostr.Event {
	s.t.Helper()
	f := nostr.Filter{Kinds: []int{9}, Authors: []string{s.agentPK}, Tags: nostr.TagMap{"e": {id}}}
	var msg nostr.Event
	testwait.Eventually(s.t, timeout, func() bool {
		for _, ev := range s.relay.Query(s.t, s.ownerSK, f) {
			if match(ev.Content) {
				msg = ev
				return true
			}
		}
		return false
	}, fmt.Sprintf("an agent message (%s) under %s", what, id))
	return msg
}

// TestClaudeAgentACP0101AsksTheOwnerInTheThreadAndRunsTheToolOnTheAnswer: with --permissions ask
// the adapter's request for Bash becomes a question in the thread, and the owner's answer lets
// the tool run (the reply it posts is the proof).
func TestClaudeAgentACP0101AsksTheOwnerInTheThreadAndRunsTheToolOnTheAnswer(t *testing.T) {
	t.Parallel()
	node, script := claudeACP.command(t)
	m := startAnthropic(t, nil)
	s := newStack(t)
	t.Cleanup(func() { dumpOnFailure(t, s, m.Requests()) })
	s.start(node, []string{script}, append(claudeEnv(m), "BUZZ_ACP_PERMISSION_MODE=default", "BUZZ_ACP_PERMISSIONS=ask", "BUZZ_ACP_PERMISSION_TIMEOUT=50")...)

	mention := s.mention("ping")
	q := s.waitAgentMessage(mention.ID, "the question", func(c string) bool { return strings.Contains(c, "permission needed") }, 3*time.Minute)
	if !protocol.Mentioned(q.Tags, mustPub(t, s.ownerSK)) || !strings.Contains(q.Content, "1. ") {
		t.Fatalf("question %q does not mention the owner or list options", q.Content)
	}
	for _, ev := range s.relay.Query(t, s.ownerSK, nostr.Filter{Kinds: []int{9}, Authors: []string{s.agentPK}}) {
		if ev.Content == "pong" {
			t.Fatal("the tool ran before the owner answered")
		}
	}
	s.mention("allow_once") // the owner's answer, by the option's kind (one conversation per channel here)
	s.waitAgentMessage(mention.ID, "the reply pong", func(c string) bool { return c == "pong" }, 3*time.Minute)
	s.waitTurns(1, 30*time.Second)
	checkPermissionAllowed(t, s.acpLines(s.activity))
}
