package stack

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/buzz-harness/buzz/internal/atomicfile"
	"github.com/buzz-harness/buzz/internal/protocol"
)

// The owner dir keeps what makes someone the stack's owner: its key and the running stack's
// record (whose console URL carries the console token). It is kept apart from the data dir,
// which is the agent's (its key, its state, the `buzz` it runs), so that the agent's shell,
// started in the working directory that holds ./.buzz, does not find the owner's secrets there.
const (
	ownerKeyFile = "owner.key"
	agentKeyFile = "agent.key"
)

// DefaultOwnerDir is where the owner dir of dataDir lives unless --owner-dir says otherwise:
// <user config dir>/buzz/owner/<name>-<hash>, the name made of the data dir's parent and base
// (readable: "myproject-buzz" for myproject/.buzz) and the hash of its real absolute path (one
// owner dir per data dir).
func DefaultOwnerDir(dataDir string) (string, error) {
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return "", err
	}
	cfg, err := os.UserConfigDir()
	if err != nil {
		return "", err
	}
	real := resolve(abs)
	sum := sha256.Sum256([]byte(real))
	name := safeName(filepath.Base(filepath.Dir(real))) + "-" + safeName(filepath.Base(real))
	return filepath.Join(cfg, "buzz", "owner", name+"-"+hex.EncodeToString(sum[:6])), nil
}

// safeName keeps a path element readable as a directory name: no leading dots (nothing hidden),
// nothing a shell would need quoted, at most 32 bytes.
func safeName(s string) string {
	s = strings.TrimLeft(s, ".")
	s = strings.Map(func(r rune) rune {
		if r < 128 && (r == '-' || r == '_' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return r
		}
		return '_'
	}, s)
	if len(s) > 32 {
		s = s[:32]
	}
	if s == "" {
		s = "root"
	}
	return s
}

// resolve is p with symlinks resolved as far as it exists (the rest appended), so that two
// spellings of one place compare equal.
func resolve(p string) string {
	p = filepath.Clean(p)
	var rest []string
	for {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(append([]string{r}, rest...)...)
		}
		parent := filepath.Dir(p)
		if parent == p {
			return filepath.Join(append([]string{p}, rest...)...)
		}
		rest = append([]string{filepath.Base(p)}, rest...)
		p = parent
	}
}

// within reports whether p is dir or lies under it.
func within(p, dir string) bool {
	rel, err := filepath.Rel(resolve(dir), resolve(p))
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// checkOwnerDir refuses an owner dir the agent would come across: one inside (or holding) the
// data dir, or the agent's working directory (agentCwd, "" to skip). A same-user agent can still
// read it on purpose (docs/security.md); this keeps it out of what the agent lists and greps.
func checkOwnerDir(ownerDir, dataDir, agentCwd string) error {
	places := []struct{ what, path string }{{"the data dir", dataDir}}
	if agentCwd != "" {
		if abs, err := filepath.Abs(agentCwd); err == nil {
			places = append(places, struct{ what, path string }{"the agent's working directory", abs})
		}
	}
	for _, p := range places {
		switch {
		case within(ownerDir, p.path):
			return fail("owner dir %s is inside %s %s, where the agent could read the owner key: pass --owner-dir outside it (or start buzz up from another directory)", ownerDir, p.what, p.path)
		case within(p.path, ownerDir):
			return fail("%s %s is inside the owner dir %s, where the agent could read the owner key: pass --owner-dir elsewhere", p.what, p.path, ownerDir)
		}
	}
	return nil
}

// loadOwner loads (or on first use creates) the owner's key in ownerDir. It moves an owner.key
// left in the data dir by an older buzz up there first, and it never mints a new owner for a
// data dir that already has one (stack.json names it): that would silently strand #general.
// The owner and the dir are recorded in stack.json, for that check and its message.
func loadOwner(dataDir, ownerDir string, out io.Writer) (Identity, error) {
	st, err := readState(dataDir)
	if err != nil {
		return Identity{}, fail("data dir %s: %v", dataDir, err)
	}
	path := filepath.Join(ownerDir, ownerKeyFile)
	if err := migrateOwnerKey(dataDir, ownerDir, out); err != nil {
		return Identity{}, err
	}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) && st.Owner != "" {
		hint := "pass --owner-dir with the directory that holds it"
		if st.OwnerDir != "" && st.OwnerDir != ownerDir {
			hint = "it was in " + st.OwnerDir + ": pass --owner-dir " + shellQuote(st.OwnerDir)
		}
		return Identity{}, fail("owner key not found: looked for %s, the key of %s, owner of data dir %s; %s", path, st.Owner, dataDir, hint)
	}
	if err := privateDir(ownerDir); err != nil {
		return Identity{}, err
	}
	id, err := loadOrCreateKey(path)
	if err != nil {
		return Identity{}, err
	}
	npub := protocol.Npub(id.Pubkey)
	if st.Owner != "" && st.Owner != npub {
		return Identity{}, fail("owner key %s is %s, but data dir %s belongs to %s: pass --owner-dir with that owner's directory", path, npub, dataDir, st.Owner)
	}
	if st.Owner != npub || st.OwnerDir != ownerDir {
		st.Owner, st.OwnerDir = npub, ownerDir
		if err := writeState(dataDir, st); err != nil {
			return Identity{}, fail("data dir %s: %v", dataDir, err)
		}
	}
	return id, nil
}

// migrateOwnerKey moves <dataDir>/owner.key (where buzz up kept it before the owner dir
// existed) into ownerDir, saying so once. An owner dir that already holds the same key just
// loses the old copy; a different one is refused rather than guessed at.
func migrateOwnerKey(dataDir, ownerDir string, out io.Writer) error {
	old, path := filepath.Join(dataDir, ownerKeyFile), filepath.Join(ownerDir, ownerKeyFile)
	if resolve(old) == resolve(path) {
		return nil // not a move (checkOwnerDir refuses this, but a copy onto itself would lose the key)
	}
	b, err := os.ReadFile(old)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fail("cannot read key file %s: %v", old, unwrapPath(err))
	}
	if _, err := protocol.ParseSecretKey(strings.TrimSpace(string(b))); err != nil {
		return fail("key file %s: %v", old, err)
	}
	cur, err := os.ReadFile(path)
	switch {
	case err == nil:
		if strings.TrimSpace(string(cur)) != strings.TrimSpace(string(b)) {
			return fail("two different owner keys, %s (the old place) and %s: delete the one that is not the owner's", old, path)
		}
	case errors.Is(err, os.ErrNotExist):
		if err := privateDir(ownerDir); err != nil {
			return err
		}
		if err := atomicfile.WriteFile(path, b, 0o600); err != nil {
			return fail("cannot move the owner key to %s: %v", path, unwrapPath(err))
		}
	default:
		return fail("cannot read key file %s: %v", path, unwrapPath(err))
	}
	if err := os.Remove(old); err != nil {
		return fail("owner key copied to %s, but the old %s cannot be removed: %v", path, old, unwrapPath(err))
	}
	fmt.Fprintf(out, "buzz up: moved the owner key from %s to %s, out of the agent's working directory\n", old, path)
	return nil
}

// privateDir creates dir (and missing parents) 0700, or tightens an existing one others can
// enter, as key files are tightened rather than trusted.
func privateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fail("cannot create owner dir %s: %v", dir, unwrapPath(err))
	}
	st, err := os.Stat(dir)
	if err != nil {
		return fail("owner dir %s: %v", dir, unwrapPath(err))
	}
	if !st.IsDir() {
		return fail("owner dir %s is not a directory", dir)
	}
	if st.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fail("owner dir %s is open to others and cannot be fixed: %v", dir, unwrapPath(err))
		}
	}
	return nil
}

// missingTop is the topmost directory of dir that does not exist yet ("" if dir exists): what
// creating dir would add, and what a failed first start removes again.
func missingTop(dir string) string {
	if _, err := os.Stat(dir); err == nil {
		return ""
	}
	top := dir
	for p := filepath.Dir(dir); p != top; p = filepath.Dir(p) {
		if _, err := os.Stat(p); err == nil {
			break
		}
		top = p
	}
	return top
}
