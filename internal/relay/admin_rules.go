package relay

import (
	"context"
	"errors"
	"net/http"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/relay/store"
)

// adminPlan is what an accepted admin event changes.
type adminPlan struct {
	ch       store.Channel
	put      map[string]string // pubkey -> role
	remove   []string
	deleteID string            // 9005 target
	system   map[string]string // 40099 content; nil = none
	// systemBody, when set, is the 40099 content instead of system (values that are not strings).
	systemBody string
	// reply is the accepted answer's message (a DM open names its channel here).
	reply   string
	added   []string // 44100 targets
	removed []string // 44101 targets
	state   bool     // re-emit 39000/39001/39002
	fresh   bool     // the event creates the channel: it has no events yet
}

// adminInput is everything a rule decides on: the event, the channel as it stands (zero when
// it does not exist), the signer's role in it ("" = not a member), and the lookups a few rules
// need beyond channel state.
type adminInput struct {
	ev     *nostr.Event
	ch     store.Channel
	exists bool
	role   string
	look   adminLookup
	// dmBase is, for a DM add-member (41011), the participants of the DM it names.
	dmBase []string
}

// adminLookup is the state outside the channel that some rules consult.
type adminLookup interface {
	// event returns a stored event and its channel, or nil.
	event(id string) (*nostr.Event, string, error)
	// addPolicy is pubkey's channel_add_policy and its proven owner ("" = none).
	addPolicy(pubkey string) (policy, owner string, err error)
}

// denial is a rule's refusal; its message is the relay's answer verbatim.
type denial struct {
	status int
	msg    string
}

func (d *denial) Error() string { return d.msg }

func deny(reason protocol.Reason, text string) error {
	return &denial{http.StatusBadRequest, reason.Msg(text)}
}

// adminRule decides one admin kind: the plan to commit, or a denial.
type adminRule func(in adminInput) (adminPlan, error)

// adminRules holds one rule per NIP-29 admin kind the relay accepts.
var adminRules = map[int]adminRule{
	protocol.KindCreateGroup:  ruleCreateGroup,
	protocol.KindPutUser:      rulePutUser,
	protocol.KindRemoveUser:   ruleRemoveUser,
	protocol.KindEditMetadata: ruleEditMetadata,
	protocol.KindDeleteEvent:  ruleDeleteEvent,
	protocol.KindDeleteGroup:  ruleDeleteGroup,
	protocol.KindJoinRequest:  ruleJoin,
	protocol.KindLeaveRequest: ruleLeave,
	protocol.KindDMOpen:       ruleDMOpen,
	protocol.KindDMAddMember:  ruleDMOpen,
}

// relayLookup answers a rule's lookups from the store.
type relayLookup struct {
	ctx context.Context
	r   *Relay
}

func (l relayLookup) event(id string) (*nostr.Event, string, error) { return l.r.st.Event(l.ctx, id) }
func (l relayLookup) addPolicy(pk string) (string, string, error)   { return l.r.addPolicy(l.ctx, pk) }

// planAdmin applies Buzz's NIP-29 rules to one admin event against the current channel state.
func (r *Relay) planAdmin(ctx context.Context, ev *nostr.Event, chID string) (adminPlan, result, bool) {
	ch, exists := r.acl.get(chID)
	if exists && ev.Kind != protocol.KindDMOpen && ev.Kind != protocol.KindDMAddMember && r.hiddenDM(ev.PubKey, chID) {
		ch, exists = store.Channel{}, false // a DM is nobody else's business (hiddenDM)
	}
	in := adminInput{ev: ev, ch: ch, exists: exists, role: ch.Members[ev.PubKey], look: relayLookup{ctx, r}}
	if ev.Kind == protocol.KindDMAddMember {
		base, _ := r.acl.get(protocol.TagValue(ev.Tags, "h"))
		in.dmBase = sortedMembers(base)
	}
	plan, err := decideAdmin(in)
	if err != nil {
		var d *denial
		if errors.As(err, &d) {
			return plan, rejected(d.status, d.msg), false
		}
		r.log.Error("admin rule lookup", "kind", ev.Kind, "err", err)
		return plan, rejected(http.StatusInternalServerError, protocol.ReasonError.Msg("lookup failed")), false
	}
	return plan, result{}, true
}

// decideAdmin runs the checks every kind but create shares (the channel is live; an archived
// channel only takes edits and leaves), then the kind's own rule.
func decideAdmin(in adminInput) (adminPlan, error) {
	rule, ok := adminRules[in.ev.Kind]
	if !ok {
		return adminPlan{}, deny(protocol.ReasonRestricted, "unknown admin kind")
	}
	// Creating a channel, or opening a DM (which creates it on first use), needs none yet.
	opens := in.ev.Kind == protocol.KindCreateGroup || in.ev.Kind == protocol.KindDMOpen || in.ev.Kind == protocol.KindDMAddMember
	if !opens || in.exists {
		if !in.exists || in.ch.Deleted {
			return adminPlan{}, deny(protocol.ReasonInvalid, "unknown channel")
		}
		if in.ch.Archived && in.ev.Kind != protocol.KindEditMetadata && in.ev.Kind != protocol.KindLeaveRequest {
			return adminPlan{}, deny(protocol.ReasonRestricted, "channel is archived")
		}
	}
	return rule(in)
}

func newPlan(in adminInput) adminPlan {
	return adminPlan{ch: in.ch, put: map[string]string{}, state: true, fresh: !in.exists}
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

// ruleCreateGroup (9007): a new channel id, a name, open|private, stream|forum; the signer owns it.
func ruleCreateGroup(in adminInput) (adminPlan, error) {
	plan := newPlan(in)
	ev, actor := in.ev, in.ev.PubKey
	if in.exists {
		return plan, deny(protocol.ReasonInvalid, "channel already exists")
	}
	name := protocol.TagValue(ev.Tags, "name")
	if name == "" {
		return plan, deny(protocol.ReasonInvalid, "channel name is required")
	}
	vis := protocol.TagValue(ev.Tags, "visibility")
	if vis == "" {
		vis = protocol.VisibilityOpen
	}
	if vis != protocol.VisibilityOpen && vis != protocol.VisibilityPrivate {
		return plan, deny(protocol.ReasonInvalid, "visibility must be open or private")
	}
	typ := protocol.TagValue(ev.Tags, "channel_type")
	if typ == "" {
		typ = protocol.TypeStream
	}
	if typ != protocol.TypeStream && typ != protocol.TypeForum {
		return plan, deny(protocol.ReasonInvalid, "channel_type must be stream or forum")
	}
	ttl, ok := parseTTL(ev)
	if !ok {
		return plan, deny(protocol.ReasonInvalid, "ttl must be a non-negative number of seconds")
	}
	chID, _ := protocol.ChannelID(ev.Tags)
	plan.ch = store.Channel{
		ID: chID, Name: name, About: protocol.TagValue(ev.Tags, "about"), Visibility: vis, Type: typ,
		TTL: ttl, CreatedBy: actor, CreatedAt: int64(ev.CreatedAt), Members: map[string]string{},
	}
	plan.put[actor] = protocol.RoleOwner
	plan.system = map[string]string{"type": "channel_created", "actor": actor}
	plan.added = []string{actor}
	return plan, nil
}

// rulePutUser (9000): in an open channel anyone adds ordinary members; private channels and
// role changes need an owner or admin; only owners grant owner; the last owner stays. Adding
// someone else also needs their channel_add_policy to allow the signer.
func rulePutUser(in adminInput) (adminPlan, error) {
	plan := newPlan(in)
	ev, actor, ch := in.ev, in.ev.PubKey, in.ch
	target, err := protocol.ParsePubkey(protocol.TagValue(ev.Tags, "p"))
	if err != nil {
		return plan, deny(protocol.ReasonInvalid, "p tag must name the member's pubkey")
	}
	role := protocol.TagValue(ev.Tags, "role")
	if role == "" {
		role = protocol.RoleMember
	}
	if !protocol.ValidRole(role) {
		return plan, deny(protocol.ReasonInvalid, "role must be owner, admin, member, guest or bot")
	}
	current, already := ch.Members[target]
	switch {
	case ch.Visibility == protocol.VisibilityPrivate && !isManager(in.role):
		return plan, deny(protocol.ReasonRestricted, "only owners and admins can add members to a private channel")
	case (already || role != protocol.RoleMember) && !isManager(in.role):
		return plan, deny(protocol.ReasonRestricted, "only owners and admins can change roles")
	case role == protocol.RoleOwner && in.role != protocol.RoleOwner:
		return plan, deny(protocol.ReasonRestricted, "only owners can grant the owner role")
	case current == protocol.RoleOwner && role != protocol.RoleOwner && owners(ch) == 1:
		return plan, deny(protocol.ReasonRestricted, "cannot demote the last owner")
	}
	if already && current == role {
		plan.state = false // nothing changes; keep the event, skip re-emission
		return plan, nil
	}
	// Only a new membership is an "add": a role change of a member is not gated by the policy.
	if !already && target != actor {
		if err := checkAddPolicy(in.look, actor, target); err != nil {
			return plan, err
		}
	}
	plan.put[target] = role
	if already {
		plan.system = map[string]string{"type": "role_changed", "actor": actor, "target": target, "role": role}
	} else {
		plan.system = map[string]string{"type": "member_joined", "actor": actor, "target": target}
		plan.added = []string{target}
	}
	return plan, nil
}

// checkAddPolicy applies the target's kind-10100 channel_add_policy to a third party's add.
func checkAddPolicy(look adminLookup, actor, target string) error {
	policy, owner, err := look.addPolicy(target)
	if err != nil {
		return err
	}
	switch policy {
	case policyNobody:
		return deny(protocol.ReasonInvalid, "policy:nobody — this agent has disabled external channel additions")
	case policyOwnerOnly:
		if owner == "" {
			return deny(protocol.ReasonInvalid, "policy:owner_only — agent has no owner set")
		}
		if owner != actor {
			return deny(protocol.ReasonInvalid, "policy:owner_only — only the agent owner can add this agent")
		}
	}
	return nil
}

// ruleRemoveUser (9001): members remove themselves, owners and admins remove others; only
// owners remove an owner; the last owner stays.
func ruleRemoveUser(in adminInput) (adminPlan, error) {
	plan := newPlan(in)
	ev, actor, ch := in.ev, in.ev.PubKey, in.ch
	target, err := protocol.ParsePubkey(protocol.TagValue(ev.Tags, "p"))
	if err != nil {
		return plan, deny(protocol.ReasonInvalid, "p tag must name the member's pubkey")
	}
	role, member := ch.Members[target]
	switch {
	case !member:
		return plan, deny(protocol.ReasonInvalid, "not a channel member")
	case target != actor && !isManager(in.role):
		return plan, deny(protocol.ReasonRestricted, "only owners and admins can remove other members")
	case role == protocol.RoleOwner && owners(ch) == 1:
		return plan, deny(protocol.ReasonRestricted, "cannot remove the last owner")
	case role == protocol.RoleOwner && target != actor && in.role != protocol.RoleOwner:
		return plan, deny(protocol.ReasonRestricted, "only owners can remove an owner")
	}
	plan.remove = []string{target}
	plan.removed = []string{target}
	typ := "member_removed"
	if target == actor {
		typ = "member_left"
	}
	plan.system = map[string]string{"type": typ, "actor": actor, "target": target}
	return plan, nil
}

// ruleEditMetadata (9002): name/about/archived/visibility/ttl need an owner or admin; topic and
// purpose any member; an archived channel only takes privileged edits (unarchiving).
func ruleEditMetadata(in adminInput) (adminPlan, error) {
	plan := newPlan(in)
	ev := in.ev
	c := &plan.ch
	changed, privileged := false, false
	events := []string{}
	for _, t := range ev.Tags {
		if len(t) < 2 {
			continue
		}
		v := t[1]
		switch t[0] {
		case "name":
			if v == "" {
				return plan, deny(protocol.ReasonInvalid, "channel name cannot be empty")
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
				return plan, deny(protocol.ReasonInvalid, "visibility must be open or private")
			}
			if v != c.Visibility {
				events = append(events, "visibility_changed")
			}
			c.Visibility, changed, privileged = v, true, true
		case "ttl":
			ttl, ok := parseTTL(ev)
			if !ok {
				return plan, deny(protocol.ReasonInvalid, "ttl must be a non-negative number of seconds")
			}
			c.TTL, changed, privileged = ttl, true, true
		}
	}
	switch {
	case !changed:
		return plan, deny(protocol.ReasonInvalid, "nothing to edit (name, about, archived, topic, purpose, visibility or ttl)")
	case privileged && !isManager(in.role):
		return plan, deny(protocol.ReasonRestricted, "only owners and admins can change name, about, archived, visibility or ttl")
	case in.role == "":
		return plan, deny(protocol.ReasonRestricted, "not a channel member")
	case plan.ch.Archived && !privileged:
		return plan, deny(protocol.ReasonRestricted, "channel is archived")
	}
	typ := "channel_updated"
	if len(events) > 0 {
		typ = events[0]
	}
	plan.system = map[string]string{"type": typ, "actor": ev.PubKey}
	return plan, nil
}

// ruleDeleteEvent (9005): the author, an owner or an admin deletes a message of this channel.
func ruleDeleteEvent(in adminInput) (adminPlan, error) {
	plan := newPlan(in)
	actor := in.ev.PubKey
	target := protocol.TagValue(in.ev.Tags, "e")
	if !protocol.IsHex64(target) {
		return plan, deny(protocol.ReasonInvalid, "e tag must name the event to delete")
	}
	old, oldCh, err := in.look.event(target)
	if err != nil {
		return plan, err
	}
	switch {
	case old == nil || oldCh != in.ch.ID:
		return plan, deny(protocol.ReasonInvalid, "target event is not in this channel")
	case old.PubKey != actor && !isManager(in.role):
		return plan, deny(protocol.ReasonRestricted, "only the author, owners and admins can delete a message")
	}
	plan.deleteID = target
	plan.state = false
	plan.system = map[string]string{"type": "message_deleted", "actor": actor, "target_event_id": target}
	return plan, nil
}

// ruleDeleteGroup (9008): owners only.
func ruleDeleteGroup(in adminInput) (adminPlan, error) {
	plan := newPlan(in)
	if in.role != protocol.RoleOwner {
		return plan, deny(protocol.ReasonRestricted, "only owners can delete a channel")
	}
	plan.ch.Deleted = true
	plan.system = map[string]string{"type": "channel_deleted", "actor": in.ev.PubKey}
	return plan, nil
}

// ruleJoin (9021): open channels only; joining twice changes nothing.
func ruleJoin(in adminInput) (adminPlan, error) {
	plan := newPlan(in)
	actor := in.ev.PubKey
	if in.ch.Visibility == protocol.VisibilityPrivate {
		return plan, deny(protocol.ReasonRestricted, "channel is private; ask an owner or admin to add you")
	}
	if in.role != "" {
		plan.state = false
		return plan, nil
	}
	plan.put[actor] = protocol.RoleMember
	plan.system = map[string]string{"type": "member_joined", "actor": actor, "target": actor}
	plan.added = []string{actor}
	return plan, nil
}

// ruleLeave (9022): members leave, except the last owner.
func ruleLeave(in adminInput) (adminPlan, error) {
	plan := newPlan(in)
	actor := in.ev.PubKey
	switch {
	case in.role == "":
		return plan, deny(protocol.ReasonInvalid, "not a channel member")
	case in.role == protocol.RoleOwner && owners(in.ch) == 1:
		return plan, deny(protocol.ReasonRestricted, "the last owner cannot leave")
	}
	plan.remove = []string{actor}
	plan.removed = []string{actor}
	plan.system = map[string]string{"type": "member_left", "actor": actor, "target": actor}
	return plan, nil
}
