package postgres

// Topic is the channel the store's change notices go out on.
func (s *Store) Topic() string { return s.topic }
