// Package sessionstore is the durable conversation → ACP session map that lets a restarted
// harness session/load the session a conversation was using instead of opening a fresh one. Keys
// are the harness's conversation names: a bare channel id for a whole-channel conversation (the
// only form before thread sessions, so older files load unchanged) or "<channel>:<root event>"
// for a thread.
//
// The map lives in <state-dir>/sessions-<agent pubkey hex>.json and is rewritten atomically on
// every change. A record is only handed back for resumption when it was made against the same
// relay and agent command as now (Scope). The store is an optimisation: a missing, unreadable or
// malformed file means "no sessions to resume", never a failed start.
//
// One harness owns a store at a time: Open takes an exclusive flock on sessions-<pk>.lock and a
// second opener (another process, or another Open in this one) gets an error naming the pid.
package sessionstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/buzz-harness/buzz/internal/atomicfile"
	"github.com/buzz-harness/buzz/internal/protocol"
)

// FormatVersion is the version field written into the file; files with another version are
// ignored (treated as empty) rather than misread.
const FormatVersion = 1

// maxFileSize bounds what Open will read; a bigger file is treated as malformed.
const maxFileSize = 4 << 20

// touchFlushInterval bounds how stale LastUsedAt may be on disk. Touch runs every turn, so it
// only writes when the last write is older than this (Put, Remove and Close always write).
const touchFlushInterval = time.Minute

// Scope is what a session must have been created under to be safe to resume: a session id from
// another relay or another agent program means nothing to the current one.
type Scope struct {
	RelayURL     string
	AgentCommand string
}

// Record is one channel's remembered session.
type Record struct {
	SessionID    string    `json:"sessionId"`
	RelayURL     string    `json:"relayUrl"`
	AgentCommand string    `json:"agentCommand"`
	CreatedAt    time.Time `json:"createdAt"`
	LastUsedAt   time.Time `json:"lastUsedAt"`
}

// Matches reports whether r was created under scope (relay URLs compared after normalisation).
func (r Record) Matches(scope Scope) bool {
	return protocol.SameURL(r.RelayURL, scope.RelayURL) && r.AgentCommand == scope.AgentCommand
}

type fileFormat struct {
	Version     int               `json:"version"`
	AgentPubkey string            `json:"agentPubkey"`
	Sessions    map[string]Record `json:"sessions"`
}

// Store is safe for concurrent use.
type Store struct {
	enabled bool
	path    string
	pubkey  string
	logger  *slog.Logger
	lock    *atomicfile.Lock

	mu        sync.Mutex
	sessions  map[string]Record
	fresh     map[string]bool
	dirty     bool      // in-memory state differs from the file (a batched Touch)
	lastWrite time.Time // the `now` of the last Touch-triggered or full write
	closed    bool

	// writeOpts lets tests inject a crash between temp write and rename.
	writeOpts []atomicfile.Option
}

// FileName is the store's file name for an agent pubkey.
func FileName(agentPubkey string) string { return "sessions-" + agentPubkey + ".json" }

// Open loads (or starts) the store for agentPubkey in dir, creating dir (0700) if needed, and
// takes the store's exclusive lock. Close releases it.
func Open(dir, agentPubkey string, logger *slog.Logger) (*Store, error) {
	if logger == nil {
		logger = slog.Default()
	}
	if !protocol.IsHex64(agentPubkey) {
		return nil, fmt.Errorf("session store: agent pubkey %q is not 64 lowercase hex characters", agentPubkey)
	}
	if dir == "" {
		return nil, errors.New("session store: empty state dir")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("session store: create state dir: %w", err)
	}
	path := filepath.Join(dir, FileName(agentPubkey))
	lock, err := atomicfile.TryLock(filepath.Join(dir, "sessions-"+agentPubkey+".lock"))
	if err != nil {
		var le *atomicfile.LockedError
		if errors.As(err, &le) {
			return nil, fmt.Errorf("session store %s is locked by %s (another buzz-acp with the same key and state dir?)", path, le.Holder())
		}
		return nil, fmt.Errorf("session store: %w", err)
	}
	s := &Store{
		enabled:  true,
		path:     path,
		pubkey:   agentPubkey,
		logger:   logger,
		lock:     lock,
		sessions: map[string]Record{},
		fresh:    map[string]bool{},
	}
	// We hold the lock, so any temp file next to ours is debris from a crashed write.
	_, _ = atomicfile.RemoveStrayTemps(path)
	s.load()
	return s, nil
}

// Disabled returns a store that remembers nothing (--no-resume-sessions). Get never finds a
// record and Put/Remove/Touch do nothing, but RequestFresh/TakeFresh still work in memory,
// because !rotate must still tell the agent to start over.
func Disabled() *Store {
	return &Store{logger: slog.Default(), sessions: map[string]Record{}, fresh: map[string]bool{}}
}

func (s *Store) load() {
	data, err := readLimited(s.path)
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	if err == nil {
		var sessions map[string]Record
		sessions, err = decode(data, s.pubkey)
		if err == nil {
			s.sessions = sessions
			return
		}
	}
	s.logger.Warn("session store unreadable, starting empty; it will be overwritten on the next write",
		"path", s.path, "err", err)
}

func readLimited(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > maxFileSize {
		return nil, fmt.Errorf("file is %d bytes, over the %d byte limit", st.Size(), maxFileSize)
	}
	buf := make([]byte, st.Size())
	if _, err := f.ReadAt(buf, 0); err != nil && st.Size() > 0 {
		return nil, err
	}
	return buf, nil
}

// decode parses a store file. Records without a session id are dropped; a file for another
// pubkey or version is an error (the caller starts empty).
func decode(data []byte, pubkey string) (map[string]Record, error) {
	var f fileFormat
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	if f.Version != FormatVersion {
		return nil, fmt.Errorf("unsupported version %d (want %d)", f.Version, FormatVersion)
	}
	if f.AgentPubkey != pubkey {
		return nil, fmt.Errorf("file belongs to agent %q, not %q", f.AgentPubkey, pubkey)
	}
	out := make(map[string]Record, len(f.Sessions))
	for ch, rec := range f.Sessions {
		if ch == "" || rec.SessionID == "" {
			continue
		}
		out[ch] = rec
	}
	return out, nil
}

// writeLocked persists the whole map; s.mu must be held.
func (s *Store) writeLocked() error {
	data, err := json.MarshalIndent(fileFormat{Version: FormatVersion, AgentPubkey: s.pubkey, Sessions: s.sessions}, "", "  ")
	if err != nil {
		return fmt.Errorf("session store: encode: %w", err)
	}
	if err := atomicfile.WriteFile(s.path, append(data, '\n'), 0o600, s.writeOpts...); err != nil {
		s.dirty = true // memory is ahead of the file: the next write (or Close) catches it up
		return fmt.Errorf("session store: %w", err)
	}
	s.dirty = false
	return nil
}

func (s *Store) usable() bool { return s.enabled && !s.closed }

// Get returns the channel's remembered session if it was created under scope. A record from
// another relay or agent command is reported as absent (it stays on disk until overwritten).
func (s *Store) Get(channelID string, scope Scope) (Record, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.usable() {
		return Record{}, false
	}
	rec, ok := s.sessions[channelID]
	if !ok || !rec.Matches(scope) {
		return Record{}, false
	}
	return rec, true
}

// Put remembers rec for the channel and writes the file. Zero CreatedAt/LastUsedAt are set to
// now. The error is for logging; a failed write must not fail the turn.
func (s *Store) Put(channelID string, rec Record) error {
	if channelID == "" || rec.SessionID == "" {
		return errors.New("session store: put needs a channel id and a session id")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.usable() {
		return nil
	}
	now := time.Now()
	if rec.CreatedAt.IsZero() {
		rec.CreatedAt = now
	}
	if rec.LastUsedAt.IsZero() {
		rec.LastUsedAt = rec.CreatedAt
	}
	s.sessions[channelID] = rec
	return s.writeLocked()
}

// Touch records that the channel's session was used at now. It is called every turn, so it
// only writes the file when the previous write is older than a minute; Put, Remove and
// Close persist anything pending.
func (s *Store) Touch(channelID string, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.usable() {
		return nil
	}
	rec, ok := s.sessions[channelID]
	if !ok {
		return nil
	}
	rec.LastUsedAt = now
	s.sessions[channelID] = rec
	s.dirty = true
	if now.Sub(s.lastWrite) < touchFlushInterval {
		return nil
	}
	s.lastWrite = now
	return s.writeLocked()
}

// Remove forgets the channel's session (invalidation, failed resume, !rotate, channel removal).
func (s *Store) Remove(channelID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.usable() {
		return nil
	}
	if _, ok := s.sessions[channelID]; !ok {
		return nil
	}
	delete(s.sessions, channelID)
	return s.writeLocked()
}

// RemoveIf forgets every session whose key matches (all of a channel's thread sessions when the
// agent leaves it).
func (s *Store) RemoveIf(match func(key string) bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.usable() {
		return nil
	}
	n := len(s.sessions)
	for k := range s.sessions {
		if match(k) {
			delete(s.sessions, k)
		}
	}
	if len(s.sessions) == n {
		return nil
	}
	return s.writeLocked()
}

// RequestFresh marks the channel so its next session/new carries _meta.freshSession: true
// (after !rotate). In memory only; works on a disabled store.
func (s *Store) RequestFresh(channelID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fresh[channelID] = true
}

// TakeFresh reports and clears the channel's fresh-session request.
func (s *Store) TakeFresh(channelID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.fresh[channelID] {
		return false
	}
	delete(s.fresh, channelID)
	return true
}

// Close flushes pending Touch updates and releases the lock. Later calls are no-ops on a closed
// store (Get finds nothing).
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.enabled || s.closed {
		return nil
	}
	var err error
	if s.dirty {
		err = s.writeLocked()
	}
	s.closed = true
	if uerr := s.lock.Unlock(); err == nil && uerr != nil {
		err = fmt.Errorf("session store: unlock: %w", uerr)
	}
	return err
}
