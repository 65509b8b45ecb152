// Package sessionstore is the durable conversation → ACP session map that lets a restarted
// harness session/load the session a conversation was using instead of opening a fresh one. It
// is keyed by protocol.Conversation; on disk a whole-channel conversation is its bare channel id
// (the only form before thread sessions, so older files load unchanged) and a thread is
// "<channel>:<root event>".
//
// The map lives in <state-dir>/sessions-<agent pubkey hex>.json. Changes are made in memory and
// the file is rewritten atomically by one writer goroutine (atomicfile.Snapshots), latest state
// wins: no caller ever waits for the disk. A record is only handed back for resumption when it
// was made against the same relay and agent command as now (Origin). The store is an
// optimisation: a missing, unreadable or malformed file means "no sessions to resume", never a
// failed start.
//
// One harness owns a store at a time: Open takes an exclusive flock on sessions-<pk>.lock and a
// second opener (another process, or another Open in this one) gets an error naming the pid.
package sessionstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
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
// only marks the file for writing when the last write it asked for is older than this (Put,
// Remove and Close always do).
const touchFlushInterval = time.Minute

// Origin is what a session must have been created under to be safe to resume: a session id from
// another relay or another agent program means nothing to the current one.
type Origin struct {
	RelayURL     string
	AgentCommand string
}

// Record is one conversation's remembered session.
type Record struct {
	SessionID    string    `json:"sessionId"`
	RelayURL     string    `json:"relayUrl"`
	AgentCommand string    `json:"agentCommand"`
	CreatedAt    time.Time `json:"createdAt"`
	LastUsedAt   time.Time `json:"lastUsedAt"`
	// StandingDelivered: the session's history holds the standing context (user-message route),
	// so a session/resume after a restart need not send it again. Absent in files written before
	// it existed, which reads as "not delivered": such a session is briefed again, as before.
	StandingDelivered bool `json:"standingDelivered,omitempty"`
}

// Matches reports whether r was created under origin (relay URLs compared after normalisation).
func (r Record) Matches(origin Origin) bool {
	return protocol.SameURL(r.RelayURL, origin.RelayURL) && r.AgentCommand == origin.AgentCommand
}

type fileFormat struct {
	Version     int               `json:"version"`
	AgentPubkey string            `json:"agentPubkey"`
	Sessions    map[string]Record `json:"sessions"`
}

// fileKey is a conversation's key in the file.
func fileKey(c protocol.Conversation) string {
	if c.Root == "" {
		return c.Channel
	}
	return c.Channel + ":" + c.Root
}

// channelOf is the channel of a file key.
func channelOf(key string) string {
	ch, _, _ := strings.Cut(key, ":")
	return ch
}

// Store is safe for concurrent use; no method waits for the disk.
type Store struct {
	enabled bool
	path    string
	pubkey  string
	logger  *slog.Logger
	lock    *atomicfile.Lock
	file    *atomicfile.Snapshots

	mu       sync.Mutex
	sessions map[string]Record // by fileKey
	lastMark time.Time         // the `now` of the last Touch that asked for a write
	dirty    bool              // a Touch changed memory without asking for a write
	marked   uint64            // the newest version asked of the writer
	closed   bool
}

// FileName is the store's file name for an agent pubkey.
func FileName(agentPubkey string) string { return "sessions-" + agentPubkey + ".json" }

// Open loads (or starts) the store for agentPubkey in dir, creating dir (0700) if needed, and
// takes the store's exclusive lock. Close releases it. opts apply to every file write (tests
// inject crashes and slow disks with them).
func Open(dir, agentPubkey string, logger *slog.Logger, opts ...atomicfile.Option) (*Store, error) {
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
	}
	// We hold the lock, so any temp file next to ours is debris from a crashed write.
	_, _ = atomicfile.RemoveStrayTemps(path)
	s.load()
	s.file = atomicfile.NewSnapshots(path, 0o600, s.snapshot, opts...)
	return s, nil
}

// Disabled returns a store that remembers nothing (--no-resume-sessions): Get never finds a
// record and Put/Remove/Touch do nothing.
func Disabled() *Store {
	return &Store{logger: slog.Default(), sessions: map[string]Record{}}
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

// snapshot encodes the map for the writer goroutine.
func (s *Store) snapshot() ([]byte, bool) {
	s.mu.Lock()
	data, err := json.MarshalIndent(fileFormat{Version: FormatVersion, AgentPubkey: s.pubkey, Sessions: s.sessions}, "", "  ")
	s.dirty = false
	s.mu.Unlock()
	if err != nil { // only a time outside RFC 3339 can fail; keep the file as it is
		s.logger.Warn("session store: cannot encode; the file keeps its previous content", "err", err)
		return nil, true
	}
	return append(data, '\n'), true
}

// markLocked asks the writer for the current state.
func (s *Store) markLocked() { s.marked = s.file.Mark() }

func (s *Store) usable() bool { return s.enabled && !s.closed }

// Get returns the conversation's remembered session if it was created under origin. A record
// from another relay or agent command is reported as absent (it stays on disk until overwritten).
func (s *Store) Get(c protocol.Conversation, origin Origin) (Record, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.usable() {
		return Record{}, false
	}
	rec, ok := s.sessions[fileKey(c)]
	if !ok || !rec.Matches(origin) {
		return Record{}, false
	}
	return rec, true
}

// Put remembers rec for the conversation. Zero CreatedAt/LastUsedAt are set to now.
func (s *Store) Put(c protocol.Conversation, rec Record) error {
	if c.Channel == "" || rec.SessionID == "" {
		return errors.New("session store: put needs a conversation and a session id")
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
	s.sessions[fileKey(c)] = rec
	s.markLocked()
	return nil
}

// Touch records that the conversation's session was used at now. It is called every turn, so
// it asks for a write only when the previous Touch write is older than a minute; Put, Remove and
// Close write anything pending.
func (s *Store) Touch(c protocol.Conversation, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.usable() {
		return
	}
	key := fileKey(c)
	rec, ok := s.sessions[key]
	if !ok {
		return
	}
	rec.LastUsedAt = now
	s.sessions[key] = rec
	s.dirty = true
	if now.Sub(s.lastMark) < touchFlushInterval {
		return
	}
	s.lastMark = now
	s.markLocked()
}

// Remove forgets the conversation's session (invalidation, failed resume, !rotate).
func (s *Store) Remove(c protocol.Conversation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.usable() {
		return
	}
	key := fileKey(c)
	if _, ok := s.sessions[key]; !ok {
		return
	}
	delete(s.sessions, key)
	s.markLocked()
}

// MarkStandingDelivered records that the conversation's session — if it is still sessionID — has
// the standing context in its history. A record since replaced by another session is left alone.
func (s *Store) MarkStandingDelivered(c protocol.Conversation, sessionID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.usable() {
		return
	}
	key := fileKey(c)
	rec, ok := s.sessions[key]
	if !ok || rec.SessionID != sessionID || rec.StandingDelivered {
		return
	}
	rec.StandingDelivered = true
	s.sessions[key] = rec
	s.markLocked()
}

// RemoveChannel forgets the sessions of every conversation of a channel (the agent left it).
func (s *Store) RemoveChannel(channelID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.usable() {
		return
	}
	n := len(s.sessions)
	for k := range s.sessions {
		if channelOf(k) == channelID {
			delete(s.sessions, k)
		}
	}
	if len(s.sessions) != n {
		s.markLocked()
	}
}

// Flush waits until every change made so far is on disk (or ctx ends) and reports the write's
// error. A new session waits for it, briefly, before its first prompt (harness awaitStored).
func (s *Store) Flush(ctx context.Context) error {
	s.mu.Lock()
	if !s.usable() {
		s.mu.Unlock()
		return nil
	}
	if s.dirty {
		s.markLocked()
	}
	v := s.marked
	s.mu.Unlock()
	if err := s.file.Wait(ctx, v); err != nil {
		return fmt.Errorf("session store: %w", err)
	}
	return nil
}

// Close writes what is pending and releases the lock. Later calls are no-ops; a closed store
// finds nothing.
func (s *Store) Close() error {
	s.mu.Lock()
	if !s.enabled || s.closed {
		s.mu.Unlock()
		return nil
	}
	if s.dirty {
		s.markLocked()
	}
	s.closed = true
	s.mu.Unlock()
	err := s.file.Close()
	if err != nil {
		err = fmt.Errorf("session store: %w", err)
	}
	if uerr := s.lock.Unlock(); err == nil && uerr != nil {
		err = fmt.Errorf("session store: unlock: %w", uerr)
	}
	return err
}
