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

// scopeKey names a conversation: the key of its queue partition, in-flight turn, live sessions
// and remembered session. Root is the thread's root event id; empty means the whole channel
// (channel policy, DMs). The zero value is no conversation (heartbeats, "any slot").
type scopeKey struct {
	Channel string
	Root    string
}

func channelScope(channelID string) scopeKey { return scopeKey{Channel: channelID} }

// channelID is the channel the conversation happens in.
func (k scopeKey) channelID() string { return k.Channel }

// String is the stable form used as the session store key and in logs: the bare channel id for
// a channel conversation (so records written before thread sessions still load), else
// "<channel>:<root>".
func (k scopeKey) String() string {
	if k.Root == "" {
		return k.Channel
	}
	return k.Channel + ":" + k.Root
}

// conversationID is what session/new carries as _meta.buzz.conversationId:
// "buzz:<channel>:<root>" for a thread, and "buzz:<channel>:channel:<channel>" for a conversation
// that spans the whole channel (channel policy and DMs), the form upstream uses for one
// conversation per channel.
func (k scopeKey) conversationID() string {
	if k.Root == "" {
		return "buzz:" + k.Channel + ":channel:" + k.Channel
	}
	return "buzz:" + k.Channel + ":" + k.Root
}

// scopeOf derives an event's conversation — the one place that decides it. Under the thread
// policy a reply belongs to its NIP-10 root (not its parent); a top-level message, or one whose
// only marker is "root" (relays treat that as top-level too), opens a thread keyed by its own
// id. DMs, and everything under the channel policy, are one conversation per channel.
func scopeOf(policy SessionPolicy, ch channel, ev *nostr.Event) scopeKey {
	if policy == PolicyChannel || ch.Type == protocol.TypeDM {
		return channelScope(ch.ID)
	}
	if hasReplyMarker(ev.Tags) {
		if root := protocol.ParseThread(ev.Tags).Root; root != "" {
			return scopeKey{Channel: ch.ID, Root: root}
		}
	}
	return scopeKey{Channel: ch.ID, Root: ev.ID}
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
