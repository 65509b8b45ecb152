package stack_test

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/testbin"
)

// The hostile party here is the stack's own agent, turned by a prompt injection: whatever its
// shell finds where it is started, or in its environment, it can use. With the defaults (./.buzz
// in the directory buzz up runs in, the agent started there) neither the owner key nor the
// console token may be in that tree or in the agent's environment, even when the user started
// buzz up from a shell that holds the owner's exports (eval "$(buzz up --print-env)").
func TestHostileAgentFindsNeitherTheOwnerKeyNorTheConsoleTokenInItsDirectoryOrEnvironment(t *testing.T) {
	t.Parallel()
	bin := testbin.Dir(t, "cmd/buzz")
	cwd, xdg := t.TempDir(), "XDG_CONFIG_HOME="+t.TempDir()
	pe := exec.Command(filepath.Join(bin, "buzz"), "up", "--print-env")
	pe.Dir, pe.Env = cwd, append(cleanEnv(), xdg)
	exports, err := pe.Output()
	if err != nil {
		t.Fatalf("buzz up --print-env: %v", err)
	}
	env := []string{xdg}
	for _, l := range strings.Split(strings.TrimSpace(string(exports)), "\n") {
		env = append(env, strings.TrimPrefix(l, "export "))
	}
	up := startUpIn(t, cwd, env, bin, "--relay-addr", testbin.FreeAddr(t), "--console-addr", "127.0.0.1:0")
	dataDir := filepath.Join(cwd, ".buzz")
	agentSK := secretOf(t, filepath.Join(dataDir, "agent.key"))
	agentPK, _ := protocol.PublicKey(agentSK)
	// A round trip, so the agent runs and has written what it writes.
	id := send(t, bin, up.banner.relayHTTP, up.banner.ownerKey, up.banner.channel, "@"+up.banner.agentName+" hello")
	waitReply(t, bin, up.banner.relayHTTP, up.banner.ownerKey, up.banner.channel, agentPK, id)

	ownerSK := secretOf(t, up.banner.ownerKey)
	_, token, _ := strings.Cut(up.banner.console, "token=")
	if token == "" {
		t.Fatalf("console URL %s has no token", up.banner.console)
	}
	secrets := map[string]string{"the owner key (hex)": ownerSK, "the owner key (nsec)": protocol.Nsec(ownerSK), "the console token": token}
	leaks := func(where string, b []byte) {
		for what, s := range secrets {
			if bytes.Contains(b, []byte(s)) {
				t.Errorf("%s holds %s", where, what)
			}
		}
	}

	// The agent's tree: everything under the directory it starts in, data dir included.
	if err := filepath.WalkDir(cwd, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		leaks(p, b)
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// The agent's environment: its own key, nothing of the owner's.
	kids := testbin.Children(up.cmd.Process.Pid)
	if len(kids) == 0 {
		t.Fatal("buzz up has no child process; the agent should run as its child")
	}
	for _, pid := range kids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
		if err != nil {
			t.Fatal(err)
		}
		leaks("the agent's environment (pid "+strconv.Itoa(pid)+")", b)
		if !bytes.Contains(b, []byte("\x00BUZZ_PRIVATE_KEY="+protocol.Nsec(agentSK)+"\x00")) {
			t.Errorf("the agent's environment lacks its own key")
		}
	}

	// Where they are instead: 0600 files in a 0700 directory outside the agent's tree.
	ownerDir := filepath.Dir(up.banner.ownerKey)
	if rel, _ := filepath.Rel(cwd, ownerDir); !strings.HasPrefix(rel, "..") {
		t.Fatalf("owner dir %s is inside the agent's working directory %s", ownerDir, cwd)
	}
	if st, err := os.Stat(ownerDir); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("owner dir %s: mode %v (err %v), want 0700", ownerDir, st.Mode().Perm(), err)
	}
	ents, _ := os.ReadDir(ownerDir)
	for _, e := range ents {
		if info, err := e.Info(); err != nil || !info.Mode().IsRegular() || info.Mode().Perm() != 0o600 {
			t.Errorf("owner dir entry %s: %v (err %v), want a 0600 file", e.Name(), info.Mode(), err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(ownerDir, "running.json")); err != nil || !bytes.Contains(b, []byte(token)) {
		t.Errorf("owner dir's running.json lacks the console URL (err %v)", err)
	}
	up.stop(t)
}
