package stack

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An owner dir the agent would come across (in or around its data dir or working directory,
// also through a symlink, also the default when buzz up runs in the home directory) is refused
// before anything is created.
func TestRunRefusesAnOwnerDirTheAgentWouldComeAcross(t *testing.T) {
	root := t.TempDir()
	proj := filepath.Join(root, "proj")
	data := filepath.Join(proj, ".buzz")
	if err := os.MkdirAll(proj, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(proj, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(proj, ".config")) // as in ~ with ~/.config
	for _, c := range []struct{ name, owner, want string }{
		{"inside the data dir", filepath.Join(data, "owner"), "is inside the data dir"},
		{"inside the working directory", filepath.Join(proj, "secrets"), "is inside the agent's working directory"},
		{"inside it through a symlink", filepath.Join(root, "link", "secrets"), "is inside the agent's working directory"},
		{"holding the data dir", root, "the data dir " + data + " is inside the owner dir"},
		{"the default, started in the home directory", "", "is inside the agent's working directory " + proj},
	} {
		err := Run(context.Background(), Config{DataDir: data, OwnerDir: c.owner, AgentCwd: proj, RelayAddr: "127.0.0.1:0", ConsoleAddr: "127.0.0.1:0"})
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "--owner-dir") {
			t.Errorf("%s: err = %v, want one containing %q and naming --owner-dir", c.name, err, c.want)
		}
		if _, err := os.Stat(data); !os.IsNotExist(err) {
			t.Fatalf("%s: the refused start made the data dir (%v)", c.name, err)
		}
	}
}
