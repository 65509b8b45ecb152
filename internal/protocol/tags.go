package protocol

import (
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/nbd-wtf/go-nostr"
)

// IsUUID reports whether s is a canonical (hyphenated, 36-char) UUID, the form channel ids take.
func IsUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	_, err := uuid.Parse(s)
	return err == nil
}

// IsHex64 reports whether s is a 64-character lowercase hex string (event ids, pubkeys).
func IsHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// ChannelID returns the channel of a channel-scoped event: the first h tag that is a UUID.
func ChannelID(tags nostr.Tags) (string, bool) {
	for _, t := range tags {
		if len(t) >= 2 && t[0] == "h" && IsUUID(t[1]) {
			return t[1], true
		}
	}
	return "", false
}

// ThreadRef is an event's place in a thread, from NIP-10 marked e tags only.
// Root and Parent are empty for a top-level message.
type ThreadRef struct {
	Root   string
	Parent string
}

// IsReply reports whether the event replies to something.
func (r ThreadRef) IsReply() bool { return r.Parent != "" }

// ParseThread reads NIP-10 markers: a "root" marker gives the root, a "reply" marker the parent;
// reply-only means the parent is the root; root-only means the parent is the root. Unmarked
// (positional) e tags are ignored, as Buzz does.
func ParseThread(tags nostr.Tags) ThreadRef {
	var root, reply string
	for _, t := range tags {
		if len(t) < 4 || t[0] != "e" || !IsHex64(t[1]) {
			continue
		}
		switch t[3] {
		case "root":
			if root == "" {
				root = t[1]
			}
		case "reply":
			if reply == "" {
				reply = t[1]
			}
		}
	}
	switch {
	case root != "" && reply != "":
		return ThreadRef{Root: root, Parent: reply}
	case reply != "":
		return ThreadRef{Root: reply, Parent: reply}
	case root != "":
		return ThreadRef{Root: root, Parent: root}
	}
	return ThreadRef{}
}

// ReplyTags builds the e tags for a reply to parent whose thread root is root. A direct reply
// (root == parent, or root unknown) carries only a reply marker; a nested one carries both.
func ReplyTags(root, parent string) nostr.Tags {
	if root == "" || root == parent {
		return nostr.Tags{{"e", parent, "", "reply"}}
	}
	return nostr.Tags{{"e", root, "", "root"}, {"e", parent, "", "reply"}}
}

// Mentions returns the distinct pubkeys named by p tags (and Buzz's "mention" tags), in order.
func Mentions(tags nostr.Tags) []string {
	var out []string
	seen := map[string]bool{}
	for _, t := range tags {
		if len(t) < 2 || (t[0] != "p" && t[0] != "mention") {
			continue
		}
		pk := strings.ToLower(t[1])
		if IsHex64(pk) && !seen[pk] {
			seen[pk] = true
			out = append(out, pk)
		}
	}
	return out
}

// Mentions reports whether pubkey is mentioned by tags.
func Mentioned(tags nostr.Tags, pubkey string) bool {
	for _, pk := range Mentions(tags) {
		if pk == pubkey {
			return true
		}
	}
	return false
}

// TagValue returns the value of the first tag named name, or "".
func TagValue(tags nostr.Tags, name string) string {
	for _, t := range tags {
		if len(t) >= 2 && t[0] == name {
			return t[1]
		}
	}
	return ""
}

// HasTag reports whether a tag named name exists (of any length).
func HasTag(tags nostr.Tags, name string) bool {
	for _, t := range tags {
		if len(t) >= 1 && t[0] == name {
			return true
		}
	}
	return false
}

// PermissionRequestTag marks buzz-acp's question to the owner when an agent asks permission
// (--permissions ask): the harness tells it from a reply, and the console shows answer buttons.
var PermissionRequestTag = nostr.Tag{"buzz", "permission_request"}

// PermissionOptionTags are a permission question's options, one ["option", "<n>", name] tag each
// in order from 1: what the console builds its answer buttons from. The question's text is for
// reading only (a tool title can hold anything, "2. Reject" lines included).
func PermissionOptionTags(names []string) nostr.Tags {
	out := make(nostr.Tags, len(names))
	for i, n := range names {
		out[i] = nostr.Tag{"option", strconv.Itoa(i + 1), n}
	}
	return out
}

// PermissionOptions reads PermissionOptionTags back: the option names in order, stopping at the
// first tag out of sequence.
func PermissionOptions(tags nostr.Tags) []string {
	var out []string
	for _, t := range tags {
		if len(t) < 3 || t[0] != "option" {
			continue
		}
		if t[1] != strconv.Itoa(len(out)+1) {
			break
		}
		out = append(out, t[2])
	}
	return out
}

// IsPermissionRequest reports whether tags carry PermissionRequestTag.
func IsPermissionRequest(tags nostr.Tags) bool {
	for _, t := range tags {
		if len(t) >= 2 && t[0] == PermissionRequestTag[0] && t[1] == PermissionRequestTag[1] {
			return true
		}
	}
	return false
}
