package relay

import (
	"context"
	"encoding/json"
	"net/http"
	"sort"
	"strconv"
	"sync"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/relay/store"
)

type stampKey struct {
	kind    int
	channel string
}

// nextStamp gives relay-signed events a created_at strictly greater than the previous one of
// the same (kind, channel), so rapid successive state updates are never lost to NIP-01's
// replaceable tie-breaking. The caller holds the channel's admin lock (submitAdmin), which is
// what keeps one (kind, channel)'s stamps in order; stampMu only guards the map, so one
// channel's database read does not hold up another's stamp.
func (r *Relay) nextStamp(ctx context.Context, kind int, channel string, fresh bool) (nostr.Timestamp, error) {
	k := stampKey{kind, channel}
	r.stampMu.Lock()
	last, ok := r.stamps[k]
	r.stampMu.Unlock()
	// Other nodes stamp too: read the newest from the database, under the channel's
	// cross-node lock, so stamps keep increasing across nodes.
	// A channel this admin event creates has no events yet (the rules refuse to create one that
	// exists, deleted or not): asking the database would scan every channel's relay events of
	// this kind, and creating N channels cost O(N²).
	if !fresh && (!ok || r.shared != nil) {
		scope := channel
		if kind == protocol.KindMemberAdded || kind == protocol.KindMemberRemoved {
			scope = "" // stored global
		}
		var err error
		if last, err = r.st.LatestCreatedAt(ctx, r.pk, kind, scope); err != nil {
			return 0, err
		}
	}
	ts := r.now().Unix()
	if ts <= last {
		ts = last + 1
	}
	r.stampMu.Lock()
	r.stamps[k] = ts
	r.stampMu.Unlock()
	return nostr.Timestamp(ts), nil
}

func (r *Relay) signRelay(ctx context.Context, kind int, channel string, fresh bool, tags nostr.Tags, content string) (*nostr.Event, error) {
	ts := nostr.Timestamp(r.now().Unix())
	// Membership notices are regular events: bumping them ahead of the clock would date them
	// after messages sent in the same second, and subscribers replay from a notice's time.
	if kind != protocol.KindMemberAdded && kind != protocol.KindMemberRemoved {
		var err error
		if ts, err = r.nextStamp(ctx, kind, channel, fresh); err != nil {
			return nil, err
		}
	}
	ev := &nostr.Event{Kind: kind, CreatedAt: ts, Tags: tags, Content: content}
	if err := protocol.Sign(ev, r.sk); err != nil {
		return nil, err
	}
	return ev, nil
}

// channelLocks serializes admin actions per channel: each checks the channel's state, then
// writes the change. An entry lives only while its lock is held or awaited, so the map holds
// the channels being changed right now, not every channel ever changed.
type channelLocks struct {
	mu sync.Mutex
	m  map[string]*channelLock
}

type channelLock struct {
	sem   chan struct{} // holds a token while locked
	users int           // holding or waiting; guarded by channelLocks.mu
}

// lock takes id's lock and returns its release.
func (l *channelLocks) lock(id string) (unlock func()) {
	l.mu.Lock()
	if l.m == nil {
		l.m = map[string]*channelLock{}
	}
	e := l.m[id]
	if e == nil {
		e = &channelLock{sem: make(chan struct{}, 1)}
		l.m[id] = e
	}
	e.users++
	l.mu.Unlock()
	e.sem <- struct{}{}
	return func() {
		<-e.sem
		l.mu.Lock()
		if e.users--; e.users == 0 {
			delete(l.m, id)
		}
		l.mu.Unlock()
	}
}

// held is how many channels' locks are held or awaited (tests).
func (l *channelLocks) held() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.m)
}

// submitAdmin validates and applies a NIP-29 admin event (9000-9022), then stores it together
// with the relay-signed state (39000/39001/39002), a 40099 system message and 44100/44101
// notices in one transaction, and fans all of them out.
// Admin actions on different channels run concurrently; on one channel, one at a time.
func (r *Relay) submitAdmin(ctx context.Context, ev *nostr.Event, chID string) result {
	defer r.admin.lock(chID)()
	if r.shared != nil {
		// Other nodes act on this channel too: hold its lock across them, and decide on the
		// channel as the database has it now, not as this node's mirror last heard.
		unlock, err := r.shared.LockChannel(ctx, chID)
		if err != nil {
			return errNoDatabase
		}
		defer unlock()
		if err := r.reloadChannel(ctx, chID); err != nil {
			return errNoDatabase
		}
	}
	if old, _, err := r.st.Event(ctx, ev.ID); err == nil && old != nil {
		if ev.Kind == protocol.KindDMOpen {
			// The same open sent twice (same second, same keys): still name the DM, which
			// is all the sender needs from the answer.
			return accepted(protocol.Response(`{"channel_id":"` + chID + `","created":false}`))
		}
		return accepted(store.ErrDuplicate.Error())
	}
	plan, res, ok := r.planAdmin(ctx, ev, chID)
	if !ok {
		return res
	}
	// Build the relay-signed events before writing so they commit with the admin event.
	var relayEvents []*nostr.Event
	add := func(kind int, tags nostr.Tags, content string) error {
		e, err := r.signRelay(ctx, kind, chID, plan.fresh, tags, content)
		if err == nil {
			relayEvents = append(relayEvents, e)
		}
		return err
	}
	next := plan.ch
	for pk, role := range plan.put {
		next.Members[pk] = role
	}
	for _, pk := range plan.remove {
		delete(next.Members, pk)
	}
	var err error
	if plan.state {
		if err == nil {
			err = add(protocol.KindGroupMetadata, metadataTags(next), "")
		}
		if err == nil {
			err = add(protocol.KindGroupAdmins, adminTags(next), "")
		}
		if err == nil {
			err = add(protocol.KindGroupMembers, memberTags(next), "")
		}
	}
	if err == nil && (plan.system != nil || plan.systemBody != "") {
		body := plan.systemBody
		if body == "" {
			raw, _ := json.Marshal(plan.system)
			body = string(raw)
		}
		err = add(protocol.KindSystemMessage, nostr.Tags{{"h", chID}}, body)
	}
	notice := func(kind int, typ string, targets []string) {
		for _, target := range targets {
			if err != nil {
				return
			}
			// event_id (the admin event) keeps two notices of the same kind within one second —
			// added, removed, added again — from being one event with one id.
			body, _ := json.Marshal(map[string]string{"type": typ, "channel_id": chID, "actor": ev.PubKey, "event_id": ev.ID})
			err = add(kind, nostr.Tags{{"p", target}, {"h", chID}}, string(body))
		}
	}
	notice(protocol.KindMemberAdded, "member_added", plan.added)
	notice(protocol.KindMemberRemoved, "member_removed", plan.removed)
	if err != nil {
		r.log.Error("sign relay event", "err", err)
		return rejected(http.StatusInternalServerError, protocol.ReasonError.Msg("could not sign channel state"))
	}
	now := r.now().Unix()
	err = r.st.Update(ctx, func(tx store.Tx) error {
		if err := tx.PutChannel(next); err != nil {
			return err
		}
		if err := tx.SaveEvent(ev, chID); err != nil {
			return err
		}
		for pk, role := range plan.put {
			if err := tx.PutMember(chID, pk, role, now); err != nil {
				return err
			}
		}
		for _, pk := range plan.remove {
			if err := tx.RemoveMember(chID, pk); err != nil {
				return err
			}
		}
		if plan.deleteID != "" {
			if _, err := tx.SoftDelete([]string{plan.deleteID}, "", now); err != nil {
				return err
			}
		}
		for _, e := range relayEvents {
			if err := tx.SaveEvent(e, storageChannel(e)); err != nil {
				return err
			}
		}
		return nil
	})
	if res, done := r.storeOutcome(err); done {
		return res
	}
	r.acl.put(next)
	r.metrics.storedKind(ev.Kind)
	r.broadcast(ev, chID)
	for _, e := range relayEvents {
		r.metrics.storedKind(e.Kind)
		r.broadcast(e, storageChannel(e))
	}
	if next.Visibility == protocol.VisibilityPrivate {
		for _, pk := range plan.remove {
			r.revoke(pk, chID)
		}
	}
	return accepted(plan.reply)
}

func parseTTL(ev *nostr.Event) (int64, bool) {
	s := protocol.TagValue(ev.Tags, "ttl")
	if s == "" {
		return 0, true
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && n >= 0
}

// metadataTags is the kind 39000 shape of relay-and-cli.md §1.5.
func metadataTags(c store.Channel) nostr.Tags {
	tags := nostr.Tags{{"d", c.ID}, {"name", c.Name}}
	if c.About != "" {
		tags = append(tags, nostr.Tag{"about", c.About})
	}
	if c.Visibility == protocol.VisibilityPrivate {
		tags = append(tags, nostr.Tag{"private"})
	} else {
		tags = append(tags, nostr.Tag{"public"})
	}
	if c.Type == protocol.TypeDM {
		// Upstream lists a DM's participants on its metadata, so clients find their DMs
		// with one #p query.
		tags = append(tags, nostr.Tag{"hidden"})
		for _, pk := range sortedMembers(c) {
			tags = append(tags, nostr.Tag{"p", pk})
		}
	}
	tags = append(tags, nostr.Tag{"closed"}, nostr.Tag{"t", c.Type})
	if c.Topic != "" {
		tags = append(tags, nostr.Tag{"topic", c.Topic})
	}
	if c.Purpose != "" {
		tags = append(tags, nostr.Tag{"purpose", c.Purpose})
	}
	if c.Archived {
		tags = append(tags, nostr.Tag{"archived", "true"})
	}
	if c.TTL > 0 {
		tags = append(tags, nostr.Tag{"ttl", strconv.FormatInt(c.TTL, 10)})
	}
	return tags
}

func sortedMembers(c store.Channel) []string {
	pks := make([]string, 0, len(c.Members))
	for pk := range c.Members {
		pks = append(pks, pk)
	}
	sort.Strings(pks)
	return pks
}

// adminTags is kind 39001: ["p", pubkey, role] for owners and admins.
func adminTags(c store.Channel) nostr.Tags {
	tags := nostr.Tags{{"d", c.ID}}
	for _, pk := range sortedMembers(c) {
		if role := c.Members[pk]; isManager(role) {
			tags = append(tags, nostr.Tag{"p", pk, role})
		}
	}
	return tags
}

// memberTags is kind 39002: ["p", pubkey, "", role] for every member.
func memberTags(c store.Channel) nostr.Tags {
	tags := nostr.Tags{{"d", c.ID}}
	for _, pk := range sortedMembers(c) {
		tags = append(tags, nostr.Tag{"p", pk, "", c.Members[pk]})
	}
	return tags
}
