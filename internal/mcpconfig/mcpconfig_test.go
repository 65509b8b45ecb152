package mcpconfig

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseAcceptsValidDocuments(t *testing.T) {
	cases := []struct {
		name string
		doc  string
		want []Server
	}{
		{"empty list", `{"version":1,"servers":[]}`, []Server{}},
		{"full entry", `{"version":1,"servers":[{"transport":"stdio","name":"files","command":"/bin/files","args":["-v"],"env":{"B":"2","A":"1"}}]}`,
			[]Server{{Name: "files", Command: "/bin/files", Args: []string{"-v"}, Env: map[string]string{"A": "1", "B": "2"}}}},
		{"transport, args and env omitted", `{"version":1,"servers":[{"name":"a-b_c","command":"x"}]}`,
			[]Server{{Name: "a-b_c", Command: "x", Args: []string{}, Env: map[string]string{}}}},
		{"null args and env", `{"version":1,"servers":[{"name":"a","command":"x","args":null,"env":null}]}`,
			[]Server{{Name: "a", Command: "x", Args: []string{}, Env: map[string]string{}}}},
		{"order kept", `{"version":1,"servers":[{"name":"z","command":"x"},{"name":"a","command":"y"}]}`,
			[]Server{{Name: "z", Command: "x", Args: []string{}, Env: map[string]string{}}, {Name: "a", Command: "y", Args: []string{}, Env: map[string]string{}}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Parse([]byte(c.doc))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestParseRefusesBadDocumentsNamingTheField(t *testing.T) {
	server := func(body string) string { return `{"version":1,"servers":[{"name":"ok","command":"x"},` + body + `]}` }
	many := make([]string, MaxServers+1)
	for i := range many {
		many[i] = fmt.Sprintf(`{"name":"s%d","command":"x"}`, i)
	}
	cases := []struct{ name, doc, want string }{
		{"not json", `{`, "document:"},
		{"trailing data", `{"version":1,"servers":[]} {}`, "document: trailing data"},
		{"unknown top field", `{"version":1,"servers":[],"extra":1}`, `document: json: unknown field "extra"`},
		{"no version", `{"servers":[]}`, "version: missing"},
		{"version 2", `{"version":2,"servers":[]}`, "version: 2 is not supported"},
		{"no servers", `{"version":1}`, "servers: missing"},
		{"too many servers", `{"version":1,"servers":[` + strings.Join(many, ",") + `]}`, "servers: 17 servers, at most 16"},
		{"entry not an object", server(`"x"`), "servers[1].entry:"},
		{"unknown entry field", server(`{"name":"a","command":"x","cwd":"/"}`), `servers[1].entry: json: unknown field "cwd"`},
		{"http transport", server(`{"transport":"http","name":"a","command":"x"}`), `servers[1].transport: "http" is not supported`},
		{"missing name", server(`{"command":"x"}`), "servers[1].name: missing"},
		{"empty name", server(`{"name":"","command":"x"}`), "servers[1].name: is empty"},
		{"name with space", server(`{"name":"a b","command":"x"}`), `servers[1].name: "a b" must be`},
		{"name too long", server(`{"name":"` + strings.Repeat("a", 129) + `","command":"x"}`), "servers[1].name:"},
		{"name with double underscore", server(`{"name":"a__b","command":"x"}`), `servers[1].name: "a__b" must not contain "__"`},
		{"duplicate name", server(`{"name":"ok","command":"y"}`), `servers[1].name: "ok" is already used by servers[0]`},
		{"missing command", server(`{"name":"a"}`), "servers[1].command: missing or empty"},
		{"blank command", server(`{"name":"a","command":"  "}`), "servers[1].command: missing or empty"},
		{"NUL in arg", server(`{"name":"a","command":"x","args":["ok","a\u0000b"]}`), "servers[1].args[1]: contains a NUL byte"},
		{"env not object", server(`{"name":"a","command":"x","env":["A=1"]}`), "servers[1].env: must be an object of strings"},
		{"env number value", server(`{"name":"a","command":"x","env":{"A":1}}`), "servers[1].env: must be an object of strings"},
		{"env key with =", server(`{"name":"a","command":"x","env":{"A=B":"1"}}`), "servers[1].env.A=B: is not a valid"},
		{"protected private key", server(`{"name":"a","command":"x","env":{"BUZZ_PRIVATE_KEY":"nsec1..."}}`), "servers[1].env.BUZZ_PRIVATE_KEY: is protected"},
		{"protected auth tag", server(`{"name":"a","command":"x","env":{"BUZZ_AUTH_TAG":"[]"}}`), "servers[1].env.BUZZ_AUTH_TAG: is protected"},
		{"protected nostr key", server(`{"name":"a","command":"x","env":{"NOSTR_PRIVATE_KEY":"x"}}`), "servers[1].env.NOSTR_PRIVATE_KEY: is protected"},
		{"protected key lower case", server(`{"name":"a","command":"x","env":{"buzz_acp_private_key":"x"}}`), "servers[1].env.buzz_acp_private_key: is protected"},
		{"too large", `{"version":1,"servers":[],"pad":"` + strings.Repeat("x", MaxBytes) + `"}`, "larger than 65536 bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.doc))
			if err == nil {
				t.Fatalf("accepted; want error containing %q", c.want)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q, want it to contain %q", err, c.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q spans lines", err)
			}
		})
	}
}

func TestLoadRefusesOversizedFileWithoutReadingItAll(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mcp.json")
	if err := os.WriteFile(path, []byte(`{"version":1,"servers":[]}`+strings.Repeat(" ", 2*MaxBytes)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("err = %v", err)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.json")); err == nil {
		t.Fatal("a missing file was accepted")
	}
}

// FuzzParse: Parse never panics, and whatever it accepts satisfies the document's invariants.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"version":1,"servers":[{"transport":"stdio","name":"a","command":"x","args":["1"],"env":{"K":"v"}}]}`))
	f.Add([]byte(`{"version":1,"servers":[{"name":"a","command":"x"},{"name":"a","command":"y"}]}`))
	f.Add([]byte(`{"version":1,"servers":[{"name":"a","command":"x","env":{"BUZZ_PRIVATE_KEY":"k"}}]}`))
	f.Add([]byte(`{"version":1,"servers":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		servers, err := Parse(data)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		if len(servers) > MaxServers {
			t.Fatalf("%d servers accepted", len(servers))
		}
		seen := map[string]bool{}
		for _, s := range servers {
			if CheckName(s.Name) != nil || seen[s.Name] {
				t.Fatalf("bad or duplicate name %q accepted", s.Name)
			}
			seen[s.Name] = true
			if strings.TrimSpace(s.Command) == "" || s.Args == nil || s.Env == nil {
				t.Fatalf("incomplete server accepted: %+v", s)
			}
			for k := range s.Env {
				if checkEnvKey(k) != nil {
					t.Fatalf("env key %q accepted", k)
				}
			}
		}
	})
}
