package stack

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
)

// Identity is one key pair kept in a key file.
type Identity struct {
	SecretKey string // hex
	Pubkey    string // hex
	KeyFile   string // absolute path of the 0600 key file
}

// Identities are the stack's two people: its owner (the user) and its agent.
type Identities struct {
	Owner, Agent Identity
}

// LoadIdentities reads owner.key from ownerDir and agent.key from dataDir, creating either on
// first use (the owner only for a data dir that has none yet: see loadOwner, which also moves an
// older data dir's owner.key to ownerDir, saying so on out). Keys are stored as nsec in files only
// the user can read; a key file others can read is tightened rather than trusted silently.
func LoadIdentities(dataDir, ownerDir string, out io.Writer) (Identities, error) {
	owner, err := loadOwner(dataDir, ownerDir, out)
	if err != nil {
		return Identities{}, err
	}
	agent, err := loadOrCreateKey(filepath.Join(dataDir, agentKeyFile))
	if err != nil {
		return Identities{}, err
	}
	return Identities{Owner: owner, Agent: agent}, nil
}

func loadOrCreateKey(path string) (Identity, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		sk := nostr.GeneratePrivateKey()
		f, cerr := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(cerr, os.ErrExist) {
			return loadOrCreateKey(path) // another process won the race; use its key
		}
		if cerr != nil {
			return Identity{}, fail("cannot create key file %s: %v", path, unwrapPath(cerr))
		}
		_, werr := fmt.Fprintln(f, protocol.Nsec(sk))
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			os.Remove(path)
			return Identity{}, fail("cannot write key file %s: %v", path, werr)
		}
		return identity(sk, path)
	}
	if err != nil {
		return Identity{}, fail("cannot read key file %s: %v", path, unwrapPath(err))
	}
	if st, err := os.Stat(path); err == nil && st.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(path, 0o600); err != nil {
			return Identity{}, fail("key file %s is readable by others and cannot be fixed: %v", path, unwrapPath(err))
		}
	}
	sk, err := protocol.ParseSecretKey(strings.TrimSpace(string(b)))
	if err != nil {
		return Identity{}, fail("key file %s: %v", path, err)
	}
	return identity(sk, path)
}

func identity(sk, path string) (Identity, error) {
	pk, err := protocol.PublicKey(sk)
	if err != nil {
		return Identity{}, fail("key file %s: %v", path, err)
	}
	return Identity{SecretKey: sk, Pubkey: pk, KeyFile: path}, nil
}
