package relay

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

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
// reopen it, restoring any participant who left. Only a current participant may reopen.
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
		if in.role == "" {
			return plan, deny(protocol.ReasonRestricted, "only an active DM participant may restore the participant set")
		}
		for _, pk := range set {
			if _, ok := in.ch.Members[pk]; !ok {
				plan.put[pk] = protocol.RoleMember
				plan.added = append(plan.added, pk)
			}
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
