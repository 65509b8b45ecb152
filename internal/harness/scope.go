package harness

import (
	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
)

// SessionPolicy decides what one agent session covers (--session-policy).
type SessionPolicy string

const (
	// PolicyThread gives every thread of a channel its own session (the default). DMs stay one
	// conversation per channel.
	PolicyThread SessionPolicy = "thread"
	// PolicyChannel is one session per channel, as before thread sessions existed.
	PolicyChannel SessionPolicy = "channel"
)

// conversationOf derives an event's conversation — the one place that decides it. Under the
// thread policy a reply belongs to its NIP-10 root (not its parent); a top-level message, or one
// whose only marker is "root" (relays treat that as top-level too), opens a thread keyed by its
// own id. DMs, and everything under the channel policy, are one conversation per channel.
func conversationOf(policy SessionPolicy, ch channel, ev *nostr.Event) convKey {
	if policy == PolicyChannel || ch.Type == protocol.ChannelDM {
		return protocol.ChannelConversation(ch.ID)
	}
	if hasReplyMarker(ev.Tags) {
		if root := protocol.ParseThread(ev.Tags).Root; root != "" {
			return convKey{Channel: ch.ID, Root: root}
		}
	}
	return convKey{Channel: ch.ID, Root: ev.ID}
}

// hasReplyMarker reports a marked NIP-10 reply tag (what ParseThread reads as the parent).
func hasReplyMarker(tags nostr.Tags) bool {
	for _, t := range tags {
		if len(t) >= 4 && t[0] == "e" && t[3] == "reply" && protocol.IsHex64(t[1]) {
			return true
		}
	}
	return false
}
