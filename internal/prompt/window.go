package prompt

import (
	"sort"

	"github.com/nbd-wtf/go-nostr"
)

// WindowKind says which context section a window renders as.
type WindowKind int

const (
	// ThreadWindowKind renders as [Thread Context (…)]: the last event is a reply.
	ThreadWindowKind WindowKind = iota
	// ConversationWindowKind renders as [Conversation Context (…)]: DM history.
	ConversationWindowKind
)

// ThreadWindow is a fetched context window, before delta filtering (spec §6.6).
type ThreadWindow struct {
	Kind        WindowKind
	RootID      string        // thread windows only
	RootPresent bool          // the root message came back from the fetch
	Messages    []nostr.Event // chronological; the root first when present
	Truncated   bool
	Total       int // messages in the whole thread/conversation, best known
}

// BuildThreadContext turns the fetched events of a thread query into a window. fetched holds
// the root (if it came back) and up to limit+1 replies: the extra one is a sentinel that proves
// truncation. agentNewest is the agent's own newest reply (nil if none); it stays in view by
// replacing the oldest shown reply. count is the relay's reply count, -1 when unknown.
func BuildThreadContext(rootID string, fetched []nostr.Event, agentNewest *nostr.Event, limit int, count int64) ThreadWindow {
	w := ThreadWindow{Kind: ThreadWindowKind, RootID: rootID}
	if limit < 0 {
		limit = 0
	}
	var root *nostr.Event
	seen := map[string]bool{}
	var replies []nostr.Event
	for i := range fetched {
		ev := fetched[i]
		if ev.ID == rootID && rootID != "" {
			if root == nil {
				root = &fetched[i]
			}
			continue
		}
		if ev.ID != "" {
			if seen[ev.ID] {
				continue
			}
			seen[ev.ID] = true
		}
		replies = append(replies, ev)
	}
	w.RootPresent = root != nil
	rootN := 0
	if w.RootPresent {
		rootN = 1
	}

	sortNewestFirst(replies)
	w.Truncated = len(replies) > limit
	distinct := len(replies)
	shown := append([]nostr.Event(nil), replies[:min(limit, len(replies))]...)

	if a := agentNewest; a != nil && a.ID != rootID && limit > 0 {
		inView := false
		for _, ev := range shown {
			if ev.ID == a.ID {
				inView = true
				break
			}
		}
		if !inView {
			if !seen[a.ID] {
				distinct++
			}
			if len(shown) < limit {
				shown = append(shown, *a)
			} else {
				shown[len(shown)-1] = *a // shown is newest-first: the last is the oldest
			}
		}
	}
	sortChronological(shown)

	if root != nil {
		w.Messages = append(w.Messages, *root)
	}
	w.Messages = append(w.Messages, shown...)
	w.Total = len(w.Messages)
	if w.Truncated {
		w.Total = distinct + rootN
		if count >= 0 && int(count)+rootN > w.Total {
			w.Total = int(count) + rootN
		}
	}
	return w
}

// BuildConversationContext turns a DM history fetch (limit newest messages) into a window.
// A full page means there may be more, so it counts as truncated.
func BuildConversationContext(fetched []nostr.Event, limit int) ThreadWindow {
	w := ThreadWindow{Kind: ConversationWindowKind}
	if limit < 0 {
		limit = 0
	}
	seen := map[string]bool{}
	var msgs []nostr.Event
	for _, ev := range fetched {
		if ev.ID != "" {
			if seen[ev.ID] {
				continue
			}
			seen[ev.ID] = true
		}
		msgs = append(msgs, ev)
	}
	sortNewestFirst(msgs)
	msgs = msgs[:min(limit, len(msgs))]
	sortChronological(msgs)
	w.Messages = msgs
	w.Total = len(msgs)
	if limit > 0 && len(msgs) >= limit {
		w.Truncated = true
		w.Total = len(msgs) + 1
	}
	return w
}

// Delta removes what the agent has already seen: messages delivered earlier in this session
// and the batch's own events (they are rendered as event blocks). Messages without an id are
// always kept. hadDelivered reports whether any message was dropped as previously delivered.
func (w ThreadWindow) Delta(delivered, batch map[string]bool) (out ThreadWindow, hadDelivered bool) {
	out = w
	out.Messages = nil
	for _, ev := range w.Messages {
		if ev.ID != "" && delivered[ev.ID] {
			hadDelivered = true
			continue
		}
		if ev.ID != "" && batch[ev.ID] {
			continue
		}
		out.Messages = append(out.Messages, ev)
	}
	return out, hadDelivered
}

// Contains reports whether the window (as fetched) holds an event with this id.
func (w ThreadWindow) Contains(id string) bool {
	for _, ev := range w.Messages {
		if ev.ID == id {
			return true
		}
	}
	return false
}

// IDSet collects the non-empty ids of the given event lists.
func IDSet(lists ...[]nostr.Event) map[string]bool {
	m := map[string]bool{}
	for _, l := range lists {
		for _, ev := range l {
			if ev.ID != "" {
				m[ev.ID] = true
			}
		}
	}
	return m
}

func sortNewestFirst(evs []nostr.Event) {
	sort.SliceStable(evs, func(i, j int) bool {
		if evs[i].CreatedAt != evs[j].CreatedAt {
			return evs[i].CreatedAt > evs[j].CreatedAt
		}
		return evs[i].ID > evs[j].ID
	})
}

func sortChronological(evs []nostr.Event) {
	sort.SliceStable(evs, func(i, j int) bool {
		if evs[i].CreatedAt != evs[j].CreatedAt {
			return evs[i].CreatedAt < evs[j].CreatedAt
		}
		return evs[i].ID < evs[j].ID
	})
}
