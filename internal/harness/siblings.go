package harness

import (
	"context"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/client"
	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/protocol/ownerauth"
)

// Siblings (NIP-OA): agents whose kind-0 profile carries an auth tag by our owner that verifies
// for them. They pass the owner-only and allowlist gates as the owner does. Finding out takes a
// relay read, so it runs off the loop: the event waits (held, not yet accepted) until its
// author's lookup ends, and the verdict is cached. Every failure — timeout, relay error, no
// profile, a tag that does not verify — means "not a sibling".

const (
	siblingLookupTimeout = 2 * time.Second
	siblingCacheSize     = 256
	siblingTTL           = 10 * time.Minute // a revoked or changed profile is noticed within this
	siblingErrTTL        = 30 * time.Second // a failed lookup is not retried for every event
	maxHeldPerAuthor     = 64               // events beyond this, while a lookup runs, are dropped
)

// siblingCache remembers verdicts by author, each until its expiry. At the size bound it drops
// expired entries, and everything if that is not enough (upstream clears at 256 too).
type siblingCache struct {
	entries map[string]siblingVerdict
}

type siblingVerdict struct {
	sibling bool
	until   time.Time
}

func (c *siblingCache) get(author string, now time.Time) (sibling, ok bool) {
	v, ok := c.entries[author]
	if !ok || !now.Before(v.until) {
		return false, false
	}
	return v.sibling, true
}

func (c *siblingCache) put(author string, sibling bool, ttl time.Duration, now time.Time) {
	if c.entries == nil {
		c.entries = map[string]siblingVerdict{}
	}
	if len(c.entries) >= siblingCacheSize {
		for a, v := range c.entries {
			if !now.Before(v.until) {
				delete(c.entries, a)
			}
		}
		if len(c.entries) >= siblingCacheSize {
			clear(c.entries)
		}
	}
	c.entries[author] = siblingVerdict{sibling: sibling, until: now.Add(ttl)}
}

// siblingLookups is the loop's side: the cache, the events held per author while its lookup
// runs, and where finished lookups arrive.
type siblingLookups struct {
	cache siblingCache
	held  map[string][]*nostr.Event
	done  chan siblingCheck
}

type siblingCheck struct {
	author  string
	sibling bool
	err     error
}

func newSiblingLookups() siblingLookups {
	return siblingLookups{held: map[string][]*nostr.Event{}, done: make(chan siblingCheck, 16)}
}

// gateVerdict is what the author gate says about an event.
type gateVerdict int

const (
	gateDrop gateVerdict = iota
	gateAccept
	gateHeld // waiting for its author's sibling lookup
)

// siblingsCount reports whether a sibling would pass where the gate refused author: the modes
// where the owner passes, in a channel type where more than the owner may be answered.
func (g Gate) siblingsCount(t protocol.ChannelType) bool {
	if g.Owner == "" || ownerOnly(t) {
		return false
	}
	return g.Mode == RespondOwnerOnly || g.Mode == RespondAllowlist
}

// admit runs the author gate, siblings included. A gateHeld event is accepted or skipped later,
// when finishSiblingLookup has the verdict.
func (h *Harness) admit(ctx context.Context, c *channel, ev *nostr.Event) gateVerdict {
	if h.gate.Allows(ev.PubKey, c.Type) {
		return gateAccept
	}
	if !h.gate.siblingsCount(c.Type) {
		return gateDrop
	}
	if sib, ok := h.siblings.cache.get(ev.PubKey, h.clock.Now()); ok {
		if sib {
			return gateAccept
		}
		return gateDrop
	}
	held, running := h.siblings.held[ev.PubKey]
	if len(held) >= maxHeldPerAuthor {
		return gateDrop
	}
	h.siblings.held[ev.PubKey] = append(held, ev)
	if !running {
		author := ev.PubKey
		h.tasks.Go(func() {
			sib, err := h.relay.isSibling(ctx, author)
			select {
			case h.siblings.done <- siblingCheck{author: author, sibling: sib, err: err}:
			case <-ctx.Done():
			}
		})
	}
	return gateHeld
}

// finishSiblingLookup caches a verdict and settles the events its author sent meanwhile.
func (h *Harness) finishSiblingLookup(ctx context.Context, r siblingCheck) {
	ttl := siblingTTL
	if r.err != nil {
		ttl = siblingErrTTL
		h.log.Warn("sibling lookup failed; treating the author as a stranger", "author", r.author, "err", r.err)
	}
	h.log.Debug("sibling lookup", "author", r.author, "sibling", r.sibling)
	h.siblings.cache.put(r.author, r.sibling, ttl, h.clock.Now())
	held := h.siblings.held[r.author]
	delete(h.siblings.held, r.author)
	for _, ev := range held {
		chID, _ := protocol.ChannelID(ev.Tags)
		c := h.chans.byID[chID]
		switch {
		case c == nil: // left meanwhile
		case r.sibling:
			h.log.Info("sibling agent passes the author gate", "event", ev.ID, "author", ev.PubKey)
			h.accept(ctx, c, ev)
		default:
			h.skip(ev)
			h.log.Debug("author gate dropped event", "event", ev.ID, "author", ev.PubKey, "channel", chID)
		}
	}
}

// isSibling fetches author's profile and checks its auth tag against our owner. An error is
// reported as such (and counts as not a sibling).
func (rc *relayClient) isSibling(ctx context.Context, author string) (bool, error) {
	qctx, cancel := context.WithTimeout(ctx, siblingLookupTimeout)
	defer cancel()
	evs, err := rc.bridge.Query(qctx, client.Filter{Filter: nostr.Filter{Kinds: []int{protocol.KindProfile}, Authors: []string{author}, Limit: 1}})
	if err != nil {
		return false, err
	}
	for i := range evs {
		if evs[i].PubKey == author && ownerauth.IsSibling(&evs[i], rc.cfg.Owner) {
			return true, nil
		}
	}
	return false, nil
}
