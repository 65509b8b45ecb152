package relay

import (
	"maps"
	"slices"
	"sync"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/relay/store"
)

// acl mirrors channel state in memory. The store is the source of truth; the admin path
// updates the mirror after each committed change.
type acl struct {
	mu sync.RWMutex
	ch map[string]*store.Channel
}

func newACL(chans []store.Channel) *acl {
	a := &acl{ch: map[string]*store.Channel{}}
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
	a.mu.Unlock()
}

// canRead: open channels are readable by everyone, private ones by members, deleted by nobody.
func (a *acl) canRead(pubkey, id string) bool {
	a.mu.RLock()
	defer a.mu.RUnlock()
	c, ok := a.ch[id]
	if !ok || c.Deleted {
		return false
	}
	if c.Visibility != protocol.VisibilityPrivate {
		return true
	}
	_, member := c.Members[pubkey]
	return member
}

// private reports whether the channel exists and is private.
func (a *acl) private(id string) bool {
	a.mu.RLock()
	defer a.mu.RUnlock()
	c, ok := a.ch[id]
	return ok && c.Visibility == protocol.VisibilityPrivate
}

func isPGated(kind int) bool { return slices.Contains(store.PGatedKinds, kind) }

// canSee is the per-subscriber check at live fan-out time.
func (r *Relay) canSee(pubkey string, ev *nostr.Event, channelID string) bool {
	if pubkey == "" {
		return false
	}
	if isPGated(ev.Kind) && !ev.Tags.ContainsAny("p", []string{pubkey}) {
		return false
	}
	if slices.Contains(store.OwnerOnlyKinds, ev.Kind) && ev.PubKey != pubkey && !ev.Tags.ContainsAny("p", []string{pubkey}) {
		return false
	}
	if channelID != "" && !r.acl.canRead(pubkey, channelID) {
		return false
	}
	return true
}
