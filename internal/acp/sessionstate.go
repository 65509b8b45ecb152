package acp

import (
	"context"
	"encoding/json"
	"errors"
)

// SessionState is what session/new, session/load and session/resume report about a session's
// settings: the stable config options and the older modes and unstable models lists. Each part
// is nil when the agent did not send it. Entries the harness cannot read are skipped, never fatal.
type SessionState struct {
	ConfigOptions []ConfigOption
	Modes         *ModeState
	Models        *ModelState
}

// ConfigOption is one configOptions entry. Options holds the selectable values, option groups
// flattened (ACP nests values one level under {group, name, options}).
type ConfigOption struct {
	ID           string        `json:"id"`
	Name         string        `json:"name"`
	Category     string        `json:"category,omitempty"`
	Type         string        `json:"type,omitempty"`
	CurrentValue string        `json:"currentValue,omitempty"`
	Options      []ConfigValue `json:"options"`
}

// ConfigValue is one selectable value of a config option.
type ConfigValue struct {
	Value string `json:"value"`
	Name  string `json:"name"`
}

// Has reports whether v is one of the option's values.
func (o ConfigOption) Has(v string) bool {
	for _, x := range o.Options {
		if x.Value == v {
			return true
		}
	}
	return false
}

// ModeState is the legacy modes object.
type ModeState struct {
	CurrentModeID  string `json:"currentModeId"`
	AvailableModes []struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	} `json:"availableModes"`
}

// Has reports whether id is an available mode.
func (m *ModeState) Has(id string) bool {
	if m == nil {
		return false
	}
	for _, x := range m.AvailableModes {
		if x.ID == id {
			return true
		}
	}
	return false
}

// ModelState is the unstable models object.
type ModelState struct {
	CurrentModelID  string `json:"currentModelId"`
	AvailableModels []struct {
		ModelID     string `json:"modelId"`
		Name        string `json:"name"`
		Description string `json:"description,omitempty"`
	} `json:"availableModels"`
}

// Has reports whether id is an available model.
func (m *ModelState) Has(id string) bool {
	if m == nil {
		return false
	}
	for _, x := range m.AvailableModels {
		if x.ModelID == id {
			return true
		}
	}
	return false
}

// ParseSessionState reads the settings part of a session result (any JSON; garbage gives an
// empty state).
func ParseSessionState(raw json.RawMessage) *SessionState {
	top := object(raw)
	st := &SessionState{ConfigOptions: ParseConfigOptions(top["configOptions"])}
	if present(top["modes"]) {
		var m ModeState
		if json.Unmarshal(top["modes"], &m) == nil {
			st.Modes = &m
		}
	}
	if present(top["models"]) {
		var m ModelState
		if json.Unmarshal(top["models"], &m) == nil {
			st.Models = &m
		}
	}
	return st
}

// ParseConfigOptions reads a configOptions array. The id is "id", or "configId" as some agents
// spell it; an entry without either is dropped.
func ParseConfigOptions(raw json.RawMessage) []ConfigOption {
	var entries []map[string]json.RawMessage
	if json.Unmarshal(raw, &entries) != nil {
		return nil
	}
	var out []ConfigOption
	for _, e := range entries {
		o := ConfigOption{ID: str(e["id"]), Name: str(e["name"]), Category: str(e["category"]), Type: str(e["type"]), CurrentValue: str(e["currentValue"])}
		if o.ID == "" {
			o.ID = str(e["configId"])
		}
		if o.ID == "" {
			continue
		}
		var opts []map[string]json.RawMessage
		_ = json.Unmarshal(e["options"], &opts)
		for _, v := range opts {
			if present(v["options"]) { // a group
				var inner []ConfigValue
				_ = json.Unmarshal(v["options"], &inner)
				o.Options = append(o.Options, inner...)
				continue
			}
			o.Options = append(o.Options, ConfigValue{Value: str(v["value"]), Name: str(v["name"])})
		}
		out = append(out, o)
	}
	return out
}

// NewSessionState creates a session (session/new) and returns its id and reported settings.
func (c *Client) NewSessionState(ctx context.Context, p SessionParams) (string, *SessionState, error) {
	w, err := p.wire(false)
	if err != nil {
		return "", nil, err
	}
	var raw json.RawMessage
	if err := c.Call(ctx, "session/new", w, &raw); err != nil {
		return "", nil, err
	}
	id := str(object(raw)["sessionId"])
	if id == "" {
		return "", nil, errors.New("acp: session/new result has no sessionId")
	}
	return id, ParseSessionState(raw), nil
}
