package relay

import (
	"context"
	"encoding/json"
	"net/http"
	"sort"
	"strconv"

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
// replaceable tie-breaking.
func (r *Relay) nextStamp(ctx context.Context, kind int, channel string) (nostr.Timestamp, error) {
	r.stampMu.Lock()
	defer r.stampMu.Unlock()
	k := stampKey{kind, channel}
	last, ok := r.stamps[k]
	if !ok {
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
	r.stamps[k] = ts
	return nostr.Timestamp(ts), nil
}

func (r *Relay) signRelay(ctx context.Context, kind int, channel string, tags nostr.Tags, content string) (*nostr.Event, error) {
	ts := nostr.Timestamp(r.now().Unix())
	// Membership notices are regular events: bumping them ahead of the clock would date them
	// after messages sent in the same second, and subscribers replay from a notice's time.
	if kind != protocol.KindMemberAdded && kind != protocol.KindMemberRemoved {
		var err error
		if ts, err = r.nextStamp(ctx, kind, channel); err != nil {
			return nil, err
		}
	}
	ev := &nostr.Event{Kind: kind, CreatedAt: ts, Tags: tags, Content: content}
	if err := ev.Sign(r.sk); err != nil {
		return nil, err
	}
	return ev, nil
}

// adminPlan is what an accepted admin event changes.
type adminPlan struct {
	ch       store.Channel
	put      map[string]string // pubkey -> role
	remove   []string
	deleteID string            // 9005 target
	system   map[string]string // 40099 content; nil = none
	added    []string          // 44100 targets
	removed  []string          // 44101 targets
	state    bool              // re-emit 39000/39001/39002
}

func isManager(role string) bool { return role == protocol.RoleOwner || role == protocol.RoleAdmin }

func owners(ch store.Channel) int {
	n := 0
	for _, role := range ch.Members {
		if role == protocol.RoleOwner {
			n++
		}
	}
	return n
}

func deny(msg string) result { return rejected(http.StatusBadRequest, msg) }

// submitAdmin validates and applies a NIP-29 admin event (9000-9022), then stores it together
// with the relay-signed state (39000/39001/39002), a 40099 system message and 44100/44101
// notices in one transaction, and fans all of them out.
func (r *Relay) submitAdmin(ctx context.Context, ev *nostr.Event, chID string) result {
	r.admin.Lock()
	defer r.admin.Unlock()
	if old, _, err := r.st.Event(ctx, ev.ID); err == nil && old != nil {
		return accepted(store.ErrDuplicate.Error())
	}
	plan, res, ok := r.planAdmin(ctx, ev, chID)
	if !ok {
		return res
	}
	// Build the relay-signed events before writing so they commit with the admin event.
	var relayEvents []*nostr.Event
	add := func(kind int, tags nostr.Tags, content string) error {
		e, err := r.signRelay(ctx, kind, chID, tags, content)
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
	if err == nil && plan.system != nil {
		body, _ := json.Marshal(plan.system)
		err = add(protocol.KindSystemMessage, nostr.Tags{{"h", chID}}, string(body))
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
		return rejected(http.StatusInternalServerError, "error: could not sign channel state")
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
	if res, done := storeOutcome(err); done {
		return res
	}
	r.acl.put(next)
	r.broadcast(ev, chID)
	for _, e := range relayEvents {
		r.broadcast(e, storageChannel(e))
	}
	if next.Visibility == protocol.VisibilityPrivate {
		for _, pk := range plan.remove {
			r.revoke(pk, chID)
		}
	}
	return accepted("")
}

// planAdmin applies Buzz's NIP-29 rules to one admin event against the current channel state.
func (r *Relay) planAdmin(ctx context.Context, ev *nostr.Event, chID string) (adminPlan, result, bool) {
	actor := ev.PubKey
	ch, exists := r.acl.get(chID)
	plan := adminPlan{ch: ch, put: map[string]string{}, state: true}
	if ev.Kind == protocol.KindCreateGroup {
		if exists {
			return plan, deny("invalid: channel already exists"), false
		}
		name := protocol.TagValue(ev.Tags, "name")
		if name == "" {
			return plan, deny("invalid: channel name is required"), false
		}
		vis := protocol.TagValue(ev.Tags, "visibility")
		if vis == "" {
			vis = protocol.VisibilityOpen
		}
		if vis != protocol.VisibilityOpen && vis != protocol.VisibilityPrivate {
			return plan, deny("invalid: visibility must be open or private"), false
		}
		typ := protocol.TagValue(ev.Tags, "channel_type")
		if typ == "" {
			typ = protocol.TypeStream
		}
		if typ != protocol.TypeStream && typ != protocol.TypeForum {
			return plan, deny("invalid: channel_type must be stream or forum"), false
		}
		ttl, ok := parseTTL(ev)
		if !ok {
			return plan, deny("invalid: ttl must be a non-negative number of seconds"), false
		}
		plan.ch = store.Channel{
			ID: chID, Name: name, About: protocol.TagValue(ev.Tags, "about"), Visibility: vis, Type: typ,
			TTL: ttl, CreatedBy: actor, CreatedAt: int64(ev.CreatedAt), Members: map[string]string{},
		}
		plan.put[actor] = protocol.RoleOwner
		plan.system = map[string]string{"type": "channel_created", "actor": actor}
		plan.added = []string{actor}
		return plan, result{}, true
	}
	if !exists || ch.Deleted {
		return plan, deny("invalid: unknown channel"), false
	}
	actorRole := ch.Members[actor]
	if ch.Archived && ev.Kind != protocol.KindEditMetadata && ev.Kind != protocol.KindLeaveRequest {
		return plan, deny("restricted: channel is archived"), false
	}
	private := ch.Visibility == protocol.VisibilityPrivate
	switch ev.Kind {
	case protocol.KindPutUser:
		target, err := protocol.ParsePubkey(protocol.TagValue(ev.Tags, "p"))
		if err != nil {
			return plan, deny("invalid: p tag must name the member's pubkey"), false
		}
		role := protocol.TagValue(ev.Tags, "role")
		if role == "" {
			role = protocol.RoleMember
		}
		if !protocol.ValidRole(role) {
			return plan, deny("invalid: role must be owner, admin, member, guest or bot"), false
		}
		current, already := ch.Members[target]
		switch {
		case private && !isManager(actorRole):
			return plan, deny("restricted: only owners and admins can add members to a private channel"), false
		case (already || role != protocol.RoleMember) && !isManager(actorRole):
			return plan, deny("restricted: only owners and admins can change roles"), false
		case role == protocol.RoleOwner && actorRole != protocol.RoleOwner:
			return plan, deny("restricted: only owners can grant the owner role"), false
		case current == protocol.RoleOwner && role != protocol.RoleOwner && owners(ch) == 1:
			return plan, deny("restricted: cannot demote the last owner"), false
		}
		if already && current == role {
			plan.state = false // nothing changes; keep the event, skip re-emission
			return plan, result{}, true
		}
		plan.put[target] = role
		if already {
			plan.system = map[string]string{"type": "role_changed", "actor": actor, "target": target, "role": role}
		} else {
			plan.system = map[string]string{"type": "member_joined", "actor": actor, "target": target}
			plan.added = []string{target}
		}
	case protocol.KindRemoveUser:
		target, err := protocol.ParsePubkey(protocol.TagValue(ev.Tags, "p"))
		if err != nil {
			return plan, deny("invalid: p tag must name the member's pubkey"), false
		}
		role, member := ch.Members[target]
		switch {
		case !member:
			return plan, deny("invalid: not a channel member"), false
		case target != actor && !isManager(actorRole):
			return plan, deny("restricted: only owners and admins can remove other members"), false
		case role == protocol.RoleOwner && owners(ch) == 1:
			return plan, deny("restricted: cannot remove the last owner"), false
		case role == protocol.RoleOwner && target != actor && actorRole != protocol.RoleOwner:
			return plan, deny("restricted: only owners can remove an owner"), false
		}
		plan.remove = []string{target}
		plan.removed = []string{target}
		typ := "member_removed"
		if target == actor {
			typ = "member_left"
		}
		plan.system = map[string]string{"type": typ, "actor": actor, "target": target}
	case protocol.KindEditMetadata:
		return r.planEdit(ev, plan, actorRole)
	case protocol.KindDeleteEvent:
		target := protocol.TagValue(ev.Tags, "e")
		if !protocol.IsHex64(target) {
			return plan, deny("invalid: e tag must name the event to delete"), false
		}
		old, oldCh, err := r.st.Event(ctx, target)
		if err != nil {
			return plan, rejected(http.StatusInternalServerError, "error: lookup failed"), false
		}
		switch {
		case old == nil || oldCh != chID:
			return plan, deny("invalid: target event is not in this channel"), false
		case old.PubKey != actor && !isManager(actorRole):
			return plan, deny("restricted: only the author, owners and admins can delete a message"), false
		}
		plan.deleteID = target
		plan.state = false
		plan.system = map[string]string{"type": "message_deleted", "actor": actor, "target_event_id": target}
	case protocol.KindDeleteGroup:
		if actorRole != protocol.RoleOwner {
			return plan, deny("restricted: only owners can delete a channel"), false
		}
		plan.ch.Deleted = true
		plan.system = map[string]string{"type": "channel_deleted", "actor": actor}
	case protocol.KindJoinRequest:
		if private {
			return plan, deny("restricted: channel is private; ask an owner or admin to add you"), false
		}
		if _, member := ch.Members[actor]; member {
			plan.state = false
			return plan, result{}, true
		}
		plan.put[actor] = protocol.RoleMember
		plan.system = map[string]string{"type": "member_joined", "actor": actor, "target": actor}
		plan.added = []string{actor}
	case protocol.KindLeaveRequest:
		role, member := ch.Members[actor]
		switch {
		case !member:
			return plan, deny("invalid: not a channel member"), false
		case role == protocol.RoleOwner && owners(ch) == 1:
			return plan, deny("restricted: the last owner cannot leave"), false
		}
		plan.remove = []string{actor}
		plan.removed = []string{actor}
		plan.system = map[string]string{"type": "member_left", "actor": actor, "target": actor}
	}
	return plan, result{}, true
}

// planEdit handles 9002: name/about/archived/visibility/ttl need owner or admin; topic and
// purpose any member.
func (r *Relay) planEdit(ev *nostr.Event, plan adminPlan, actorRole string) (adminPlan, result, bool) {
	c := &plan.ch
	changed := false
	privileged := false
	events := []string{}
	for _, t := range ev.Tags {
		if len(t) < 2 {
			continue
		}
		v := t[1]
		switch t[0] {
		case "name":
			if v == "" {
				return plan, deny("invalid: channel name cannot be empty"), false
			}
			c.Name, changed, privileged = v, true, true
		case "about":
			c.About, changed, privileged = v, true, true
		case "topic":
			c.Topic, changed = v, true
		case "purpose":
			c.Purpose, changed = v, true
		case "archived":
			arch := v == "true"
			if arch != c.Archived {
				events = append(events, map[bool]string{true: "channel_archived", false: "channel_unarchived"}[arch])
			}
			c.Archived, changed, privileged = arch, true, true
		case "visibility":
			if v != protocol.VisibilityOpen && v != protocol.VisibilityPrivate {
				return plan, deny("invalid: visibility must be open or private"), false
			}
			if v != c.Visibility {
				events = append(events, "visibility_changed")
			}
			c.Visibility, changed, privileged = v, true, true
		case "ttl":
			ttl, ok := parseTTL(ev)
			if !ok {
				return plan, deny("invalid: ttl must be a non-negative number of seconds"), false
			}
			c.TTL, changed, privileged = ttl, true, true
		}
	}
	switch {
	case !changed:
		return plan, deny("invalid: nothing to edit (name, about, archived, topic, purpose, visibility or ttl)"), false
	case privileged && !isManager(actorRole):
		return plan, deny("restricted: only owners and admins can change name, about, archived, visibility or ttl"), false
	case actorRole == "":
		return plan, deny("restricted: not a channel member"), false
	case plan.ch.Archived && !privileged:
		return plan, deny("restricted: channel is archived"), false
	}
	typ := "channel_updated"
	if len(events) > 0 {
		typ = events[0]
	}
	plan.system = map[string]string{"type": typ, "actor": ev.PubKey}
	return plan, result{}, true
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
