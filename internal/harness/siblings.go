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
	// maxStrangerLookups bounds the sibling lookups per channel that may find no sibling in a
	// siblingTTL window: past it, an unknown author there is a stranger without a relay read, so
	// thousands of throwaway keys mentioning the agent cost at most this many reads per channel
	// per window, not one each.
	maxStrangerLookups = 32
	// maxLookupWindows bounds the channels whose windows are remembered.
	maxLookupWindows = 4096
)

// lookupBudget is how many sibling lookups each channel has left in its window. A lookup takes
// one; one that finds a sibling gives it back, so only lookups that found nothing (the
// negative ones) use the budget up.
type lookupBudget struct {
	windows map[string]lookupWindow
}

type lookupWindow struct {
	used  int
	until time.Time
}

// take reports whether channel may start one more lookup at now, and counts it.
func (b *lookupBudget) take(channel string, now time.Time) bool {
	if b.windows == nil {
		b.windows = map[string]lookupWindow{}
	}
	w, ok := b.windows[channel]
	if !ok || !now.Before(w.until) {
		if len(b.windows) >= maxLookupWindows {
			for id, w := range b.windows {
				if !now.Before(w.until) {
					delete(b.windows, id)
				}
			}
			if len(b.windows) >= maxLookupWindows {
				return false // every remembered channel is busy: no lookups until one's window ends
			}
		}
		w = lookupWindow{until: now.Add(siblingTTL)}
	}
	if w.used >= maxStrangerLookups {
		return false
	}
	w.used++
	b.windows[channel] = w
	return true
}

// giveBack returns a lookup that found a sibling to channel's budget.
func (b *lookupBudget) giveBack(channel string) {
	if w, ok := b.windows[channel]; ok && w.used > 0 {
		w.used--
		b.windows[channel] = w
	}
}

// siblingCache remembers verdicts by author, each until its expiry. At the size bound it drops
// expired entries, and everything if that is not enough (upstream clears at 256 too).
type siblingCache struct {
	entries map[string]siblingVerdict
}

// siblingVerdict is what a lookup found about an author: a sibling of ours, and an agent at all
// (thread follow never lets an agent continue a thread; follow.go).
type siblingVerdict struct {
	sibling bool
	agent   bool
	failed  bool // the lookup failed: neither a sibling nor a person who may continue a thread
	until   time.Time
}

// admits reports whether the verdict lets an event in: a mention by a sibling (the gate refused
// its author otherwise), or a followed message (the gate admitted its author) by a person.
func (v siblingVerdict) admits(followed bool) bool {
	if followed {
		return !v.agent && !v.sibling && !v.failed
	}
	return v.sibling
}

func (c *siblingCache) get(author string, now time.Time) (siblingVerdict, bool) {
	v, ok := c.entries[author]
	if !ok || !now.Before(v.until) {
		return siblingVerdict{}, false
	}
	return v, true
}

func (c *siblingCache) put(author string, v siblingVerdict, ttl time.Duration, now time.Time) {
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
	v.until = now.Add(ttl)
	c.entries[author] = v
}

// siblingLookups is the loop's side: the cache, the events held per author while its lookup
// runs, and where finished lookups arrive.
type siblingLookups struct {
	cache  siblingCache
	budget lookupBudget
	held   map[string][]arriving
	done   chan siblingCheck
}

type siblingCheck struct {
	author  string
	channel string // whose budget the lookup took
	verdict siblingVerdict
	err     error
}

func newSiblingLookups() siblingLookups {
	return siblingLookups{held: map[string][]arriving{}, done: make(chan siblingCheck, 16)}
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
// when finishSiblingLookup has the verdict. An event that reached the agent by thread follow
// (not addressed to it) also needs an author who is not an agent: the owner is taken for a
// person, anyone else is looked up.
func (h *Harness) admit(ctx context.Context, c *channel, in arriving) gateVerdict {
	ev, followed := in.ev, in.followed
	switch {
	case !h.gate.Allows(ev.PubKey, c.Type) && (followed || !h.gate.siblingsCount(c.Type)):
		return gateDrop // a sibling is an agent: it never continues a thread on its own
	case h.gate.Allows(ev.PubKey, c.Type) && (!followed || ev.PubKey == h.cfg.Owner):
		return gateAccept
	}
	if v, ok := h.siblings.cache.get(ev.PubKey, h.clock.Now()); ok {
		if v.admits(followed) {
			return gateAccept
		}
		return gateDrop
	}
	held, running := h.siblings.held[ev.PubKey]
	if len(held) >= maxHeldPerAuthor {
		return gateDrop
	}
	if !running && !h.siblings.budget.take(c.ID, h.clock.Now()) {
		h.log.Debug("sibling lookups of this channel used up; treating the author as a stranger", "channel", c.ID, "author", ev.PubKey)
		return gateDrop
	}
	h.siblings.held[ev.PubKey] = append(held, in)
	if !running {
		author, channel := ev.PubKey, c.ID
		h.tasks.Go(func() {
			v, err := h.relay.lookupAuthor(ctx, author)
			select {
			case h.siblings.done <- siblingCheck{author: author, channel: channel, verdict: v, err: err}:
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
		h.log.Warn("sibling lookup failed; treating the author as a stranger whose messages do not continue a thread", "author", r.author, "err", r.err)
		r.verdict = siblingVerdict{failed: true} // a failed lookup never lets a follow-up in either
	}
	h.log.Debug("sibling lookup", "author", r.author, "sibling", r.verdict.sibling, "agent", r.verdict.agent)
	h.siblings.cache.put(r.author, r.verdict, ttl, h.clock.Now())
	if r.verdict.sibling {
		h.siblings.budget.giveBack(r.channel)
	}
	held := h.siblings.held[r.author]
	delete(h.siblings.held, r.author)
	for _, in := range held {
		ev := in.ev
		chID, _ := protocol.ChannelID(ev.Tags)
		c := h.chans.byID[chID]
		switch {
		case c == nil: // left meanwhile
		case r.verdict.admits(in.followed):
			if r.verdict.sibling {
				h.log.Info("sibling agent passes the author gate", "event", ev.ID, "author", ev.PubKey)
			}
			in.alone = len(held) == 1
			h.accept(ctx, c, in)
		default:
			h.skip(ev)
			h.log.Debug("author gate dropped event", "event", ev.ID, "author", ev.PubKey, "channel", chID)
		}
	}
}

// lookupAuthor fetches author's profile and agent profile: a sibling has an auth tag by our
// owner that verifies for it; an agent has any NIP-OA auth tag on its profile, or a kind-10100
// agent profile. An error is reported as such (the caller decides what it counts as).
func (rc *relayClient) lookupAuthor(ctx context.Context, author string) (siblingVerdict, error) {
	qctx, cancel := context.WithTimeout(ctx, siblingLookupTimeout)
	defer cancel()
	evs, err := rc.bridge.Query(qctx,
		client.Filter{Filter: nostr.Filter{Kinds: []int{protocol.KindProfile}, Authors: []string{author}, Limit: 1}},
		client.Filter{Filter: nostr.Filter{Kinds: []int{protocol.KindAgentProfile}, Authors: []string{author}, Limit: 1}})
	if err != nil {
		return siblingVerdict{}, err
	}
	var v siblingVerdict
	for i := range evs {
		switch ev := &evs[i]; {
		case ev.PubKey != author:
		case ev.Kind == protocol.KindAgentProfile:
			v.agent = true
		case ownerauth.IsSibling(ev, rc.cfg.Owner, rc.clock.Now().Unix()):
			v.sibling, v.agent = true, true
		case parseProfile(ev).IsAgent:
			v.agent = true
		}
	}
	return v, nil
}
