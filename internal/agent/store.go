package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/buzz-harness/buzz/internal/agent/provider"
	"github.com/buzz-harness/buzz/internal/atomicfile"
)

// storedMessage is one history entry. Notice entries (provider errors, loop
// limits) are replayed to clients but never sent to a model.
type storedMessage struct {
	provider.Message
	Notice bool `json:"notice,omitempty"`
}

// sessionData is what a session file holds.
type sessionData struct {
	ID           string          `json:"id"`
	Cwd          string          `json:"cwd"`
	SystemPrompt string          `json:"systemPrompt,omitempty"`
	CreatedAt    time.Time       `json:"createdAt"`
	UpdatedAt    time.Time       `json:"updatedAt"`
	Messages     []storedMessage `json:"messages"`
	// Permission choices the client made "always" for, by tool name.
	AlwaysAllow  map[string]bool `json:"alwaysAllow,omitempty"`
	AlwaysReject map[string]bool `json:"alwaysReject,omitempty"`
}

// errNoSession is returned by store.load for an id with no file.
var errNoSession = errors.New("session not found")

// validSessionID keeps ids safe to use as file names.
var validSessionID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$`)

// store keeps one JSON file per session under <state-dir>/sessions.
type store struct{ dir string }

func newStore(stateDir string) *store {
	return &store{dir: filepath.Join(stateDir, "sessions")}
}

func (s *store) path(id string) (string, error) {
	if !validSessionID.MatchString(id) {
		return "", fmt.Errorf("invalid session id %q", id)
	}
	return filepath.Join(s.dir, id+".json"), nil
}

// save writes the session atomically (temp file, fsync, rename, fsync dir).
func (s *store) save(d *sessionData) error {
	p, err := s.path(d.ID)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return fmt.Errorf("save session %s: %w", d.ID, err)
	}
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return fmt.Errorf("save session %s: %w", d.ID, err)
	}
	if err := atomicfile.WriteFile(p, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("save session %s: %w", d.ID, err)
	}
	return nil
}

// load reads a session file; errNoSession if there is none.
func (s *store) load(id string) (*sessionData, error) {
	p, err := s.path(id)
	if err != nil {
		return nil, errNoSession
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, errNoSession
	}
	if err != nil {
		return nil, fmt.Errorf("load session %s: %w", id, err)
	}
	var d sessionData
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("load session %s: corrupt file %s: %w", id, p, err)
	}
	if d.ID != id {
		return nil, fmt.Errorf("load session %s: file %s holds session %q", id, p, d.ID)
	}
	return &d, nil
}
