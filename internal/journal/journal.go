// Package journal is the harness's durable intake journal: an accepted event is written here
// before the harness queues it, and is only dropped once it reaches a terminal outcome, so work
// accepted before a crash or restart is still done afterwards. Writes reach the kernel before a
// call returns (a process crash keeps them); a syncer goroutine fsyncs them moments later, one
// fsync for every record written meanwhile (group commit), so no mention waits for the disk.
//
// The journal also keeps a watermark, the newest created_at the harness has seen, so a restarted
// harness can ask the relay for everything since.
//
// On disk it is <state-dir>/journal-<agent pubkey hex>.log, append-only, one record per line:
//
//	<crc32c of the JSON, 8 hex digits> <JSON>\n
//
// with JSON one of {"op":"accept","entry":{…}}, {"op":"inflight","ids":[…],"ts":N},
// {"op":"outcome","ids":[…],"reply":{…}}, {"op":"done","ids":[…]} or {"op":"watermark","ts":N}.
// Replay skips a torn last line or a record whose checksum fails, with a warning; it never
// refuses to start. Open rewrites the file with only the live state (compaction); later, once
// the file has grown past a threshold, a Done or Skip asks the syncer goroutine to compact it in
// the background (never InFlight, which sits on the way to a prompt): no caller ever waits for a
// rewrite or an fsync.
package journal

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/buzz-harness/buzz/internal/atomicfile"
	"github.com/buzz-harness/buzz/internal/protocol"
)

// DefaultCompactThreshold is the file size past which a write compacts the journal.
const DefaultCompactThreshold = 256 << 10

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// Entry is one accepted event.
type Entry struct {
	ChannelID  string          `json:"channelId"`
	Event      json.RawMessage `json:"event"` // the raw signed nostr event
	EventID    string          `json:"eventId"`
	CreatedAt  int64           `json:"createdAt"` // the event's created_at (unix seconds)
	AcceptedAt time.Time       `json:"acceptedAt"`
	// InFlightAt is when the event was last handed to the agent in a turn (zero: never). After a
	// crash it tells the harness the agent may already have answered.
	InFlightAt time.Time `json:"inFlightAt,omitzero"`
	// InFlightOwnSecond: no earlier turn of the event's conversation ended in InFlightAt's
	// second, so an agent reply dated in that second can only be this batch's (see
	// harness.replyAnswers; created_at has one-second resolution).
	InFlightOwnSecond bool `json:"inFlightOwnSecond,omitempty"`
	// PromptTag is the prompt tag of the subscription rule the event matched ("" = the default).
	PromptTag string `json:"promptTag,omitempty"`
	// Outcome is the signed event the harness decided to post for the batch in flight (a
	// fallback reply or a failure notice) and may not have posted yet; after a crash it is
	// posted as it is, so the decision is neither lost nor made twice.
	Outcome json.RawMessage `json:"outcome,omitempty"`
}

type record struct {
	Op    string          `json:"op"`
	Entry *Entry          `json:"entry,omitempty"`
	IDs   []string        `json:"ids,omitempty"`
	TS    int64           `json:"ts,omitempty"`
	Own   bool            `json:"own,omitempty"`   // inflight: Entry.InFlightOwnSecond
	Reply json.RawMessage `json:"reply,omitempty"` // outcome: Entry.Outcome
}

const (
	opAccept    = "accept"
	opDone      = "done"
	opWatermark = "watermark"
	opInFlight  = "inflight"
	opOutcome   = "outcome"
)

// appendFile is the part of *os.File the journal appends through; tests swap in failing ones.
type appendFile interface {
	io.Writer
	Sync() error
	Truncate(size int64) error
	Close() error
}

// Journal is safe for concurrent use.
type Journal struct {
	path   string
	logger *slog.Logger
	lock   *atomicfile.Lock

	mu        sync.Mutex
	f         appendFile
	size      int64 // bytes of whole records in the file
	baseSize  int64 // size right after the last compaction
	state     state
	needsSync bool // the file lags memory (a failed write); the next mutation compacts first
	dirty     bool // records written since the last fsync
	closed    bool
	// compactWanted asks the syncer for a background compaction. While one runs, tail keeps a
	// copy of every record written, to be appended to the new file before it replaces the old;
	// gen counts file replacements, so a background rewrite overtaken by a synchronous one (the
	// repair after a failed write) is abandoned.
	compactWanted bool
	tail          *bytes.Buffer
	gen           int
	renamed       bool       // a background compaction renamed the file: the directory needs an fsync
	compactMu     sync.Mutex // one background compaction at a time (tests run one to settle)

	// The syncer fsyncs outside mu, so appends never wait for the disk; fileMu keeps the file it
	// syncs open until the fsync returns (compaction replaces j.f under mu and fileMu).
	fileMu     sync.Mutex
	kick       chan struct{}
	syncerDone chan struct{}

	// Test hooks.
	compactThreshold int64
	openAppend       func(path string) (appendFile, error)
	writeOpts        []atomicfile.Option
	afterSync        func(error) // called by the syncer after each fsync
}

// state is the replayed content of a journal.
type state struct {
	order     []string // event ids in accept order; may hold ids no longer pending
	pending   map[string]Entry
	watermark int64
	// done remembers finished events (id → created_at) near the watermark, so the relay's
	// replay after a restart (which starts a little before the watermark) is recognised.
	done map[string]int64
	// donePruneAt is the size of done at which prune next scans it: twice what the last scan
	// kept, so a busy agent (more than minDonePrune finished events in the recent window) pays
	// for a scan once per doubling, not on every finished turn.
	donePruneAt int
}

const minDonePrune = 1024

// RecentWindow is how far behind the watermark finished events are remembered; a restarted
// harness must not ask the relay for anything older than Watermark() - RecentWindow.
const RecentWindow = 120

func newState() state { return state{pending: map[string]Entry{}, done: map[string]int64{}} }

func (s *state) apply(r record) bool {
	switch r.Op {
	case opAccept:
		if r.Entry == nil || r.Entry.EventID == "" {
			return false
		}
		if _, dup := s.pending[r.Entry.EventID]; !dup {
			s.order = append(s.order, r.Entry.EventID)
		}
		s.pending[r.Entry.EventID] = *r.Entry
		s.raise(r.Entry.CreatedAt)
	case opDone:
		for _, id := range r.IDs {
			ts := r.TS
			if e, ok := s.pending[id]; ok {
				ts = e.CreatedAt
			}
			s.done[id] = ts
			delete(s.pending, id)
		}
		s.raise(r.TS)
		s.prune()
	case opWatermark:
		s.watermark = max(s.watermark, r.TS)
	case opInFlight:
		for _, id := range r.IDs {
			if e, ok := s.pending[id]; ok {
				e.InFlightAt = time.Unix(r.TS, 0)
				e.InFlightOwnSecond = r.Own
				e.Outcome = nil // a new turn: any earlier decision was not this one's
				s.pending[id] = e
			}
		}
	case opOutcome:
		if !json.Valid(r.Reply) {
			return false
		}
		for _, id := range r.IDs {
			if e, ok := s.pending[id]; ok {
				e.Outcome = r.Reply
				s.pending[id] = e
			}
		}
	default:
		return false
	}
	return true
}

// maxFuture is how far ahead of this machine's clock an event's created_at may move the
// watermark: one event dated in the future must not make a restarted harness ask the relay for
// nothing but the future.
const maxFuture = 60

func (s *state) raise(ts int64) {
	s.watermark = max(s.watermark, min(ts, time.Now().Unix()+maxFuture))
}

// prune drops done ids from order once they dominate it, keeping Pending O(live), and forgets
// finished ids that fell out of the recent window.
func (s *state) prune() {
	if len(s.done) > max(s.donePruneAt, minDonePrune) {
		for id, ts := range s.done {
			if ts < s.watermark-RecentWindow {
				delete(s.done, id)
			}
		}
		s.donePruneAt = 2 * len(s.done)
	}
	if len(s.order) < 2*len(s.pending)+32 {
		return
	}
	kept := s.order[:0]
	for _, id := range s.order {
		if _, ok := s.pending[id]; ok {
			kept = append(kept, id)
		}
	}
	s.order = kept
}

// dropFinishedFromOrder keeps only pending ids in order, once each (after a rewrite).
func (s *state) dropFinishedFromOrder() {
	kept := s.order[:0]
	seen := make(map[string]bool, len(s.pending))
	for _, id := range s.order {
		if _, ok := s.pending[id]; ok && !seen[id] {
			seen[id] = true
			kept = append(kept, id)
		}
	}
	s.order = kept
}

func (s *state) list() []Entry {
	out := make([]Entry, 0, len(s.pending))
	seen := make(map[string]bool, len(s.pending))
	for _, id := range s.order {
		if e, ok := s.pending[id]; ok && !seen[id] {
			seen[id] = true
			out = append(out, e)
		}
	}
	return out
}

// replayStats says what replay had to skip.
type replayStats struct {
	torn     bool   // the last line had no newline
	bad      int    // complete lines that failed checksum or parse
	firstBad string // why the first bad line was skipped
}

// replay rebuilds state from journal bytes. It never fails: unreadable records are skipped.
func replay(data []byte) (state, replayStats) {
	st, stats := newState(), replayStats{}
	line := 0
	for len(data) > 0 {
		line++
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			stats.torn = true
			break
		}
		rec, err := decodeLine(data[:i])
		data = data[i+1:]
		if err == nil && !st.apply(rec) {
			err = errors.New("unknown or incomplete record")
		}
		if err != nil {
			if stats.bad == 0 {
				stats.firstBad = fmt.Sprintf("line %d: %v", line, err)
			}
			stats.bad++
		}
	}
	return st, stats
}

func decodeLine(line []byte) (record, error) {
	var r record
	if len(line) < 10 || line[8] != ' ' {
		return r, errors.New("no checksum prefix")
	}
	want, err := strconv.ParseUint(string(line[:8]), 16, 32)
	if err != nil {
		return r, errors.New("bad checksum prefix")
	}
	body := line[9:]
	if crc32.Checksum(body, crcTable) != uint32(want) {
		return r, errors.New("checksum mismatch")
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return r, fmt.Errorf("parse: %w", err)
	}
	return r, nil
}

func encodeLine(r record) ([]byte, error) {
	var body bytes.Buffer
	enc := json.NewEncoder(&body)
	enc.SetEscapeHTML(false) // keep event content byte-for-byte readable
	if err := enc.Encode(r); err != nil {
		return nil, err
	}
	b := bytes.TrimSuffix(body.Bytes(), []byte("\n"))
	out := make([]byte, 0, len(b)+10)
	out = fmt.Appendf(out, "%08x ", crc32.Checksum(b, crcTable))
	out = append(out, b...)
	return append(out, '\n'), nil
}

// FileName is the journal's file name for an agent pubkey.
func FileName(agentPubkey string) string { return "journal-" + agentPubkey + ".log" }

// Open replays the journal for agentPubkey in dir (created 0700 if needed), compacts it, and
// takes its exclusive lock; Close releases it.
func Open(dir, agentPubkey string, logger *slog.Logger) (*Journal, error) {
	return open(dir, agentPubkey, logger, nil)
}

func open(dir, agentPubkey string, logger *slog.Logger, hooks func(*Journal)) (*Journal, error) {
	if logger == nil {
		logger = slog.Default()
	}
	if !protocol.IsHex64(agentPubkey) {
		return nil, fmt.Errorf("journal: agent pubkey %q is not 64 lowercase hex characters", agentPubkey)
	}
	if dir == "" {
		return nil, errors.New("journal: empty state dir")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("journal: create state dir: %w", err)
	}
	path := filepath.Join(dir, FileName(agentPubkey))
	lock, err := atomicfile.TryLock(filepath.Join(dir, "journal-"+agentPubkey+".lock"))
	if err != nil {
		var le *atomicfile.LockedError
		if errors.As(err, &le) {
			return nil, fmt.Errorf("journal %s is locked by %s (another buzz-acp with the same key and state dir?)", path, le.Holder())
		}
		return nil, fmt.Errorf("journal: %w", err)
	}
	j := &Journal{
		path:             path,
		logger:           logger,
		lock:             lock,
		state:            newState(),
		compactThreshold: DefaultCompactThreshold,
		openAppend:       openAppendFile,
		kick:             make(chan struct{}, 1),
		syncerDone:       make(chan struct{}),
	}
	if hooks != nil {
		hooks(j)
	}
	_, _ = atomicfile.RemoveStrayTemps(path)

	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		// Unlike garbage content, an I/O error may hide accepted work: refuse rather than erase it.
		_ = lock.Unlock()
		return nil, fmt.Errorf("journal: read %s: %w", path, err)
	default:
		st, stats := replay(data)
		j.state = st
		if stats.torn {
			logger.Warn("journal: skipped torn last record (interrupted write)", "path", path)
		}
		if stats.bad > 0 {
			logger.Warn("journal: skipped unreadable records", "path", path, "count", stats.bad, "first", stats.firstBad)
		}
	}
	// Rewriting now drops done work, torn tails and garbage, so appends start on a clean line.
	if err := j.compactLocked(); err != nil {
		_ = lock.Unlock()
		return nil, err
	}
	go j.syncer()
	return j, nil
}

func openAppendFile(path string) (appendFile, error) {
	return os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o600)
}

// Append records an accepted event: written before it returns, fsynced by the syncer moments
// later (see writeLocked). An error means the event is not journaled: do not acknowledge it.
// Appending an id that is already pending is a no-op.
func (j *Journal) Append(e Entry) error {
	if e.EventID == "" {
		return errors.New("journal append: empty event id")
	}
	if !json.Valid(e.Event) {
		return fmt.Errorf("journal append %s: event is not valid JSON", e.EventID)
	}
	if e.AcceptedAt.IsZero() {
		e.AcceptedAt = time.Now()
	}
	e.Event = append(json.RawMessage(nil), e.Event...) // the caller may reuse its buffer
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return errors.New("journal append: journal is closed")
	}
	if _, dup := j.state.pending[e.EventID]; dup {
		return nil
	}
	if err := j.writeLocked(record{Op: opAccept, Entry: &e}); err != nil {
		return fmt.Errorf("journal append %s: %w", e.EventID, err)
	}
	j.state.apply(record{Op: opAccept, Entry: &e})
	return nil
}

// Done records terminal outcomes for the given events (replied, failed for good, dropped).
// Unknown or already-done ids are ignored. Memory forgets them even if the write fails; the
// error is for logging, and the next write retries by compacting.
func (j *Journal) Done(eventIDs ...string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return errors.New("journal done: journal is closed")
	}
	var ids []string
	for _, id := range eventIDs {
		if _, ok := j.state.pending[id]; ok {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	r := record{Op: opDone, IDs: ids}
	j.state.apply(r)
	if err := j.writeLocked(r); err != nil {
		j.needsSync = true
		return fmt.Errorf("journal done: %w", err)
	}
	return j.maybeCompactLocked()
}

// InFlight records that a turn is about to show these events to the agent; ownSecond is
// Entry.InFlightOwnSecond. It never compacts:
// it sits between an event and its prompt, and a compaction (a rewrite and three fsyncs) there
// cost that prompt tens of milliseconds; the Done that ends every turn compacts instead.
func (j *Journal) InFlight(at time.Time, ownSecond bool, eventIDs ...string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return errors.New("journal in-flight: journal is closed")
	}
	r := record{Op: opInFlight, IDs: eventIDs, TS: at.Unix(), Own: ownSecond}
	j.state.apply(r)
	if err := j.writeLocked(r); err != nil {
		j.needsSync = true
		return fmt.Errorf("journal in-flight: %w", err)
	}
	return nil
}

// Outcome records the event the harness decided to post for events in flight (signed, so a
// second post after a crash is the same event). Like InFlight it never compacts.
func (j *Journal) Outcome(reply json.RawMessage, eventIDs ...string) error {
	if !json.Valid(reply) {
		return errors.New("journal outcome: reply is not valid JSON")
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return errors.New("journal outcome: journal is closed")
	}
	r := record{Op: opOutcome, IDs: eventIDs, Reply: append(json.RawMessage(nil), reply...)}
	j.state.apply(r)
	if err := j.writeLocked(r); err != nil {
		j.needsSync = true
		return fmt.Errorf("journal outcome: %w", err)
	}
	return nil
}

// Skip records an event that was handled without a turn (an owner command, an event the author
// gate dropped), so a replay after a restart does not handle it again.
func (j *Journal) Skip(eventID string, createdAt int64) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return errors.New("journal skip: journal is closed")
	}
	if _, ok := j.state.done[eventID]; ok {
		return nil
	}
	r := record{Op: opDone, IDs: []string{eventID}, TS: createdAt}
	j.state.apply(r)
	if err := j.writeLocked(r); err != nil {
		j.needsSync = true
		return fmt.Errorf("journal skip: %w", err)
	}
	return j.maybeCompactLocked()
}

// Handled reports whether an event is pending or recently finished.
func (j *Journal) Handled(eventID string) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	if _, ok := j.state.pending[eventID]; ok {
		return true
	}
	_, ok := j.state.done[eventID]
	return ok
}

// Pending returns accepted, not yet done entries in accept order. Treat the Event bytes as
// read-only; they are shared with the journal.
func (j *Journal) Pending() []Entry {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.state.list()
}

// Watermark is the newest created_at the journal has seen (0 if none).
func (j *Journal) Watermark() int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.state.watermark
}

// maybeCompactLocked asks the syncer for a compaction once the file has grown past the
// threshold and to twice its size after the last one.
func (j *Journal) maybeCompactLocked() error {
	if j.size <= j.compactThreshold || j.size <= 2*j.baseSize || j.compactWanted || j.tail != nil {
		return nil
	}
	j.compactWanted = true
	j.kickSyncer()
	return nil
}

func (j *Journal) kickSyncer() {
	select {
	case j.kick <- struct{}{}:
	default: // a sync is already due; it will see this too
	}
}

// liveLocked encodes the live state (watermark, recently finished ids, pending entries), pruning
// what the file no longer needs to remember.
func (j *Journal) liveLocked() (*bytes.Buffer, error) {
	var buf bytes.Buffer
	if j.state.watermark > 0 {
		line, err := encodeLine(record{Op: opWatermark, TS: j.state.watermark})
		if err != nil {
			return nil, fmt.Errorf("journal compact: %w", err)
		}
		buf.Write(line)
	}
	var recent []string
	for id, ts := range j.state.done {
		if ts >= j.state.watermark-RecentWindow {
			recent = append(recent, id)
		} else {
			delete(j.state.done, id)
		}
	}
	sort.Strings(recent)
	for _, id := range recent {
		line, err := encodeLine(record{Op: opDone, IDs: []string{id}, TS: j.state.done[id]})
		if err != nil {
			return nil, fmt.Errorf("journal compact: %w", err)
		}
		buf.Write(line)
	}
	entries := j.state.list()
	for i := range entries {
		line, err := encodeLine(record{Op: opAccept, Entry: &entries[i]})
		if err != nil {
			// Only a replayed record can be unencodable; keeping it would wedge every rewrite.
			j.logger.Warn("journal: dropping entry that cannot be re-encoded", "eventId", entries[i].EventID, "err", err)
			delete(j.state.pending, entries[i].EventID)
			continue
		}
		buf.Write(line)
	}
	return &buf, nil
}

// compactLocked rewrites the journal with only the live state, holding mu throughout: at Open,
// and to repair the file after a failed write. Everything else compacts in the background.
func (j *Journal) compactLocked() error {
	buf, err := j.liveLocked()
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(j.path, buf.Bytes(), 0o600, j.writeOpts...); err != nil {
		// The rename may have happened before the failure (a failed directory fsync): the append
		// handle could point at the replaced file, so the next write must rewrite first.
		j.needsSync = true
		return fmt.Errorf("journal compact: %w", err)
	}
	// The old append handle points at the replaced inode; switch to the new file (which
	// WriteFile fsynced: nothing is left for the syncer).
	j.fileMu.Lock()
	defer j.fileMu.Unlock()
	if j.f != nil {
		_ = j.f.Close()
		j.f = nil
	}
	f, err := j.openAppend(j.path)
	if err != nil {
		j.needsSync = true
		return fmt.Errorf("journal compact: reopen: %w", err)
	}
	j.f = f
	j.size = int64(buf.Len())
	j.baseSize = j.size
	j.needsSync = false
	j.dirty = false
	j.gen++
	j.tail = nil // a background compaction under way is overtaken
	j.state.dropFinishedFromOrder()
	return nil
}

// compactInBackground is a compaction run by the syncer. The slow part — writing the new file
// and its two fsyncs — runs without mu, so appends go on meanwhile; they are also kept in tail
// and appended to the new file just before it replaces the old one, under mu.
func (j *Journal) compactInBackground() error {
	j.compactMu.Lock()
	defer j.compactMu.Unlock()
	j.mu.Lock()
	if j.closed || !j.compactWanted {
		j.mu.Unlock()
		return nil
	}
	j.compactWanted = false
	buf, err := j.liveLocked()
	if err != nil {
		j.mu.Unlock()
		return err
	}
	j.tail = &bytes.Buffer{}
	gen := j.gen
	j.mu.Unlock()

	tmp, err := atomicfile.WriteTemp(j.path, buf.Bytes(), 0o600, j.writeOpts...)
	j.mu.Lock()
	defer j.mu.Unlock()
	tail := j.tail
	j.tail = nil
	if err != nil || j.closed || j.gen != gen || tail == nil {
		if tmp != "" {
			_ = os.Remove(tmp)
		}
		if err != nil {
			return fmt.Errorf("journal compact: %w", err)
		}
		return nil // overtaken by a synchronous rewrite, or closing
	}
	f, err := j.openAppend(tmp)
	if err == nil && tail.Len() > 0 {
		_, err = f.Write(tail.Bytes())
	}
	if err == nil {
		err = os.Rename(tmp, j.path)
	}
	if err != nil {
		if f != nil {
			_ = f.Close()
		}
		_ = os.Remove(tmp)
		return fmt.Errorf("journal compact: %w", err)
	}
	j.fileMu.Lock()
	if j.f != nil {
		_ = j.f.Close()
	}
	j.f = f
	j.fileMu.Unlock()
	j.size = int64(buf.Len() + tail.Len())
	j.baseSize = int64(buf.Len())
	j.dirty, j.renamed = true, true // the syncer's next pass fsyncs the tail and the rename
	j.gen++
	j.state.dropFinishedFromOrder()
	return j.maybeCompactLocked() // a long tail: once more
}

// writeLocked appends one record and wakes the syncer; it does not wait for the disk. An fsync
// here sat on the way to every prompt and cost the disk's tail latency per mention (0.8 ms median
// and 2.5 ms p99 on a quiet disk, tens of milliseconds on a busy one), and under a burst each
// event waited behind the previous one's. A process crash keeps every written record (the kernel
// has it). A power loss may drop what was written since the last fsync (a millisecond or so):
// a lost accept is asked of the relay again at the restart, whose catch-up starts before the
// watermark (which lives in the same records); a lost done or in-flight marker re-prompts a
// batch, at worst a second answer. Close fsyncs what is left.
// On failure it cuts the file back to the last whole record so a partial line cannot swallow
// the next append.
func (j *Journal) writeLocked(r record) error {
	if j.needsSync || j.f == nil {
		// An earlier write failed and the file may not match memory: rewrite it first.
		if err := j.compactLocked(); err != nil {
			return err
		}
	}
	line, err := encodeLine(r)
	if err != nil {
		return err
	}
	if _, err = j.f.Write(line); err != nil {
		if terr := j.f.Truncate(j.size); terr != nil {
			j.needsSync = true
		}
		return err
	}
	j.size += int64(len(line))
	j.dirty = true
	if j.tail != nil {
		j.tail.Write(line)
	}
	j.kickSyncer()
	return nil
}

// syncer fsyncs written records until Close (one fsync covers every record written since the
// previous one) and runs the compactions writes ask for.
func (j *Journal) syncer() {
	defer close(j.syncerDone)
	for range j.kick {
		if err := j.compactInBackground(); err != nil {
			j.logger.Warn("journal: background compaction failed; the file keeps growing until the next one", "err", err)
		}
		synced, err := j.syncOnce()
		if synced && j.afterSync != nil {
			j.afterSync(err)
		}
	}
}

// syncOnce fsyncs the file if records were written since the last fsync. A failed fsync leaves
// the file suspect, so the next write rewrites it (compaction fsyncs the new file).
func (j *Journal) syncOnce() (synced bool, err error) {
	j.mu.Lock()
	if !j.dirty || j.f == nil {
		j.mu.Unlock()
		return false, nil
	}
	f := j.f
	renamed := j.renamed
	j.dirty, j.renamed = false, false
	j.fileMu.Lock()
	j.mu.Unlock()
	err = atomicfile.Fsync(f)
	j.fileMu.Unlock()
	if err == nil && renamed {
		err = atomicfile.SyncDir(filepath.Dir(j.path))
	}
	if err != nil {
		j.mu.Lock()
		if f == j.f { // else a compaction has since rewritten and fsynced everything
			j.needsSync = true
		}
		j.mu.Unlock()
		j.logger.Warn("journal: fsync failed; the next write rewrites the file", "path", j.path, "err", err)
	}
	return true, err
}

// Close releases the journal's file and lock.
func (j *Journal) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return nil
	}
	j.closed = true
	close(j.kick) // no write follows: every writer checks closed under mu
	j.mu.Unlock()
	<-j.syncerDone
	j.mu.Lock()
	var err error
	if j.f != nil {
		err = errors.Join(j.f.Sync(), j.f.Close()) // what the syncer had not reached
	}
	if uerr := j.lock.Unlock(); err == nil {
		err = uerr
	}
	return err
}
