package relay

import "github.com/buzz-harness/buzz/internal/relay/store"

// Test hooks for hostile_test.go (package relay_test).

// PeakQueuedBytes is the most bytes ever queued for one WebSocket client.
func PeakQueuedBytes(r *Relay) int64 { return r.peakQueued.Load() }

// Conns is the number of open WebSocket connections.
func Conns(r *Relay) int {
	r.connsMu.RLock()
	defer r.connsMu.RUnlock()
	return len(r.conns)
}

// PendingReads counts reads admitted or waiting at the read gate.
func PendingReads(r *Relay) int {
	r.gate.mu.Lock()
	defer r.gate.mu.Unlock()
	n := 0
	for _, cs := range r.gate.clients {
		n += cs.users
	}
	return n
}

// WithStore configures a relay whose store is wrapped by wrap.
func WithStore(wrap func(store.Store) store.Store, more func(*Config)) func(*Config) {
	return func(c *Config) {
		c.wrapStore = wrap
		if more != nil {
			more(c)
		}
	}
}

// MaxClientQueries and MaxSearches expose the read limits to the tests that pin them.
const (
	MaxClientQueries = maxClientQueries
	MaxSearches      = maxHeavyReads
	MaxHeavyReads    = maxHeavyReads
)

// Shared-database hooks for cluster_test.go: whether the node's change feed is up, and the
// name its feed connection carries in pg_stat_activity (so a test can cut exactly that one).
func FeedLive(r *Relay) bool { return r.shared != nil && r.shared.Live() }

func FeedName(r *Relay) string {
	n, _ := r.shared.(interface{ Node() string })
	if n == nil {
		return ""
	}
	return "buzz-relay-follow-" + n.Node()
}

// DMChannelID is the channel id of the DM of the sorted participant set (as anyone can compute).
func DMChannelID(sorted []string) string { return dmChannelID(sorted) }

// ResultBytes is the result budget held now and at most so far (results.go).
func ResultBytes(r *Relay) (now, peak int64) { return r.results.held.Load(), r.results.peak.Load() }

// PageTicket is the result budget one history page takes before it is read.
const PageTicket = pageTicket
