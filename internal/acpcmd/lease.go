package acpcmd

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/buzz-harness/buzz/internal/atomicfile"
	"github.com/buzz-harness/buzz/internal/protocol"
)

// leaseDir is where the per-agent-and-relay leases live: $XDG_STATE_HOME/buzz-acp/leases, else
// ~/.local/state/buzz-acp/leases. It is per user, not per state dir, so two harnesses started
// from different directories still see each other.
func leaseDir() (string, error) {
	base := os.Getenv("XDG_STATE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("lease directory: %w", err)
		}
		base = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(base, "buzz-acp", "leases"), nil
}

// normalizeRelay names one relay however it is spelled: ws/http and wss/https alike, case,
// loopback names, default port and trailing slash do not matter.
func normalizeRelay(raw string) string {
	u := protocol.WSURL(protocol.NormalizeURL(raw))
	if s, ok := strings.CutPrefix(u, "wss://"); ok {
		host, path, _ := strings.Cut(s, "/")
		return "wss://" + strings.TrimSuffix(host, ":443") + withSlash(path)
	}
	s := strings.TrimPrefix(u, "ws://")
	host, path, _ := strings.Cut(s, "/")
	return "ws://" + strings.TrimSuffix(host, ":80") + withSlash(path)
}

func withSlash(path string) string {
	if path == "" {
		return ""
	}
	return "/" + path
}

// leaseFile is the lock file for one agent pubkey on one relay.
func leaseFile(dir, pubkey, relayURL string) string {
	sum := sha256.Sum256([]byte(pubkey + "|" + normalizeRelay(relayURL)))
	return filepath.Join(dir, hex.EncodeToString(sum[:])[:24]+".lock")
}

// takeLeases holds an exclusive lease per listed relay for the agent pubkey, so a second
// buzz-acp for the same agent on any of the same relays refuses to start (two would answer
// every mention twice). The kernel drops the leases when the process dies.
func takeLeases(dir, pubkey string, relays []string) (release func(), err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("lease directory: %w", err)
	}
	var held []*atomicfile.Lock
	release = func() {
		for _, l := range held {
			_ = l.Unlock()
		}
	}
	for _, r := range relays {
		l, err := atomicfile.TryLock(leaseFile(dir, pubkey, r))
		if err != nil {
			release()
			var le *atomicfile.LockedError
			if errors.As(err, &le) {
				return nil, fmt.Errorf("another buzz-acp (%s) is already running as agent %s on %s", le.Holder(), pubkey, normalizeRelay(r))
			}
			return nil, fmt.Errorf("agent lease: %w", err)
		}
		held = append(held, l)
	}
	return release, nil
}
