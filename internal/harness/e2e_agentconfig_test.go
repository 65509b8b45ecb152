package harness_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// settingsState is what the test agent reports for every session: a model config option, an
// effort config option, and the legacy modes list (no mode config option, so modes go through
// session/set_mode).
const settingsState = `{"configOptions":[
 {"id":"model","name":"Model","category":"model","type":"select","currentValue":"opus","options":[{"value":"opus","name":"Opus"},{"value":"sonnet","name":"Sonnet"}]},
 {"id":"effort","name":"Effort","category":"thought_level","type":"select","currentValue":"medium","options":[{"value":"low","name":"Low"},{"value":"high","name":"High"}]}],
 "modes":{"currentModeId":"default","availableModes":[{"id":"default","name":"Default"},{"id":"plan","name":"Plan"}]}}`

// setCalls lists the set_* requests the agent received, as "method key=value" strings.
func (s *stack) setCalls() []string {
	var out []string
	for _, r := range s.recorded() {
		if r.Type != "request" || !strings.HasPrefix(r.Method, "session/set_") {
			continue
		}
		var p map[string]string
		_ = json.Unmarshal(r.Params, &p)
		switch r.Method {
		case "session/set_config_option":
			out = append(out, r.Method+" "+p["configId"]+"="+p["value"])
		case "session/set_model":
			out = append(out, r.Method+" "+p["modelId"])
		case "session/set_mode":
			out = append(out, r.Method+" "+p["modeId"])
		}
	}
	return out
}

func TestSettingsAreAppliedAfterEverySessionNewAndLoadInUpstreamOrder(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	args := []string{"--model", "sonnet", "--permission-mode", "plan", "--effort-level", "high"}
	s.start(args, "TESTAGENT_SESSION_STATE="+settingsState)
	first := s.mention(s.ownerSK, "codeword=PEAR")
	r1 := s.waitReply(first.ID)
	s.waitLog("turn done", 20*time.Second)
	once := []string{"session/set_config_option model=sonnet", "session/set_mode plan", "session/set_config_option effort=high"}
	if got := s.setCalls(); strings.Join(got, "|") != strings.Join(once, "|") {
		t.Fatalf("after session/new: %q, want %q", got, once)
	}
	s.kill()
	s.start(args, "TESTAGENT_SESSION_STATE="+settingsState)
	s.mention(s.ownerSK, "again", replyTo(first.ID)) // same thread: its session is loaded
	s.waitNewReply(first.ID, r1)
	if n := len(s.methods("session/load")); n != 1 {
		t.Fatalf("session/load ×%d, want 1", n)
	}
	twice := append(append([]string{}, once...), once...)
	if got := s.setCalls(); strings.Join(got, "|") != strings.Join(twice, "|") {
		t.Fatalf("after session/load: %q, want %q", got, twice)
	}
}

func TestSettingsFallBackToSetModelAndSkipWhatIsNotAdvertised(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	state := `{"models":{"currentModelId":"a","availableModels":[{"modelId":"a","name":"A"},{"modelId":"b","name":"B"}]}}`
	s.start([]string{"--model", "b", "--permission-mode", "accept-edits", "--effort-level", "high"}, "TESTAGENT_SESSION_STATE="+state)
	s.waitReply(s.mention(s.ownerSK, "hi").ID)
	if got := s.setCalls(); len(got) != 1 || got[0] != "session/set_model b" {
		t.Fatalf("set calls %q, want only session/set_model b (mode and effort are not advertised)", got)
	}
	s.waitLog(`setting=mode value=acceptEdits status=unsupported_agent`, 5*time.Second)
}

func TestAgentRefusingASettingKeepsTheAgentAndAnswers(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start([]string{"--model", "sonnet", "--effort-level", "high"},
		"TESTAGENT_SESSION_STATE="+settingsState, "TESTAGENT_SET_ERROR=session/set_config_option")
	s.waitReply(s.mention(s.ownerSK, "hi").ID)
	if got := s.setCalls(); len(got) != 2 {
		t.Fatalf("set calls %q, want model then effort tried", got)
	}
	s.waitLog(`status=failed error="cannot change that now"`, 5*time.Second)
	if n := strings.Count(s.logs.String(), "testagent: started pid"); n != 1 {
		t.Fatalf("agent started %d times; an agent error must not respawn it", n)
	}
}

func TestMalformedPermissionModeIsAStartupError(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	out := runBuzzACPEnv(t, s, "BUZZ_ACP_PERMISSION_MODE=read only")
	if !strings.Contains(out, "--permission-mode") || !strings.Contains(out, `"read only"`) {
		t.Fatalf("output does not name the flag and value:\n%s", out)
	}
}

// codexModes is the mode list codex-acp 2.6 advertises (legacy modes, so set through session/set_mode).
const codexModes = `{"modes":{"currentModeId":"agent","availableModes":[{"id":"read-only","name":"Read Only"},
 {"id":"workspace-write","name":"Workspace"},{"id":"agent","name":"Agent"},{"id":"agent-full-access","name":"Full Access"}]}}`

// urlModeID is a URL-style mode id (copilot's kind), offered through a config option of category mode.
const urlModeID = "https://agentclientprotocol.com/protocol/session-modes#autopilot"

func TestPermissionModeTakesAnyModeTheAgentAdvertises(t *testing.T) {
	t.Parallel()
	urlModes := `{"configOptions":[{"id":"mode","name":"Mode","category":"mode","type":"select","currentValue":"https://agentclientprotocol.com/protocol/session-modes#agent",
 "options":[{"value":"https://agentclientprotocol.com/protocol/session-modes#agent","name":"Agent"},{"value":"` + urlModeID + `","name":"Autopilot"}]}]}`
	for _, c := range []struct{ name, state, mode, want string }{
		{"codex read-only", codexModes, "read-only", "session/set_mode read-only"},
		{"codex agent-full-access", codexModes, "agent-full-access", "session/set_mode agent-full-access"},
		{"url-style id", urlModes, urlModeID, "session/set_config_option mode=" + urlModeID},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := newStack(t)
			s.start([]string{"--permission-mode", c.mode}, "TESTAGENT_SESSION_STATE="+c.state)
			s.waitReply(s.mention(s.ownerSK, "hi").ID)
			if got := s.setCalls(); len(got) != 1 || got[0] != c.want {
				t.Fatalf("set calls %q, want [%s]", got, c.want)
			}
		})
	}
}

func TestPermissionModeTheAgentDoesNotOfferIsAnErrorListingItsModes(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start([]string{"--permission-mode", "readonly"}, "TESTAGENT_SESSION_STATE="+codexModes)
	s.waitReply(s.mention(s.ownerSK, "hi").ID)
	s.waitLog(`level=ERROR msg="permission mode \"readonly\" is not a mode the agent offers (it offers agent, agent-full-access, read-only, workspace-write)`, 5*time.Second)
	if got := s.setCalls(); len(got) != 0 {
		t.Fatalf("set calls %q: a mode the agent does not offer was sent", got)
	}
}

func TestOwnerModelAndModeSwitchTheThreadsSessionAndAnswerWithRows(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start(nil, "TESTAGENT_SESSION_STATE="+settingsState)
	first := s.mention(s.ownerSK, "hi")
	s.waitReply(first.ID)
	s.waitLog("turn done", 20*time.Second)

	out := s.waitOutcome(s.mention(s.ownerSK, "!model sonnet", replyTo(first.ID)).ID)
	if out["type"] != "model_set" || out["status"] != "applied" || out["method"] != "session/set_config_option" || out["actor"] != s.ownerPK || out["target"] != s.agentPK {
		t.Fatalf("!model sonnet: %v", out)
	}
	out = s.waitOutcome(s.mention(s.ownerSK, "@bot !mode plan", replyTo(first.ID)).ID)
	if out["type"] != "mode_set" || out["status"] != "applied" || out["method"] != "session/set_mode" {
		t.Fatalf("!mode plan: %v", out)
	}
	out = s.waitOutcome(s.mention(s.ownerSK, "!model gpt-9", replyTo(first.ID)).ID)
	if out["status"] != "unsupported_value" || !strings.Contains(out["message"].(string), "opus, sonnet") {
		t.Fatalf("!model gpt-9: %v", out)
	}
	want := []string{"session/set_config_option model=sonnet", "session/set_mode plan"}
	if got := s.setCalls(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("set calls %q, want %q (an unknown model is never sent)", got, want)
	}
	if n := len(s.methods("session/prompt")); n != 1 {
		t.Fatalf("%d prompts: owner commands must not reach the agent as prompts", n)
	}

}

func TestOwnerModeInAThreadWithoutSessionAppliesWhenItOpens(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start(nil, "TESTAGENT_SESSION_STATE="+settingsState)
	root := s.mention(s.ownerSK, "first thread")
	s.waitReply(root.ID)
	// A new top-level message starts its own thread: "!mode" there has no session yet.
	cmd := s.mention(s.ownerSK, "!mode plan")
	if out := s.waitOutcome(cmd.ID); out["status"] != "pending" {
		t.Fatalf("!mode in a thread without a session: %v", out)
	}
	s.mention(s.ownerSK, "go", replyTo(cmd.ID))
	s.waitRecorded("session/set_mode", 1)
	if got := s.setCalls(); len(got) != 1 || got[0] != "session/set_mode plan" {
		t.Fatalf("set calls %q", got)
	}
}

func TestOwnerModelOnAnAgentWithoutModelsSaysSo(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start(nil)
	first := s.mention(s.ownerSK, "hi")
	s.waitReply(first.ID)
	s.waitLog("turn done", 20*time.Second)
	out := s.waitOutcome(s.mention(s.ownerSK, "!model sonnet", replyTo(first.ID)).ID)
	if out["status"] != "unsupported_agent" || out["message"] != "the agent offers no way to change its model" {
		t.Fatalf("outcome %v", out)
	}
}
