package relay

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/google/uuid"
	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/relay/store"
)

// Direct messages (docs/dms.md). A DM is a private channel of type "dm" whose members, all with
// role member, are its participants. Upstream finds an existing DM by a SHA-256 of the sorted
// participant keys; here that hash *is* the channel id (as a UUID), so opening the same set
// again lands on the same channel with no lookup table, and every node derives the same id.

// dmParticipants reads a 41010's p tags: 1–8 keys besides the signer, 64 hex each (either case,
// as upstream's hex decoding accepts). It returns the sorted, de-duplicated set with the signer.
func dmParticipants(ev *nostr.Event, existing []string) ([]string, error) {
	var others []string
	for _, t := range ev.Tags {
		if len(t) < 2 || t[0] != "p" {
			continue
		}
		pk := strings.ToLower(t[1])
		if _, err := hex.DecodeString(pk); err != nil {
			return nil, deny(protocol.ReasonInvalid, "bad pubkey hex: "+t[1])
		}
		if len(pk) != 64 {
			return nil, deny(protocol.ReasonInvalid, "pubkey must be 32 bytes: "+t[1])
		}
		others = append(others, pk)
	}
	if ev.Kind == protocol.KindDMOpen {
		switch {
		case len(others) == 0:
			return nil, deny(protocol.ReasonInvalid, "pubkeys must contain at least 1 other participant")
		case len(others) > protocol.MaxDMParticipants-1:
			return nil, deny(protocol.ReasonInvalid, fmt.Sprintf("pubkeys may contain at most %d other participants (%d total)", protocol.MaxDMParticipants-1, protocol.MaxDMParticipants))
		}
	} else if len(others) == 0 {
		return nil, deny(protocol.ReasonInvalid, "must specify at least 1 new participant in p tags")
	}
	set := append(append([]string{ev.PubKey}, existing...), others...)
	slices.Sort(set)
	set = slices.Compact(set)
	if len(set) > protocol.MaxDMParticipants {
		return nil, deny(protocol.ReasonInvalid, fmt.Sprintf("DM supports at most %d participants", protocol.MaxDMParticipants))
	}
	if len(set) < 2 {
		return nil, deny(protocol.ReasonInvalid, "pubkeys must contain at least 1 other participant")
	}
	return set, nil
}

// dmChannelID is the DM's channel id (protocol.DMChannelID: the harness derives it too).
func dmChannelID(sorted []string) string { return protocol.DMChannelID(sorted) }

// isDMID reports whether id is in the DM namespace: a version-8 UUID, as every dmChannelID is.
// No other channel may have such an id (createOutsideDMNamespace), so nobody can create "the DM"
// of a pair before its participants do.
func isDMID(id string) bool {
	u, err := uuid.Parse(id)
	return err == nil && u.Version() == 8
}

// isDMOf reports whether ch is the DM of exactly the participant set: a DM whose members are
// all in it (a participant who left is no longer a member, and may be restored).
func isDMOf(ch store.Channel, set []string) bool {
	if ch.Type != protocol.TypeDM {
		return false
	}
	for pk := range ch.Members {
		if !slices.Contains(set, pk) {
			return false
		}
	}
	return true
}

// hiddenDM reports whether id is a DM that pubkey is not in. Its id is computable from its
// participants, so to everyone else it is answered exactly as a channel that does not exist
// (REQ, writes, admin kinds): otherwise a probe would tell who has a DM with whom.
func (r *Relay) hiddenDM(pubkey, id string) bool {
	ch, ok := r.acl.get(id)
	return ok && hidesDM(ch, pubkey)
}

// hidesDM is hiddenDM for a channel already at hand.
func hidesDM(ch store.Channel, pubkey string) bool {
	_, member := ch.Members[pubkey]
	return ch.Type == protocol.TypeDM && !member
}

// dmTarget is the channel a DM command acts on: the DM of its participant set. For 41011 the
// set is the h channel's members plus the new keys, checked against the h channel first.
func (r *Relay) dmTarget(ev *nostr.Event) (string, error) {
	var existing []string
	if ev.Kind == protocol.KindDMAddMember {
		h := protocol.TagValue(ev.Tags, "h")
		if h == "" {
			return "", deny(protocol.ReasonInvalid, "missing h tag (channel_id)")
		}
		ch, ok := r.acl.get(h)
		if _, member := ch.Members[ev.PubKey]; !ok || ch.Deleted || !member {
			return "", deny(protocol.ReasonForbidden, "not a member of this DM")
		}
		if ch.Type != protocol.TypeDM {
			return "", deny(protocol.ReasonInvalid, "channel is not a DM")
		}
		existing = sortedMembers(ch)
	}
	set, err := dmParticipants(ev, existing)
	if err != nil {
		return "", err
	}
	return dmChannelID(set), nil
}

// ruleDMOpen (41010, and 41011 after dmTarget merged the set): create the DM of the set, or
// reopen it, restoring any participant who left. Only a current participant may reopen. Putting
// someone else into a DM is adding them to a private channel, so each participant the signer
// places there passes their channel_add_policy (upstream checks none: a stranger could make
// group DMs with an owner-only agent by the thousand).
func ruleDMOpen(in adminInput) (adminPlan, error) {
	plan := newPlan(in)
	ev, actor := in.ev, in.ev.PubKey
	var existing []string
	if ev.Kind == protocol.KindDMAddMember {
		existing = in.dmBase
	}
	set, err := dmParticipants(ev, existing)
	if err != nil {
		return plan, err
	}
	id := dmChannelID(set)
	created := !in.exists
	if in.exists {
		// A channel that holds this id but is not this set's DM (one squatted before DM ids
		// were reserved) is never joined in its place.
		if !isDMOf(in.ch, set) {
			return plan, deny(protocol.ReasonInvalid, "a channel that is not this DM holds its id")
		}
		if in.role == "" {
			return plan, deny(protocol.ReasonRestricted, "only an active DM participant may restore the participant set")
		}
		for _, pk := range set {
			if _, ok := in.ch.Members[pk]; !ok {
				plan.put[pk] = protocol.RoleMember
				plan.added = append(plan.added, pk)
			}
		}
		if err := dmAddsAllowed(in.look, actor, plan.added); err != nil {
			return plan, err
		}
		plan.state = len(plan.put) > 0
	} else {
		name := "DM"
		if len(set) > 2 {
			name = fmt.Sprintf("Group DM (%d)", len(set))
		}
		plan.ch = store.Channel{
			ID: id, Name: name, Visibility: protocol.VisibilityPrivate, Type: protocol.TypeDM,
			CreatedBy: actor, CreatedAt: int64(ev.CreatedAt), Members: map[string]string{},
		}
		for _, pk := range set {
			plan.put[pk] = protocol.RoleMember
		}
		plan.added = set
		if err := dmAddsAllowed(in.look, actor, set); err != nil {
			return plan, err
		}
		body, _ := json.Marshal(map[string]any{"type": "dm_created", "actor": actor, "participants": set})
		plan.systemBody = string(body)
	}
	reply := map[string]any{"channel_id": id}
	if ev.Kind == protocol.KindDMOpen {
		reply["created"] = created
	}
	body, _ := json.Marshal(reply)
	plan.reply = protocol.Response(string(body))
	return plan, nil
}

// dmAddsAllowed applies channel_add_policy to every participant actor puts into a DM.
func dmAddsAllowed(look adminLookup, actor string, added []string) error {
	for _, pk := range added {
		if pk == actor {
			continue
		}
		if err := checkAddPolicy(look, actor, pk); err != nil {
			return err
		}
	}
	return nil
}

// applyDMHide (41012) hides a DM from its signer's list. The hidden set is upstream's NIP-DV
// snapshot: a relay-signed, replaceable 30622 addressed to the viewer (d and p = the viewer,
// one h per hidden DM) that only the viewer can read. The DM itself is unchanged: still
// readable and writable, and hiding it again changes nothing.
func applyDMHide(ctx context.Context, r *Relay, in *ingest) *result {
	if in.ev.Kind != protocol.KindDMHide {
		return nil
	}
	viewer, dm := in.ev.PubKey, protocol.TagValue(in.ev.Tags, "h")
	if dm == "" {
		return refuse(http.StatusBadRequest, protocol.ReasonInvalid.Msg("missing h tag (channel_id)"))
	}
	ch, ok := r.acl.get(dm)
	if _, member := ch.Members[viewer]; !ok || ch.Deleted || !member {
		return refuse(http.StatusForbidden, protocol.ReasonForbidden.Msg("not a member of this DM"))
	}
	if ch.Type != protocol.TypeDM {
		return refuse(http.StatusBadRequest, protocol.ReasonInvalid.Msg("channel is not a DM"))
	}
	if err := r.setDMHidden(ctx, viewer, dm, true); err != nil {
		return refuse(http.StatusInternalServerError, protocol.ReasonError.Msg("could not update the DM visibility snapshot"))
	}
	res := accepted(protocol.Response("{}"))
	return &res
}

// setDMHidden adds dm to the viewer's hidden set, or takes it out, and publishes the new 30622
// snapshot if that changed it. One viewer's snapshot is read, changed and replaced under one
// lock, so two changes at once cannot each drop the other's.
func (r *Relay) setDMHidden(ctx context.Context, viewer, dm string, hide bool) error {
	defer r.admin.lock("dm-visibility:" + viewer)()
	prev, err := r.dmVisibility(ctx, viewer)
	if err != nil {
		return err
	}
	var hidden []string
	at := r.now().Unix()
	if prev != nil {
		for t := range prev.Tags.FindAll("h") {
			hidden = append(hidden, t[1])
		}
		at = max(at, int64(prev.CreatedAt)+1) // a replacement must be newer
	}
	was := slices.Contains(hidden, dm)
	if was == hide {
		return nil // nothing changes
	}
	if hide {
		hidden = append(hidden, dm)
		slices.Sort(hidden)
	} else {
		hidden = slices.DeleteFunc(hidden, func(id string) bool { return id == dm })
	}
	tags := nostr.Tags{{"d", viewer}, {"p", viewer}}
	for _, id := range hidden {
		tags = append(tags, nostr.Tag{"h", id})
	}
	snap := &nostr.Event{Kind: protocol.KindDMVisibility, CreatedAt: nostr.Timestamp(at), Tags: tags}
	if err := protocol.Sign(snap, r.sk); err != nil {
		return err
	}
	if err := r.st.Update(ctx, func(tx store.Tx) error { return tx.SaveEvent(snap, "") }); err != nil {
		return err
	}
	r.broadcast(snap, "")
	return nil
}

// dmVisibility is the viewer's current 30622 snapshot, nil when they have hidden nothing.
func (r *Relay) dmVisibility(ctx context.Context, viewer string) (*nostr.Event, error) {
	f := store.Filter{Filter: nostr.Filter{Kinds: []int{protocol.KindDMVisibility}, Authors: []string{r.pk}, Tags: nostr.TagMap{"d": {viewer}}}}
	evs, err := r.st.Query(ctx, r.relayAccess(), f, 1)
	if err != nil || len(evs) == 0 {
		return nil, err
	}
	return &evs[0], nil
}
