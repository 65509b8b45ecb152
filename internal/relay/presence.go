package relay

import (
	"errors"
	"sync"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/relay/store"
)

// Presence (kind 20001) is ephemeral: it is fanned out and never stored. Like upstream, which
// keeps it in Redis, the relay remembers each pubkey's latest status so that the bridge can
// answer "who is online" (users presence) with relay-signed 20001 events.
const (
	// presenceTTL forgets a status not refreshed in time (buzz-acp refreshes every 60 s), so a
	// crashed client does not stay "online" forever.
	presenceTTL       = 150 * time.Second
	maxPresenceStatus = 128 // bytes of status kept, as upstream truncates it
	maxPresenceKeys   = 100_000
	// maxPresenceAuthors bounds the distinct pubkeys one query asks about: each answered one is
	// an event the relay signs (one key named 7,700 times cost 0.39 CPU-s and a 3.3 MB answer).
	maxPresenceAuthors = 500
)

type presenceEntry struct {
	status string
	at     time.Time
}

// presenceBook is every pubkey's latest status, safe for concurrent use.
type presenceBook struct {
	mu sync.Mutex
	m  map[string]presenceEntry
}

// note records a presence event: "offline" (or an empty status) forgets the pubkey.
func (p *presenceBook) note(ev *nostr.Event, now time.Time) {
	status := ev.Content
	if len(status) > maxPresenceStatus {
		status = status[:maxPresenceStatus]
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[string]presenceEntry{}
	}
	if status == "" || status == "offline" {
		delete(p.m, ev.PubKey)
		return
	}
	if _, known := p.m[ev.PubKey]; !known && len(p.m) >= maxPresenceKeys {
		for pk, e := range p.m {
			if now.Sub(e.at) > presenceTTL {
				delete(p.m, pk)
			}
		}
		if len(p.m) >= maxPresenceKeys {
			return // full of live entries: drop the newcomer rather than grow without bound
		}
	}
	p.m[ev.PubKey] = presenceEntry{status: status, at: now}
}

// get returns pubkey's live status.
func (p *presenceBook) get(pubkey string, now time.Time) (presenceEntry, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e, ok := p.m[pubkey]
	if !ok || now.Sub(e.at) > presenceTTL {
		return presenceEntry{}, false
	}
	return e, true
}

// isPresenceQuery reports a filter asking for named pubkeys' presence: one kind, 20001 or
// upstream's 40902, and authors.
func isPresenceQuery(f nostr.Filter) bool {
	return len(f.Kinds) == 1 && (f.Kinds[0] == protocol.KindPresence || f.Kinds[0] == protocol.KindPresenceQuery) && len(f.Authors) > 0
}

// presenceAuthors checks the presence filters of one query: together they name at most
// maxPresenceAuthors distinct pubkeys (repeats count once, as they are answered once).
func presenceAuthors(filters []store.Filter) error {
	distinct := map[string]bool{}
	for _, f := range filters {
		if !isPresenceQuery(f.Filter) {
			continue
		}
		for _, pk := range f.Authors {
			distinct[pk] = true
		}
		if len(distinct) > maxPresenceAuthors {
			return errors.New(protocol.ReasonInvalid.Msgf("a presence query names at most %d distinct authors", maxPresenceAuthors))
		}
	}
	return nil
}

// presenceEvents answers a presence query: one relay-signed 20001 per author with a live
// status, content the status, ["p", author], created_at when it was last heard. answered holds
// the authors already answered by this query's other filters; each is answered once.
func (r *Relay) presenceEvents(f nostr.Filter, answered map[string]bool) []nostr.Event {
	now := r.now()
	var out []nostr.Event
	for _, pk := range f.Authors {
		if answered[pk] {
			continue
		}
		answered[pk] = true
		e, ok := r.presence.get(pk, now)
		if !ok {
			continue
		}
		ev := nostr.Event{Kind: protocol.KindPresence, Content: e.status, CreatedAt: nostr.Timestamp(e.at.Unix()), Tags: nostr.Tags{{"p", pk}}}
		if err := protocol.Sign(&ev, r.sk); err != nil {
			r.log.Error("sign presence", "err", err)
			continue
		}
		out = append(out, ev)
		if f.Limit > 0 && len(out) == f.Limit {
			break
		}
	}
	return out
}
