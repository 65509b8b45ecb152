package journal

import (
	"errors"
	"fmt"
)

// Test-only access: production code never needs these, tests use them to drive and inspect the
// journal directly.

// Path is the journal file's path.
func (j *Journal) Path() string { return j.path }

// Len is the number of pending entries.
func (j *Journal) Len() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.state.pending)
}

// SetWatermark raises the watermark to ts and persists it; a ts not newer than the current one
// is ignored (the watermark never moves back). Production code raises it only through the
// entries it writes.
func (j *Journal) SetWatermark(ts int64) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return errors.New("journal watermark: journal is closed")
	}
	if ts <= j.state.watermark {
		return nil
	}
	r := record{Op: opWatermark, TS: ts}
	j.state.apply(r)
	if err := j.writeLocked(r); err != nil {
		j.needsSync = true
		return fmt.Errorf("journal watermark: %w", err)
	}
	return j.maybeCompactLocked()
}

// Compact atomically rewrites the journal with only the pending entries and the watermark.
func (j *Journal) Compact() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return errors.New("journal compact: journal is closed")
	}
	return j.compactLocked()
}

// SettleCompaction runs the background compactions writes asked for, if the syncer has not yet,
// and returns once none is wanted.
func (j *Journal) SettleCompaction() error {
	for {
		if err := j.compactInBackground(); err != nil {
			return err
		}
		j.mu.Lock()
		wanted := j.compactWanted
		j.mu.Unlock()
		if !wanted {
			return nil
		}
	}
}
