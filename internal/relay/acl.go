package relay

import (
	"maps"
	"slices"
	"sync"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/relay/store"
)

// acl mirrors channel state in memory and is the one place read access is decided: the live
// path asks canSee, and every stored query carries the Access built here (the store applies it
// and has no rule of its own). The store is the source of truth for channel state; the admin
// path updates the mirror after each committed change.
type acl struct {
	mu sync.RWMutex
	ch map[string]*store.Channel

	// readable caches each reader's readable channel list until the next channel change.
	readable map[string][]string
}

// pGatedKinds are readable only by the pubkey in their p tag (gift wraps, observer frames,
// membership notices, hidden-DM snapshots).
var pGatedKinds = []int{protocol.KindGiftWrap, protocol.KindObserverFrame, protocol.KindMemberAdded, protocol.KindMemberRemoved, protocol.KindDMVisibility}

// personalKinds are readable only by their author or the pubkey in their p tag (NIP-AE
// engrams: an agent's memory; NIP-AM turn metrics: the agent and its owner).
var personalKinds = []int{protocol.KindEngram, protocol.KindTurnMetric}

// authorOnlyKinds are readable only by their author: NIP-ER reminders, whose existence, count
// and schedule nobody else may learn.
var authorOnlyKinds = []int{protocol.KindPrivateReminder}

// maxReadableCache bounds the per-reader cache; it is simply dropped when full.
const maxReadableCache = 4096

func newACL(chans []store.Channel) *acl {
	a := &acl{ch: map[string]*store.Channel{}, readable: map[string][]string{}}
	for i := range chans {
		c := chans[i]
		a.ch[c.ID] = &c
	}
	return a
}

// get returns a deep copy of a channel (safe to mutate) and whether it exists.
func (a *acl) get(id string) (store.Channel, bool) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	c, ok := a.ch[id]
	if !ok {
		return store.Channel{}, false
	}
	cp := *c
	cp.Members = maps.Clone(c.Members)
	return cp, true
}

func (a *acl) put(c store.Channel) {
	a.mu.Lock()
	a.ch[c.ID] = &c
	clear(a.readable)
	a.mu.Unlock()
}

// readableBy is the read rule for channels: open channels are readable by everyone,
// private ones by members, deleted ones by nobody.
func readableBy(c *store.Channel, pubkey string) bool {
	if c.Deleted {
		return false
	}
	if c.Visibility != protocol.VisibilityPrivate {
		return true
	}
	_, member := c.Members[pubkey]
	return member
}

func (a *acl) canRead(pubkey, id string) bool {
	a.mu.RLock()
	defer a.mu.RUnlock()
	c, ok := a.ch[id]
	return ok && readableBy(c, pubkey)
}

// access is what pubkey may read from the store.
func (a *acl) access(pubkey string) store.Access {
	return store.Access{Pubkey: pubkey, Channels: a.readableChannels(pubkey), PGated: pGatedKinds, Personal: personalKinds, AuthorOnly: authorOnlyKinds}
}

func (a *acl) readableChannels(pubkey string) []string {
	a.mu.RLock()
	list, ok := a.readable[pubkey]
	a.mu.RUnlock()
	if ok {
		return list
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	list = []string{}
	for id, c := range a.ch {
		if readableBy(c, pubkey) {
			list = append(list, id)
		}
	}
	if len(a.readable) >= maxReadableCache {
		clear(a.readable)
	}
	a.readable[pubkey] = list
	return list
}

// private reports whether the channel exists and is private.
func (a *acl) private(id string) bool {
	a.mu.RLock()
	defer a.mu.RUnlock()
	c, ok := a.ch[id]
	return ok && c.Visibility == protocol.VisibilityPrivate
}

func isPGated(kind int) bool { return slices.Contains(pGatedKinds, kind) }

// relayAccess is the relay's own view for internal lookups: global events only.
func (r *Relay) relayAccess() store.Access { return store.Access{Channels: []string{}} }

// canSee is the per-subscriber check at live fan-out time.
func (r *Relay) canSee(pubkey string, ev *nostr.Event, channelID string) bool {
	if pubkey == "" {
		return false
	}
	if isPGated(ev.Kind) && !ev.Tags.ContainsAny("p", []string{pubkey}) {
		return false
	}
	if slices.Contains(personalKinds, ev.Kind) && ev.PubKey != pubkey && !ev.Tags.ContainsAny("p", []string{pubkey}) {
		return false
	}
	if slices.Contains(authorOnlyKinds, ev.Kind) && ev.PubKey != pubkey {
		return false
	}
	if channelID != "" && !r.acl.canRead(pubkey, channelID) {
		return false
	}
	return true
}
