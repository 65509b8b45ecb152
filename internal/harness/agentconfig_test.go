package harness

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/buzz-harness/buzz/internal/acp"
)

// claudeLikeState is shaped like claude-agent-acp 0.101's session/new result: config options for
// mode, model and effort (effort grouped) plus the legacy modes list.
const claudeLikeState = `{"sessionId":"s1",
 "modes":{"currentModeId":"auto","availableModes":[{"id":"default","name":"Default"},{"id":"plan","name":"Plan"},{"id":"dontAsk","name":"Don't ask"}]},
 "configOptions":[
  {"id":"mode","name":"Mode","category":"mode","type":"select","currentValue":"auto","options":[{"value":"auto","name":"Auto"},{"value":"default","name":"Default"},{"value":"plan","name":"Plan"}]},
  {"configId":"model","name":"Model","category":"model","type":"select","currentValue":"opus","options":[{"value":"opus","name":"Opus"},{"value":"sonnet","name":"Sonnet"}]},
  {"id":"effort","name":"Effort","category":"thought_level","type":"select","currentValue":"medium","options":[{"group":"g","name":"Levels","options":[{"value":"low","name":"Low"},{"value":"high","name":"High"}]}]}],
 "models":{"currentModelId":"opus","availableModels":[{"modelId":"opus","name":"Opus"},{"modelId":"haiku-legacy","name":"Haiku"}]}}`

func TestResolveSettingPrefersConfigOptionThenLegacyMethod(t *testing.T) {
	st := acp.ParseSessionState(json.RawMessage(claudeLikeState))
	cases := []struct {
		setting, value, method, key string
		wantID                      any
	}{
		{settingModel, "sonnet", "session/set_config_option", "configId", "model"}, // configId spelling read
		{settingModel, "haiku-legacy", "session/set_model", "modelId", "haiku-legacy"},
		{settingMode, "plan", "session/set_config_option", "configId", "mode"},
		{settingMode, "dontAsk", "session/set_mode", "modeId", "dontAsk"},
		{settingEffort, "high", "session/set_config_option", "configId", "effort"}, // inside a group
	}
	for _, c := range cases {
		call, res, ok := resolveSetting(st, "s1", c.setting, c.value)
		if !ok || call.method != c.method || call.params[c.key] != c.wantID || call.params["sessionId"] != "s1" || res.Method != c.method {
			t.Errorf("%s=%s: ok=%v call %+v", c.setting, c.value, ok, call)
		}
	}
}

func TestResolveSettingSaysWhyNot(t *testing.T) {
	st := acp.ParseSessionState(json.RawMessage(claudeLikeState))
	_, res, ok := resolveSetting(st, "s1", settingModel, "gpt-9")
	if ok || res.Status != settingUnknown || !reflect.DeepEqual(res.Available, []string{"haiku-legacy", "opus", "sonnet"}) {
		t.Fatalf("unknown model: ok=%v %+v", ok, res)
	}
	bare := acp.ParseSessionState(json.RawMessage(`{"sessionId":"s"}`))
	for _, setting := range []string{settingModel, settingMode, settingEffort} {
		if _, res, ok := resolveSetting(bare, "s", setting, "x"); ok || res.Status != settingUnsupported {
			t.Errorf("%s on an agent advertising nothing: ok=%v %+v", setting, ok, res)
		}
	}
}

func TestPermissionModeAcceptsKebabAndCamelCase(t *testing.T) {
	for in, want := range map[string]string{"accept-edits": "acceptEdits", "acceptEdits": "acceptEdits", "bypass-permissions": "bypassPermissions",
		"dont-ask": "dontAsk", "dontAsk": "dontAsk", "plan": "plan", "default": "default", "auto": "auto"} {
		if got, err := PermissionModeWire(in); err != nil || got != want {
			t.Errorf("%q → %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestPermissionModeTakesAnyOtherModeIDAsTyped(t *testing.T) {
	for _, id := range []string{"read-only", "workspace-write", "agent", "agent-full-access", "yolo",
		"https://agentclientprotocol.com/protocol/session-modes#autopilot"} {
		if got, err := PermissionModeWire(" " + id + " "); err != nil || got != id {
			t.Errorf("%q → %q, %v; want it as typed", id, got, err)
		}
	}
	for _, bad := range []string{"", "  ", "read only", "pl\nan", "a\x00b", strings.Repeat("m", 257)} {
		if _, err := PermissionModeWire(bad); err == nil || !strings.Contains(err.Error(), "mode id the agent advertises") {
			t.Errorf("%q accepted (err %v)", bad, err)
		}
	}
}

// fakeAgent answers set_* calls with a fixed error per method and records the calls.
type fakeAgent struct {
	errs  map[string]error
	calls []string
}

func (f *fakeAgent) Call(_ context.Context, method string, params, result any) error {
	f.calls = append(f.calls, method)
	if err := f.errs[method]; err != nil {
		return err
	}
	*result.(*json.RawMessage) = json.RawMessage(`{}`)
	return nil
}

func TestApplySettingsIgnoresAgentErrorsButReturnsTransportErrors(t *testing.T) {
	st := acp.ParseSessionState(json.RawMessage(claudeLikeState))
	want := agentSettings{Model: "haiku-legacy", Mode: "plan", Effort: "high"}

	refusing := &fakeAgent{errs: map[string]error{"session/set_model": acp.NewRPCError(acp.CodeInternal, "no", nil)}}
	res, err := applySettings(context.Background(), refusing, st, "s1", want)
	if err != nil || len(res) != 3 || res[0].Status != settingFailed || res[1].Status != settingApplied || res[2].Status != settingApplied {
		t.Fatalf("agent error: err %v results %+v", err, res)
	}
	if !reflect.DeepEqual(refusing.calls, []string{"session/set_model", "session/set_config_option", "session/set_config_option"}) {
		t.Fatalf("calls %v: want model, mode, effort in that order", refusing.calls)
	}

	gone := &fakeAgent{errs: map[string]error{"session/set_model": context.DeadlineExceeded}}
	if _, err := applySettings(context.Background(), gone, st, "s1", want); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("timeout: err %v, want it returned so the agent is respawned", err)
	}
	if len(gone.calls) != 1 {
		t.Fatalf("calls after a transport error: %v", gone.calls)
	}
}
