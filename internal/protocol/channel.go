package protocol

import (
	"github.com/nbd-wtf/go-nostr"
)

// Channel visibility and type values as they appear on the wire.
const (
	VisibilityOpen    = "open"
	VisibilityPrivate = "private"
	TypeStream        = "stream"
	TypeForum         = "forum"
	TypeDM            = "dm"
)

// Member roles.
const (
	RoleOwner  = "owner"
	RoleAdmin  = "admin"
	RoleMember = "member"
	RoleGuest  = "guest"
	RoleBot    = "bot"
)

// ValidRole reports whether r is a role the relay accepts.
func ValidRole(r string) bool {
	switch r {
	case RoleOwner, RoleAdmin, RoleMember, RoleGuest, RoleBot:
		return true
	}
	return false
}

// ChannelMeta is what a relay-signed kind 39000 event says about a channel.
type ChannelMeta struct {
	ID       string `json:"channel_id"`
	Name     string `json:"name"`
	About    string `json:"about,omitempty"`
	Private  bool   `json:"private"`
	Hidden   bool   `json:"hidden,omitempty"`
	Type     string `json:"channel_type"` // stream | forum | dm
	Topic    string `json:"topic,omitempty"`
	Purpose  string `json:"purpose,omitempty"`
	Archived bool   `json:"archived"`
}

// ParseChannelMeta reads a kind 39000 event.
func ParseChannelMeta(ev *nostr.Event) ChannelMeta {
	m := ChannelMeta{ID: TagValue(ev.Tags, "d"), Type: TypeStream}
	for _, t := range ev.Tags {
		if len(t) == 0 {
			continue
		}
		val := ""
		if len(t) >= 2 {
			val = t[1]
		}
		switch t[0] {
		case "name":
			m.Name = val
		case "about":
			m.About = val
		case "private":
			m.Private = true
		case "hidden":
			m.Hidden = true
		case "t":
			if val != "" {
				m.Type = val
			}
		case "topic":
			m.Topic = val
		case "purpose":
			m.Purpose = val
		case "archived":
			m.Archived = val == "true"
		}
	}
	return m
}

// Visibility returns "private" or "open".
func (m ChannelMeta) Visibility() string {
	if m.Private {
		return VisibilityPrivate
	}
	return VisibilityOpen
}

// ChannelType is a member channel's type as a harness reports it (upstream buzz-acp's
// channel_type: _meta.channelType and the prompt's channel line) and gates prompts by. It is
// coarser than the channel_type tag (TypeStream, TypeForum, TypeDM): a forum reports as a
// stream, and a private stream or forum as private.
type ChannelType string

const (
	ChannelStream  ChannelType = TypeStream        // an open stream or forum
	ChannelPrivate ChannelType = VisibilityPrivate // a private stream or forum
	ChannelDM      ChannelType = TypeDM            // a DM, or a hidden channel
	// ChannelUnknown is a member channel whose metadata could not be read. It is gated like a
	// DM, only the owner may prompt there: it fails closed.
	ChannelUnknown ChannelType = "unknown"
)

// ReportedType is the channel's type as a harness reports it: ChannelDM for DMs and hidden
// channels, ChannelPrivate for private ones, else ChannelStream.
func (m ChannelMeta) ReportedType() ChannelType {
	switch {
	case m.Type == TypeDM || m.Hidden:
		return ChannelDM
	case m.Type == VisibilityPrivate || m.Private:
		return ChannelPrivate
	}
	return ChannelStream
}

// Member is one entry of a kind 39002 member list.
type Member struct {
	Pubkey string `json:"pubkey"`
	Role   string `json:"role"`
}

// ParseMembers reads a kind 39002 event: ["p", pubkey, "", role] per member.
func ParseMembers(ev *nostr.Event) []Member {
	var out []Member
	for _, t := range ev.Tags {
		if len(t) < 2 || t[0] != "p" || !IsHex64(t[1]) {
			continue
		}
		role := RoleMember
		if len(t) >= 4 && t[3] != "" {
			role = t[3]
		}
		out = append(out, Member{Pubkey: t[1], Role: role})
	}
	return out
}

// IsMember reports whether a kind 39002 member list names pk.
func IsMember(ev *nostr.Event, pk string) bool {
	for _, m := range ParseMembers(ev) {
		if m.Pubkey == pk {
			return true
		}
	}
	return false
}
