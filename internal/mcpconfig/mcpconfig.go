// Package mcpconfig parses the MCP servers document given to buzz-acp with --mcp-servers: a
// versioned JSON list of stdio MCP servers that every agent session is opened with.
//
//	{"version": 1,
//	 "servers": [{"transport": "stdio", "name": "files", "command": "/usr/bin/files-mcp",
//	              "args": ["--root", "/srv"], "env": {"LOG_LEVEL": "warn"}}]}
//
// The shape follows upstream's versioned MCP document. transport may be omitted (stdio is the only
// one); args and env may be omitted. Every error names the field at fault, e.g.
// "servers[2].name: ...", so a bad document is a one-line startup error.
package mcpconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
)

const (
	// Version is the only document version understood.
	Version = 1
	// MaxServers bounds how many servers one document may list.
	MaxServers = 16
	// MaxBytes bounds the document's size.
	MaxBytes = 64 << 10
)

// Protected are environment keys a server entry may not set: they carry the agent's identity and
// credentials, which only the harness hands out (to --mcp-command), never a config file.
var Protected = []string{
	"BUZZ_PRIVATE_KEY", "BUZZ_AUTH_TAG", "BUZZ_API_TOKEN",
	"BUZZ_ACP_PRIVATE_KEY", "BUZZ_ACP_API_TOKEN",
	"NOSTR_PRIVATE_KEY", "NOSTR_SECRET_KEY", "NSEC",
}

// Server is one stdio MCP server.
type Server struct {
	Name    string
	Command string
	Args    []string          // never nil after Parse
	Env     map[string]string // never nil after Parse
}

// EnvNames returns the server's environment keys sorted, so what is sent is deterministic.
func (s Server) EnvNames() []string {
	names := make([]string, 0, len(s.Env))
	for k := range s.Env {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// CheckName reports whether name is a valid server name: [A-Za-z0-9_-]{1,128} without "__"
// (which tool-name prefixes use as their separator).
func CheckName(name string) error {
	switch {
	case name == "":
		return errors.New("is empty")
	case !nameRE.MatchString(name):
		return fmt.Errorf("%q must be 1–128 of A-Z a-z 0-9 _ -", name)
	case strings.Contains(name, "__"):
		return fmt.Errorf("%q must not contain \"__\"", name)
	}
	return nil
}

type document struct {
	Version *int              `json:"version"`
	Servers []json.RawMessage `json:"servers"`
}

type entry struct {
	Transport *string         `json:"transport"`
	Name      *string         `json:"name"`
	Command   *string         `json:"command"`
	Args      []string        `json:"args"`
	Env       json.RawMessage `json:"env"`
}

// Load reads and parses the document at path, refusing files larger than MaxBytes.
func Load(path string) ([]Server, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxBytes+1))
	if err != nil {
		return nil, err
	}
	return Parse(data)
}

// Parse validates a document and returns its servers in document order.
func Parse(data []byte) ([]Server, error) {
	if len(data) > MaxBytes {
		return nil, fmt.Errorf("document is larger than %d bytes", MaxBytes)
	}
	var doc document
	if err := strictDecode(data, &doc); err != nil {
		return nil, fmt.Errorf("document: %w", err)
	}
	switch {
	case doc.Version == nil:
		return nil, errors.New("version: missing (want 1)")
	case *doc.Version != Version:
		return nil, fmt.Errorf("version: %d is not supported (want 1)", *doc.Version)
	case doc.Servers == nil:
		return nil, errors.New("servers: missing (want an array)")
	case len(doc.Servers) > MaxServers:
		return nil, fmt.Errorf("servers: %d servers, at most %d allowed", len(doc.Servers), MaxServers)
	}
	out := make([]Server, 0, len(doc.Servers))
	seen := map[string]int{}
	for i, raw := range doc.Servers {
		s, err := parseServer(raw)
		if err != nil {
			return nil, fmt.Errorf("servers[%d].%w", i, err)
		}
		if j, dup := seen[s.Name]; dup {
			return nil, fmt.Errorf("servers[%d].name: %q is already used by servers[%d]", i, s.Name, j)
		}
		seen[s.Name] = i
		out = append(out, s)
	}
	return out, nil
}

// fieldError's text starts with the field name; Parse prefixes "servers[i].".
func fieldError(field, format string, a ...any) error {
	return fmt.Errorf("%s: %s", field, fmt.Sprintf(format, a...))
}

func parseServer(raw json.RawMessage) (Server, error) {
	var e entry
	if err := strictDecode(raw, &e); err != nil {
		// A non-object entry or an unknown field: name the entry itself.
		return Server{}, fieldError("entry", "%v", err)
	}
	if e.Transport != nil && *e.Transport != "stdio" {
		return Server{}, fieldError("transport", "%q is not supported (only \"stdio\")", *e.Transport)
	}
	if e.Name == nil {
		return Server{}, fieldError("name", "missing")
	}
	if err := CheckName(*e.Name); err != nil {
		return Server{}, fieldError("name", "%v", err)
	}
	s := Server{Name: *e.Name, Args: e.Args, Env: map[string]string{}}
	if e.Command == nil || strings.TrimSpace(*e.Command) == "" {
		return Server{}, fieldError("command", "missing or empty")
	}
	if strings.ContainsRune(*e.Command, 0) {
		return Server{}, fieldError("command", "contains a NUL byte")
	}
	s.Command = *e.Command
	if s.Args == nil {
		s.Args = []string{}
	}
	for i, a := range s.Args {
		if strings.ContainsRune(a, 0) {
			return Server{}, fieldError(fmt.Sprintf("args[%d]", i), "contains a NUL byte")
		}
	}
	if len(e.Env) > 0 && !bytes.Equal(bytes.TrimSpace(e.Env), []byte("null")) {
		if err := json.Unmarshal(e.Env, &s.Env); err != nil {
			return Server{}, fieldError("env", "must be an object of strings")
		}
	}
	for _, k := range s.EnvNames() {
		if err := checkEnvKey(k); err != nil {
			return Server{}, fieldError("env."+k, "%v", err)
		}
		if strings.ContainsRune(s.Env[k], 0) {
			return Server{}, fieldError("env."+k, "value contains a NUL byte")
		}
	}
	return s, nil
}

func checkEnvKey(k string) error {
	if k == "" || strings.ContainsAny(k, "=\x00") {
		return errors.New("is not a valid environment variable name")
	}
	for _, p := range Protected {
		// Case-insensitive: a lower-case spelling is refused too rather than reasoned about.
		if strings.EqualFold(k, p) {
			return errors.New("is protected: the agent's keys are never set from a config file")
		}
	}
	return nil
}

// strictDecode decodes one JSON value, refusing unknown fields and trailing data.
func strictDecode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}
