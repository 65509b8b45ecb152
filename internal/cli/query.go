package cli

import (
	"context"

	"github.com/buzz-harness/buzz/internal/client"
	"github.com/nbd-wtf/go-nostr"
)

// pageSize is the CLI's /query page (upstream).
const pageSize = 500

// queryAll pages through f with the (until, before_id) keyset cursor until limit events are
// collected or a short page ends the data.
func queryAll(ctx context.Context, b *client.Bridge, f nostr.Filter, limit int) ([]nostr.Event, error) {
	var out []nostr.Event
	seen := map[string]bool{}
	cur := client.Filter{Filter: f}
	for len(out) < limit {
		cur.Limit = min(pageSize, limit-len(out))
		page, err := b.Query(ctx, cur)
		if err != nil {
			return nil, err
		}
		fresh := 0
		for _, ev := range page {
			if !seen[ev.ID] {
				seen[ev.ID] = true
				out = append(out, ev)
				fresh++
			}
		}
		if len(page) < cur.Limit || fresh == 0 {
			break // short page, or a relay that ignores the cursor: stop rather than loop
		}
		last := page[len(page)-1]
		until := last.CreatedAt
		cur.Until = &until
		cur.BeforeID = last.ID
	}
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// queryOne returns the first event matching f, or nil.
func queryOne(ctx context.Context, b *client.Bridge, f nostr.Filter) (*nostr.Event, error) {
	f.Limit = 1
	evs, err := b.Query(ctx, client.Filter{Filter: f})
	if err != nil || len(evs) == 0 {
		return nil, err
	}
	return &evs[0], nil
}

// queryNewest runs one filter and returns the newest matching event, or nil.
func queryNewest(ctx context.Context, b *client.Bridge, f nostr.Filter) (*nostr.Event, error) {
	evs, err := b.Query(ctx, client.Filter{Filter: f})
	if err != nil {
		return nil, err
	}
	return newest(evs), nil
}

// newest returns the newest event of evs, or nil.
func newest(evs []nostr.Event) *nostr.Event {
	var best *nostr.Event
	for i := range evs {
		if best == nil || evs[i].CreatedAt > best.CreatedAt {
			best = &evs[i]
		}
	}
	return best
}

func ts(t nostr.Timestamp) *nostr.Timestamp { return &t }
