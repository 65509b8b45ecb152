package client

// IDSet remembers recently seen event ids in two generations, so memory stays bounded while the
// last gen..2*gen ids are always recognised. It has no lock: one goroutine owns it.
type IDSet struct {
	gen       int
	cur, prev map[string]struct{}
}

// NewIDSet returns a set whose generations hold gen ids each.
func NewIDSet(gen int) *IDSet {
	return &IDSet{gen: max(gen, 1), cur: make(map[string]struct{}, gen)}
}

// Add records id and reports whether it was new.
func (s *IDSet) Add(id string) bool {
	if _, ok := s.cur[id]; ok {
		return false
	}
	if _, ok := s.prev[id]; ok {
		return false
	}
	if len(s.cur) >= s.gen {
		s.prev, s.cur = s.cur, make(map[string]struct{}, s.gen)
	}
	s.cur[id] = struct{}{}
	return true
}

// Has reports whether id was seen recently.
func (s *IDSet) Has(id string) bool {
	_, cur := s.cur[id]
	_, prev := s.prev[id]
	return cur || prev
}

// Forget removes id, so the event counts as new when it is offered again.
func (s *IDSet) Forget(id string) {
	delete(s.cur, id)
	delete(s.prev, id)
}
