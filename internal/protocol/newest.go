package protocol

import (
	"slices"

	"github.com/nbd-wtf/go-nostr"
)

// NewestBy keeps one event per key, the newest (a relay may return several versions of
// replaceable state), ordered newest first. Of two versions with the same created_at the lower
// id wins, as NIP-01 says, so the result never depends on the relay's order.
func NewestBy(evs []nostr.Event, key func(*nostr.Event) string) []nostr.Event {
	best := map[string]int{}
	for i := range evs {
		k := key(&evs[i])
		if j, ok := best[k]; !ok || newer(&evs[i], &evs[j]) {
			best[k] = i
		}
	}
	out := make([]nostr.Event, 0, len(best))
	for _, i := range best {
		out = append(out, evs[i])
	}
	slices.SortFunc(out, func(a, b nostr.Event) int {
		if newer(&a, &b) {
			return -1
		}
		if newer(&b, &a) {
			return 1
		}
		return 0
	})
	return out
}

// NewestByD keeps the newest version of each addressable event (one per d tag).
func NewestByD(evs []nostr.Event) []nostr.Event {
	return NewestBy(evs, func(ev *nostr.Event) string { return TagValue(ev.Tags, "d") })
}

// NewestByAuthor keeps each author's newest event (a replaceable kind such as a profile).
func NewestByAuthor(evs []nostr.Event) []nostr.Event {
	return NewestBy(evs, func(ev *nostr.Event) string { return ev.PubKey })
}

func newer(a, b *nostr.Event) bool {
	if a.CreatedAt != b.CreatedAt {
		return a.CreatedAt > b.CreatedAt
	}
	return a.ID < b.ID
}
