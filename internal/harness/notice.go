package harness

import (
	"cmp"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
)

// The failure notice: when a batch is dead-lettered the agent says so in the thread, in the shape
// upstream's clients understand — kind 9 threaded on the triggering events, the
// ["buzz:agent-failure","1"] marker, and p tags for the people who asked, so they are notified.

// FailureMarker is the tag that marks a failure notice. An agent never notifies the author of an
// event carrying it, so two agents' notices cannot bounce between them.
const FailureMarker = "buzz:agent-failure"

// maxNoticeRecipients bounds a notice's p tags.
const maxNoticeRecipients = 50

// isFailureNotice reports whether ev carries the failure marker.
func isFailureNotice(ev *nostr.Event) bool {
	for _, t := range ev.Tags {
		if len(t) >= 2 && t[0] == FailureMarker && t[1] == "1" {
			return true
		}
	}
	return false
}

// noticeRecipients are the distinct authors of evs, newest first, never self and never the
// author of a failure notice, at most maxNoticeRecipients.
func noticeRecipients(evs []*nostr.Event, self string) []string {
	banned := map[string]bool{self: true}
	for _, ev := range evs {
		if isFailureNotice(ev) {
			banned[ev.PubKey] = true
		}
	}
	var out []string
	for i := len(evs) - 1; i >= 0 && len(out) < maxNoticeRecipients; i-- {
		pk := evs[i].PubKey
		if !banned[pk] {
			banned[pk] = true
			out = append(out, pk)
		}
	}
	return out
}

// failureNotice builds the unsigned kind-9 notice, dated now, for a dead-lettered batch of
// channel chID in conversation k, with text as its content. It is threaded under the
// conversation's root (else the last event's root, else the last event) and replies to the last
// triggering event.
func failureNotice(chID string, k convKey, evs []*nostr.Event, self, text string, now time.Time) *nostr.Event {
	return markedReply(chID, k, evs, self, text, FailureMarker, now)
}

// markedReply is a kind-9 the harness posts as the agent in answer to a batch: threaded as a
// failure notice is, p-tagging the people who asked, and carrying the marker tag [marker, "1"].
func markedReply(chID string, k convKey, evs []*nostr.Event, self, text, marker string, now time.Time) *nostr.Event {
	last := evs[len(evs)-1]
	root := cmp.Or(k.Root, protocol.ParseThread(last.Tags).Root, last.ID)
	tags := nostr.Tags{{"h", chID}}
	tags = append(tags, protocol.ReplyTags(root, last.ID)...)
	for _, pk := range noticeRecipients(evs, self) {
		tags = append(tags, nostr.Tag{"p", pk})
	}
	tags = append(tags, nostr.Tag{marker, "1"})
	return &nostr.Event{Kind: protocol.KindStreamMessage, Content: text, Tags: tags, CreatedAt: nostr.Timestamp(now.Unix())}
}
