package store

import "time"

// SetCheckpointEvery changes how often s may checkpoint (after its next one).
func SetCheckpointEvery(s *SQLite, d time.Duration) { s.checkpointEvery.Store(int64(d)) }

// WriteStatements is how many write statements s has run.
func WriteStatements(s *SQLite) int64 { return s.execs.Load() }
