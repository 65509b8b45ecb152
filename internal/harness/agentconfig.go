package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode"

	"github.com/buzz-harness/buzz/internal/acp"
)

// Agent settings (--model, --permission-mode, --effort-level and the owner's !model / !mode) are
// applied right after a session is opened, in upstream's order: model, permission mode, effort.

// settingTimeout bounds each set_* call; running out counts as a transport failure.
const settingTimeout = 5 * time.Second

// Setting names, as rows and logs call them.
const (
	settingModel  = "model"
	settingMode   = "mode"
	settingEffort = "effort"
)

// agentSettings are the values wanted for a session; "" leaves the agent's own choice.
type agentSettings struct {
	Model, Mode, Effort string
}

// permissionModes maps every spelling of Claude's mode names (lower case, without - and _) to
// the wire string: the aliases upstream's --permission-mode takes.
var permissionModes = map[string]string{
	"default":           "default",
	"auto":              "auto",
	"acceptedits":       "acceptEdits",
	"bypasspermissions": "bypassPermissions",
	"dontask":           "dontAsk",
	"plan":              "plan",
}

// maxModeID bounds a mode id typed by hand; real ones (URL-style included) are far shorter.
const maxModeID = 256

// PermissionModeWire turns a --permission-mode (or !mode) value into the mode id sent to the
// agent. Claude's names are taken in kebab or camel case (accept-edits → acceptEdits); any other
// id goes as typed (codex-acp's read-only, URL-style ids), since only the agent knows its modes:
// each session checks the value against the modes the agent advertised for it. Only a value
// that cannot be a mode id (empty, spaces, control characters, over 256 bytes) is refused.
func PermissionModeWire(s string) (string, error) {
	s = strings.TrimSpace(s)
	k := strings.ToLower(strings.NewReplacer("-", "", "_", "").Replace(s))
	if w, ok := permissionModes[k]; ok {
		return w, nil
	}
	if s == "" || len(s) > maxModeID || strings.ContainsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) {
		return "", fmt.Errorf("must be a mode id the agent advertises (or default, auto, acceptEdits, bypassPermissions, dontAsk, plan; kebab-case accepted), got %q", s)
	}
	return s, nil
}

// Outcome statuses of one setting.
const (
	settingApplied     = "applied"
	settingUnknown     = "unsupported_value" // the agent offers this setting, but not that value
	settingUnsupported = "unsupported_agent" // the agent advertises no way to change it
	settingFailed      = "failed"            // the agent refused the call
)

// settingResult says what became of one wanted setting.
type settingResult struct {
	Setting   string   `json:"setting"`
	Value     string   `json:"value"`
	Status    string   `json:"status"`
	Method    string   `json:"method,omitempty"`
	Error     string   `json:"error,omitempty"`
	Available []string `json:"available,omitempty"` // the values the agent offers, when it refused ours
}

// settingCall is the request that sets one value.
type settingCall struct {
	method string
	params map[string]any
}

// resolveSetting decides how to set a value on a session from what the agent advertised: a
// config option of the setting's category first, then the older mechanism (session/set_model,
// session/set_mode). ok is false when nothing advertised takes the value; res then says why.
func resolveSetting(st *acp.SessionState, sessionID, setting, value string) (call settingCall, res settingResult, ok bool) {
	res = settingResult{Setting: setting, Value: value}
	if st == nil {
		st = &acp.SessionState{}
	}
	category := map[string]string{settingModel: "model", settingMode: "mode", settingEffort: "thought_level"}[setting]
	var avail []string
	for _, o := range st.ConfigOptions {
		if o.Category != category || (setting == settingEffort && o.Type != "" && o.Type != "select") {
			continue
		}
		if o.Has(value) {
			res.Method = "session/set_config_option"
			return settingCall{res.Method, map[string]any{"sessionId": sessionID, "configId": o.ID, "value": value}}, res, true
		}
		for _, v := range o.Options {
			avail = append(avail, v.Value)
		}
	}
	switch {
	case setting == settingModel && st.Models.Has(value):
		res.Method = "session/set_model"
		return settingCall{res.Method, map[string]any{"sessionId": sessionID, "modelId": value}}, res, true
	case setting == settingMode && st.Modes.Has(value):
		res.Method = "session/set_mode"
		return settingCall{res.Method, map[string]any{"sessionId": sessionID, "modeId": value}}, res, true
	case setting == settingModel && st.Models != nil:
		for _, m := range st.Models.AvailableModels {
			avail = append(avail, m.ModelID)
		}
	case setting == settingMode && st.Modes != nil:
		for _, m := range st.Modes.AvailableModes {
			avail = append(avail, m.ID)
		}
	}
	res.Status = settingUnsupported
	if len(avail) > 0 {
		res.Status = settingUnknown
		res.Available = dedupe(avail)
	}
	return settingCall{}, res, false
}

func dedupe(xs []string) []string {
	seen := map[string]bool{}
	out := xs[:0:0]
	for _, x := range xs {
		if x != "" && !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	sort.Strings(out)
	return out
}

// caller is the part of an agent connection settings need.
type caller interface {
	Call(ctx context.Context, method string, params, result any) error
}

// applySetting sets one value if the agent advertised it. An application error (the agent
// answered with an error) is reported in the result; a transport error or the timeout is
// returned, so the caller respawns the agent. st is only read: a session's state is shared
// between the loop and its turn.
func applySetting(ctx context.Context, agent caller, st *acp.SessionState, sessionID, setting, value string) (settingResult, error) {
	res, _, err := applySettingState(ctx, agent, st, sessionID, setting, value)
	return res, err
}

// applySettingState is applySetting also returning the config options the agent answered a
// set_config_option with (nil otherwise).
func applySettingState(ctx context.Context, agent caller, st *acp.SessionState, sessionID, setting, value string) (settingResult, []acp.ConfigOption, error) {
	call, res, ok := resolveSetting(st, sessionID, setting, value)
	if !ok {
		return res, nil, nil
	}
	cctx, cancel := context.WithTimeout(ctx, settingTimeout)
	defer cancel()
	var raw json.RawMessage
	err := agent.Call(cctx, call.method, call.params, &raw)
	var rpc *acp.RPCError
	switch {
	case err == nil:
		res.Status = settingApplied
		return res, acp.ParseConfigOptions(object(raw)["configOptions"]), nil
	case errors.As(err, &rpc):
		res.Status, res.Error = settingFailed, rpc.Message
		return res, nil, nil
	default:
		return res, nil, fmt.Errorf("%s %s: %w", call.method, setting, err)
	}
}

// applySettings applies the wanted values in order: model, permission mode, effort. A
// set_config_option answer carries the full option list (a model may change the effort levels
// on offer), so later settings resolve against it.
func applySettings(ctx context.Context, agent caller, st *acp.SessionState, sessionID string, want agentSettings) ([]settingResult, error) {
	var out []settingResult
	cur := &acp.SessionState{}
	if st != nil {
		c := *st
		cur = &c
	}
	for _, s := range []struct{ name, value string }{{settingModel, want.Model}, {settingMode, want.Mode}, {settingEffort, want.Effort}} {
		if s.value == "" {
			continue
		}
		res, opts, err := applySettingState(ctx, agent, cur, sessionID, s.name, s.value)
		if err != nil {
			return out, err
		}
		if opts != nil {
			cur.ConfigOptions = opts
		}
		out = append(out, res)
	}
	return out, nil
}

func object(raw json.RawMessage) map[string]json.RawMessage {
	var m map[string]json.RawMessage
	_ = json.Unmarshal(raw, &m)
	return m
}

// set records an owner's choice of one setting (!model / !mode).
func (s *agentSettings) set(setting, value string) {
	switch setting {
	case settingModel:
		s.Model = value
	case settingMode:
		s.Mode = value
	}
}

// over is what a conversation's session is to be set to: base (the flags), overridden by the
// owner's choices in s.
func (s agentSettings) over(base agentSettings) agentSettings {
	if s.Model != "" {
		base.Model = s.Model
	}
	if s.Mode != "" {
		base.Mode = s.Mode
	}
	return base
}

// settings are the flags' values.
func (c *Config) settings() agentSettings {
	return agentSettings{Model: c.Model, Mode: c.PermissionMode, Effort: c.EffortLevel}
}

// applyOnOpen applies a freshly opened session's settings and logs what could not be applied.
func (o *sessionOpener) applyOnOpen(ctx context.Context, agent caller, want agentSettings, sess *convSession) error {
	if want == (agentSettings{}) {
		return nil
	}
	results, err := applySettings(ctx, agent, sess.state, sess.ID, want)
	for _, r := range results {
		if r.Status == settingApplied {
			o.log.Debug("agent setting applied", "setting", r.Setting, "value", r.Value, "method", r.Method, "session", sess.ID)
			continue
		}
		if r.Setting == settingMode && r.Status == settingUnknown {
			// A mode the agent does not have: a typo, or a mode of another agent. Say which it has.
			o.log.Error(fmt.Sprintf("permission mode %q is not a mode the agent offers (it offers %s); the session keeps the agent's default mode",
				r.Value, strings.Join(r.Available, ", ")), "setting", r.Setting, "value", r.Value, "status", r.Status,
				"available", strings.Join(r.Available, ","), "session", sess.ID)
			continue
		}
		o.log.Warn("agent setting not applied; keeping the agent's default", "setting", r.Setting, "value", r.Value,
			"status", r.Status, "error", r.Error, "available", strings.Join(r.Available, ","), "session", sess.ID)
	}
	return err
}
