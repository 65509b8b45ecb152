package relay

import (
	"encoding/json"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/relay/store"
)

// Live subscriptions and their fan-out. A subscription costs memory for as long as it lives and
// CPU for every event published, so its size is bounded (values per filter list, filter bytes
// per connection and per pubkey), its value lists are matched as sets, and each connection
// matches events against its own subscriptions on its own goroutine: a connection with many or
// large subscriptions slows only itself, never the publisher nor the other subscribers.
//
// Defaults (docs/security.md). The harness sends one filter per 10 channels (~550 bytes), so its
// 10,000-channel ceiling needs about 560 KiB on its one connection; the console names at most 500
// channels in one list.
const (
	DefaultMaxFilterValues    = 1000
	DefaultMaxSubBytesPerConn = 1 << 20
	DefaultMaxSubBytesPerKey  = 4 << 20
)

// setThreshold: lists longer than this are matched through a map.
const setThreshold = 16

// checkFilterValues refuses a filter with a list (ids, authors, kinds, a tag's values) longer
// than maxValues: every value is held, and matched, for the life of a subscription.
func checkFilterValues(f store.Filter, maxValues int) string {
	too := func(name string, n int) string {
		return protocol.ReasonInvalid.Msgf("filter %q has %d values (max %d)", name, n, maxValues)
	}
	switch {
	case len(f.IDs) > maxValues:
		return too("ids", len(f.IDs))
	case len(f.Authors) > maxValues:
		return too("authors", len(f.Authors))
	case len(f.Kinds) > maxValues:
		return too("kinds", len(f.Kinds))
	}
	for name, vals := range f.Tags {
		if len(vals) > maxValues {
			return too("#"+name, len(vals))
		}
	}
	return ""
}

// valueSet is a filter's list of values (nil = no condition), with a map once it is long.
type valueSet struct {
	list []string
	set  map[string]struct{}
}

func newValueSet(list []string) valueSet {
	v := valueSet{list: list}
	if len(list) > setThreshold {
		v.set = make(map[string]struct{}, len(list))
		for _, s := range list {
			v.set[s] = struct{}{}
		}
	}
	return v
}

func (v valueSet) has(s string) bool {
	if v.set != nil {
		_, ok := v.set[s]
		return ok
	}
	return slices.Contains(v.list, s)
}

// liveFilter is a filter compiled for live matching; it matches what nostr.Filter.Matches does.
type liveFilter struct {
	f       store.Filter
	ids     valueSet
	authors valueSet
	tags    map[string]valueSet
}

func compileFilter(f store.Filter) liveFilter {
	lf := liveFilter{f: f, ids: newValueSet(f.IDs), authors: newValueSet(f.Authors)}
	for name, vals := range f.Tags {
		if vals == nil {
			continue
		}
		if lf.tags == nil {
			lf.tags = map[string]valueSet{}
		}
		lf.tags[name] = newValueSet(vals)
	}
	return lf
}

func (lf *liveFilter) matches(ev *nostr.Event) bool {
	f := &lf.f
	switch {
	case f.IDs != nil && !lf.ids.has(ev.ID),
		f.Kinds != nil && !slices.Contains(f.Kinds, ev.Kind),
		f.Authors != nil && !lf.authors.has(ev.PubKey),
		f.Since != nil && ev.CreatedAt < *f.Since,
		f.Until != nil && ev.CreatedAt > *f.Until:
		return false
	}
	for name, vals := range lf.tags {
		found := false
		for _, t := range ev.Tags {
			if len(t) >= 2 && t[0] == name && vals.has(t[1]) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// liveSub is one registered subscription, immutable once built.
type liveSub struct {
	id      string
	idJSON  []byte
	filters []liveFilter
	bytes   int64 // its filters' size as sent, counted against the budgets
}

func newLiveSub(id string, filters []store.Filter, bytes int64) *liveSub {
	s := &liveSub{id: id, bytes: bytes}
	s.idJSON, _ = json.Marshal(id)
	for _, f := range filters {
		s.filters = append(s.filters, compileFilter(f))
	}
	return s
}

func (s *liveSub) matches(ev *nostr.Event) bool {
	for i := range s.filters {
		if s.filters[i].matches(ev) {
			return true
		}
	}
	return false
}

// subBudget counts the filter bytes of each pubkey's live subscriptions relay-wide.
type subBudget struct {
	mu    sync.Mutex
	bytes map[string]int64
}

// take moves pubkey's count by delta, refusing a growth past limit.
func (b *subBudget) take(pubkey string, delta, limit int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	next := b.bytes[pubkey] + delta
	if delta > 0 && next > limit {
		return false
	}
	if next <= 0 {
		delete(b.bytes, pubkey)
	} else {
		if b.bytes == nil {
			b.bytes = map[string]int64{}
		}
		b.bytes[pubkey] = next
	}
	return true
}

// liveEvent is one event on its way to the connections' writers; its JSON is built once, by
// broadcast.
type liveEvent struct {
	ev        *nostr.Event
	channelID string
	once      sync.Once
	json      []byte

	// pending counts the connections not yet done with it; the last one observes how many
	// received it (buzz_fanout_recipients).
	pending, recipients atomic.Int32
	observe             func(float64)
}

// settle marks one connection done with le.
func (le *liveEvent) settle(received bool) {
	if received {
		le.recipients.Add(1)
	}
	if le.pending.Add(-1) == 0 {
		le.observe(float64(le.recipients.Load()))
	}
}

func (le *liveEvent) encoded() []byte {
	le.once.Do(func() { le.json, _ = json.Marshal(le.ev) })
	return le.json
}

// size is what le counts against a connection's live bytes: its JSON and a frame's framing.
func (le *liveEvent) size() int64 { return int64(len(le.encoded())) + 64 }

// liveSubs is the connection's current subscriptions: a copy-on-write snapshot, so the matcher
// reads it without a lock while REQ and CLOSE replace it under c.mu.
func (c *conn) liveSubs() map[string]*liveSub {
	if m := c.subs.Load(); m != nil {
		return *m
	}
	return nil
}

// putSub registers (or replaces) subscription id, within the connection's and the pubkey's
// filter-byte budgets; it returns the refusal, or "". Called with c.mu held.
func (c *conn) putSub(pubkey, id string, filters []store.Filter, bytes int64) string {
	cur := c.liveSubs()
	old := cur[id]
	if old == nil && len(cur) >= maxSubscriptions {
		return protocol.ReasonError.Msg("too many subscriptions")
	}
	var total int64
	for _, s := range cur {
		total += s.bytes
	}
	delta := bytes
	if old != nil {
		delta -= old.bytes
	}
	cfg := &c.r.cfg
	if total+delta > cfg.MaxSubBytesPerConn {
		return protocol.ReasonInvalid.Msgf("this connection's subscriptions would hold %d bytes of filters (max %d)", total+delta, cfg.MaxSubBytesPerConn)
	}
	if !c.r.subBytes.take(pubkey, delta, cfg.MaxSubBytesPerKey) {
		return protocol.ReasonInvalid.Msgf("your subscriptions would hold more than %d bytes of filters", cfg.MaxSubBytesPerKey)
	}
	next := make(map[string]*liveSub, len(cur)+1)
	for k, s := range cur {
		next[k] = s
	}
	next[id] = newLiveSub(id, filters, bytes)
	c.subs.Store(&next)
	return ""
}

// dropSubs removes the subscriptions for which drop is true and returns their ids. Called with
// c.mu held.
func (c *conn) dropSubs(drop func(*liveSub) bool) []string {
	cur := c.liveSubs()
	var gone []string
	var freed int64
	next := make(map[string]*liveSub, len(cur))
	for k, s := range cur {
		if drop(s) {
			gone = append(gone, k)
			freed += s.bytes
		} else {
			next[k] = s
		}
	}
	if len(gone) == 0 {
		return nil
	}
	c.r.subBytes.take(c.authed, -freed, 0)
	c.subs.Store(&next)
	return gone
}

func (c *conn) dropSub(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropSubs(func(s *liveSub) bool { return s.id == id })
}

// deliver writes le to each of the connection's subscriptions it matches, checking at send time
// that the subscriber may see it.
func (c *conn) deliver(le *liveEvent, write func([]byte) error) error {
	subs := c.liveSubs()
	var hits []*liveSub
	for _, s := range subs {
		if s.matches(le.ev) {
			hits = append(hits, s)
		}
	}
	if len(hits) == 0 || !c.r.canSee(c.pubkey(), le.ev, le.channelID) {
		le.settle(false)
		return nil
	}
	le.settle(true)
	for _, s := range hits {
		if err := write(eventFrameRaw(s.idJSON, le.encoded())); err != nil {
			return err
		}
	}
	return nil
}
