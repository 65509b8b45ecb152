// Package store persists the relay's events, channels, members and NIP-98 replay guard.
// The relay talks to it through Store; SQLite (Open) is the embedded implementation and
// store/postgres the one several relay nodes can share. Both build a filter's SQL and apply
// NIP-01 replacement with the same code (query.go), each through its own Dialect.
// storetest is the suite both pass.
package store

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
)

// ErrDuplicate means the event id is already stored.
var ErrDuplicate = errors.New(protocol.ReasonDuplicate.Msg("event already stored"))

// ErrNewerExists means a replaceable or addressable event lost to a newer stored version.
var ErrNewerExists = errors.New(protocol.ReasonDuplicate.Msg("a newer version is already stored"))

// Filter is a NIP-01 filter plus Buzz's keyset cursor: with BeforeID set, only events strictly
// after (Until, BeforeID) in (created_at DESC, id ASC) order match.
type Filter struct {
	nostr.Filter
	BeforeID string
	// MaxBytes ends a Query early once the events it returns hold this many bytes of content
	// and tags (always at least one event); 0 = no cap. The relay pages results by it.
	MaxBytes int
}

// Full reports whether events of size bytes (EventBytes summed) fill f's byte cap.
func (f Filter) Full(size int) bool { return f.MaxBytes > 0 && size >= f.MaxBytes }

// EventBytes is an event's size as MaxBytes counts it: its content and tag values.
func EventBytes(ev *nostr.Event) int {
	n := len(ev.Content)
	for _, t := range ev.Tags {
		for _, v := range t {
			n += len(v)
		}
	}
	return n
}

// Channel is one channel's stored state.
type Channel struct {
	ID         string
	Name       string
	About      string
	Visibility string // open | private
	Type       string // stream | forum | dm
	Topic      string
	Purpose    string
	Archived   bool
	TTL        int64
	CreatedBy  string
	CreatedAt  int64
	Deleted    bool
	Members    map[string]string // pubkey -> role; filled by Channels
}

// Access is what one reader may see, decided by the relay (internal/relay/acl.go is the only
// place read rules are written). The store applies it inside every query, before limits, and
// holds no read rule of its own: it never looks at channel visibility or membership when
// reading.
type Access struct {
	Pubkey string
	// Channels lists the channels whose events the reader may see; events of any other channel
	// are never returned. Global events (no channel) are subject only to the kind rules below.
	Channels []string
	// PGated kinds are returned only when a p tag names Pubkey.
	PGated []int
	// Personal kinds are returned only when Pubkey wrote them or a p tag names it.
	Personal []int
	// AuthorOnly kinds are returned only to their author (NIP-ER reminders).
	AuthorOnly []int
}

// Store is what the relay needs from storage. Read access is enforced by the relay, which
// passes its decision as an Access; the store only applies it (see Access).
type Store interface {
	// Update runs fn in one write transaction. fn may run more than once (PostgreSQL reruns a
	// transaction that lost a deadlock to another writer), so it must only write through the Tx.
	Update(ctx context.Context, fn func(Tx) error) error
	// Query returns events matching f that a may see, newest first, at most limit. It stops
	// and returns ctx's error when ctx ends.
	Query(ctx context.Context, a Access, f Filter, limit int) ([]nostr.Event, error)
	// Count counts distinct events matching any of filters that a may see.
	Count(ctx context.Context, a Access, filters []Filter) (int64, error)
	// Event returns a stored, non-deleted event and its channel ("" when global), or nil.
	Event(ctx context.Context, id string) (*nostr.Event, string, error)
	// LatestCreatedAt is the newest created_at of pubkey's events of kind in channel (0 if none).
	LatestCreatedAt(ctx context.Context, pubkey string, kind int, channelID string) (int64, error)
	// Channels loads every channel with its members.
	Channels(ctx context.Context) ([]Channel, error)
	// MarkAuthSeen records a NIP-98 auth event id until expires; false if it was already seen.
	MarkAuthSeen(ctx context.Context, id string, now, expires time.Time) (bool, error)
	Close() error
}

// Tx is the write side, valid only inside Update.
type Tx interface {
	// SaveEvent stores ev (scoped to channelID, "" = global) with NIP-01 replaceable and
	// addressable semantics. Returns ErrDuplicate or ErrNewerExists when nothing was stored.
	SaveEvent(ev *nostr.Event, channelID string) error
	// SoftDelete marks the events deleted; with author set only that author's events.
	// Returns how many were deleted.
	SoftDelete(ids []string, author string, at int64) (int, error)
	PutChannel(ch Channel) error
	PutMember(channelID, pubkey, role string, at int64) error
	RemoveMember(channelID, pubkey string) error
}

// SearchKinds are the kinds NIP-50 search finds: the messages, forum posts and comments that
// `buzz messages search` and the MCP search tool ask for, and profiles, by which the CLI
// resolves an author's display name. Events of other kinds are not indexed for search (every
// index entry is a write on the ingest path). The migrations that rebuild the search index list
// the same kinds.
var SearchKinds = []int{protocol.KindProfile, protocol.KindStreamMessage, protocol.KindStreamMessageV2,
	protocol.KindForumPost, protocol.KindForumComment}

// Searchable reports whether ev goes into the search index: a search kind with some content.
func Searchable(ev *nostr.Event) bool {
	return slices.Contains(SearchKinds, ev.Kind) && strings.TrimSpace(ev.Content) != ""
}

// TagKey is one indexed tag of an event: a single-letter name and its first value.
type TagKey struct{ Name, Value string }

// IndexedTags lists the tags tag filters (#e, #p, #h, ...) match on, each pair once, after clean
// (which maps a value to what the backend can store; nil keeps it). Saving and purging an event
// both derive its tag rows here, so a purge finds exactly the rows the save wrote.
//
// A NIP-92 imeta tag's file hash is indexed as an x tag (NIP-94's name for it): the relay finds
// the events that make a stored blob readable with #x (blobs.go in internal/relay).
func IndexedTags(tags nostr.Tags, clean func(string) string) []TagKey {
	var out []TagKey
	seen := map[TagKey]bool{}
	add := func(k TagKey) {
		if clean != nil {
			k = TagKey{clean(k.Name), clean(k.Value)}
		}
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	for _, tag := range tags {
		if len(tag) < 2 || len(tag[0]) != 1 {
			continue
		}
		add(TagKey{tag[0], tag[1]})
	}
	for _, h := range protocol.ImetaHashes(tags) {
		add(TagKey{"x", h})
	}
	return out
}
