package sessionstore

// Test-only access: production code never needs these, tests use them to inspect the store.

// Len is the number of remembered sessions (0 when disabled).
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.enabled {
		return 0
	}
	return len(s.sessions)
}

// Path is the store file's path ("" when disabled).
func (s *Store) Path() string { return s.path }

// Enabled reports whether the store persists anything.
func (s *Store) Enabled() bool { return s.enabled }
