package storetest

import (
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/relay/store"
)

// Legacy is data as a database from before the write-cost trim holds it (SQLite migration 0001,
// PostgreSQL 0001-0002: every event indexed for search, tag rows keyed by rowid). A backend's
// migration test writes Events with that schema's SQL, opens the store on it (which migrates)
// and calls Check.
type Legacy struct {
	Events  []LegacyEvent
	a, b, c key
	channel string
	message *nostr.Event
	article *nostr.Event
	profile *nostr.Event
	pGated  *nostr.Event
	note    *nostr.Event
}

// LegacyEvent is one stored event and its channel ("" = global).
type LegacyEvent struct {
	Event   *nostr.Event
	Channel string
}

// NewLegacy returns the events a migration test stores the old way.
func NewLegacy(t *testing.T) *Legacy {
	l := &Legacy{a: newKey(), b: newKey(), c: newKey(), channel: "c"}
	l.message = l.a.sign(t, nostr.Event{Kind: 9, CreatedAt: 10, Content: "launch plan for friday",
		Tags: nostr.Tags{{"h", l.channel}, {"p", l.b.pk}}})
	l.note = l.a.sign(t, nostr.Event{Kind: 1, CreatedAt: 11, Content: "launch notes"})
	l.article = l.a.sign(t, nostr.Event{Kind: 30023, CreatedAt: 12, Content: "draft one",
		Tags: nostr.Tags{{"d", "x"}, {"p", l.b.pk}}})
	l.profile = l.a.sign(t, nostr.Event{Kind: 0, CreatedAt: 13, Content: `{"name":"zed"}`})
	l.pGated = l.a.sign(t, nostr.Event{Kind: pGatedKind, CreatedAt: 14, Content: "launch invite",
		Tags: nostr.Tags{{"p", l.b.pk}, {"h", l.channel}}})
	l.Events = []LegacyEvent{{l.message, l.channel}, {l.note, ""}, {l.article, ""}, {l.profile, ""}, {l.pGated, ""}}
	return l
}

// Check asserts that s, opened on a database holding l.Events the old way, still answers the
// relay's queries on them, searches them as the trimmed schema does, and replaces them cleanly.
func (l *Legacy) Check(t *testing.T, s store.Store) {
	t.Helper()
	b := reader(l.b.pk, l.channel)
	wantContents(t, "#h", query(t, s, b, nostr.Filter{Kinds: []int{9}, Tags: nostr.TagMap{"h": {l.channel}}}), l.message.Content)
	wantContents(t, "#p", query(t, s, b, nostr.Filter{Kinds: []int{30023}, Tags: nostr.TagMap{"p": {l.b.pk}}}), l.article.Content)
	wantContents(t, "by id", query(t, s, b, nostr.Filter{IDs: []string{l.note.ID}}), l.note.Content)
	wantContents(t, "p-gated, tagged reader", query(t, s, b, nostr.Filter{Kinds: []int{pGatedKind}}), l.pGated.Content)
	wantContents(t, "p-gated, other reader", query(t, s, reader(l.c.pk, l.channel), nostr.Filter{Kinds: []int{pGatedKind}}))
	// Only the search kinds stay searchable: the kind-1 note and the p-gated notice left the index.
	wantContents(t, "search", query(t, s, b, nostr.Filter{Search: "launch"}), l.message.Content)
	wantContents(t, "search profile", query(t, s, b, nostr.Filter{Search: "zed"}), l.profile.Content)

	// Replacing migrated events takes their old tag and search rows with them.
	mustSave(t, s, "",
		l.a.sign(t, nostr.Event{Kind: 30023, CreatedAt: 20, Content: "draft two", Tags: nostr.Tags{{"d", "x"}, {"p", l.c.pk}}}),
		l.a.sign(t, nostr.Event{Kind: 0, CreatedAt: 20, Content: `{"name":"yan"}`}))
	wantContents(t, "#p of the replaced article", query(t, s, b, nostr.Filter{Kinds: []int{30023}, Tags: nostr.TagMap{"p": {l.b.pk}}}))
	wantContents(t, "#d after replace", query(t, s, b, nostr.Filter{Tags: nostr.TagMap{"d": {"x"}}}), "draft two")
	wantContents(t, "replaced profile's words", query(t, s, b, nostr.Filter{Search: "zed"}))
	wantContents(t, "new profile's words", query(t, s, b, nostr.Filter{Search: "yan"}), `{"name":"yan"}`)

	// New messages join the migrated ones in the index.
	mustSave(t, s, l.channel, l.a.sign(t, nostr.Event{Kind: 9, CreatedAt: 21, Content: "launch moved", Tags: nostr.Tags{{"h", l.channel}}}))
	wantContents(t, "search after a new message", query(t, s, b, nostr.Filter{Search: "launch"}), "launch moved", l.message.Content)
}
