package store

import (
	"sort"
	"strconv"
	"strings"
	"unicode"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
)

// Dialect spells what differs between the SQL stores in the statements written here (Where,
// VersionsQuery): placeholders, lists and search. Both stores share the rules; each keeps its
// database's way of saying them. Every method appends its parameters to args.
type Dialect interface {
	// Param adds v and returns its placeholder.
	Param(args *[]any, v any) string
	// In is "col IN (vals)" for the short lists of a filter (ids, authors, tag values).
	In(args *[]any, col string, vals []string) string
	// InInts is In for integers (kinds).
	InInts(args *[]any, col string, vals []int) string
	// InSet is "col IN (vals)" for a list as long as the channels a reader may see, passed
	// as one parameter however long it is.
	InSet(args *[]any, col string, vals []string) string
	// Search is the NIP-50 condition on events e for text: every word must occur, and no text
	// is a syntax error. "" when text has no words.
	Search(args *[]any, text string) string
}

// Where turns a filter into an SQL condition over events e, with the reader's Access applied,
// appending its parameters to args. empty is true when the filter can match nothing (an empty
// list in it).
func Where(d Dialect, args *[]any, a Access, f Filter) (where string, empty bool) {
	conds := []string{"e.deleted_at IS NULL",
		"(e.channel_id IS NULL OR " + d.InSet(args, "e.channel_id", a.Channels) + ")"}
	// The p-tag tests name event_tags' whole key (name, value, created_at, seq): one lookup.
	if len(a.PGated) > 0 {
		conds = append(conds, `(e.kind NOT IN (`+intList(a.PGated)+`)
		OR EXISTS (SELECT 1 FROM event_tags pt WHERE pt.name = 'p' AND pt.value = `+d.Param(args, a.Pubkey)+` AND pt.created_at = e.created_at AND pt.seq = e.seq))`)
	}
	if len(a.Personal) > 0 {
		conds = append(conds, `(e.kind NOT IN (`+intList(a.Personal)+`) OR e.pubkey = `+d.Param(args, a.Pubkey)+`
		OR EXISTS (SELECT 1 FROM event_tags ot WHERE ot.name = 'p' AND ot.value = `+d.Param(args, a.Pubkey)+` AND ot.created_at = e.created_at AND ot.seq = e.seq))`)
	}
	if len(a.AuthorOnly) > 0 {
		conds = append(conds, `(e.kind NOT IN (`+intList(a.AuthorOnly)+`) OR e.pubkey = `+d.Param(args, a.Pubkey)+`)`)
	}
	if f.IDs != nil {
		if len(f.IDs) == 0 {
			return "", true
		}
		conds = append(conds, d.In(args, "e.id", f.IDs))
	}
	if f.Authors != nil {
		if len(f.Authors) == 0 {
			return "", true
		}
		conds = append(conds, d.In(args, "e.pubkey", f.Authors))
	}
	if f.Kinds != nil {
		if len(f.Kinds) == 0 {
			return "", true
		}
		conds = append(conds, d.InInts(args, "e.kind", f.Kinds))
	}
	if f.Since != nil {
		conds = append(conds, "e.created_at >= "+d.Param(args, int64(*f.Since)))
	}
	if f.Until != nil {
		if f.BeforeID != "" {
			// Keyset paging in (created_at DESC, id ASC) order: strictly after (until, before_id).
			conds = append(conds, "(e.created_at < "+d.Param(args, int64(*f.Until))+
				" OR (e.created_at = "+d.Param(args, int64(*f.Until))+" AND e.id > "+d.Param(args, f.BeforeID)+"))")
		} else {
			conds = append(conds, "e.created_at <= "+d.Param(args, int64(*f.Until)))
		}
	}
	names := make([]string, 0, len(f.Tags))
	for name := range f.Tags {
		names = append(names, name)
	}
	sort.Strings(names) // stable SQL text, friendlier to the statement cache
	for _, name := range names {
		vals := f.Tags[name]
		if vals == nil {
			continue
		}
		if len(vals) == 0 {
			return "", true
		}
		conds = append(conds, "e.seq IN (SELECT seq FROM event_tags WHERE name = "+d.Param(args, name)+
			" AND "+d.In(args, "value", vals)+")")
	}
	if f.Search != "" {
		q := d.Search(args, f.Search)
		if q == "" {
			return "", true
		}
		conds = append(conds, q)
	}
	return strings.Join(conds, " AND "), false
}

func intList(ks []int) string {
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = strconv.Itoa(k)
	}
	return strings.Join(s, ",")
}

// SearchTerms splits search text into the words a search matches (the relay bounds their number).
func SearchTerms(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) })
}

// Address is where NIP-01 keeps one version of a replaceable event (kind and author) or of an
// addressable one (kind, author and d tag).
type Address struct {
	Kind   int
	Pubkey string
	D      *string // the d tag, for an addressable kind only
}

// AddressOf is ev's address; ok is false for a regular event, which replaces nothing.
func AddressOf(ev *nostr.Event) (addr Address, ok bool) {
	addr = Address{Kind: ev.Kind, Pubkey: ev.PubKey}
	switch {
	case protocol.IsAddressable(ev.Kind):
		d := protocol.TagValue(ev.Tags, "d")
		addr.D = &d
	case !protocol.IsReplaceable(ev.Kind):
		return Address{}, false
	}
	return addr, true
}

// VersionsQuery selects seq, id, created_at and tags of the live events stored at addr.
func VersionsQuery(d Dialect, addr Address) (string, []any) {
	var args []any
	q := `SELECT seq, id, created_at, tags FROM events WHERE kind = ` + d.Param(&args, addr.Kind) +
		` AND pubkey = ` + d.Param(&args, addr.Pubkey) + ` AND deleted_at IS NULL`
	if addr.D != nil {
		q += ` AND d_tag = ` + d.Param(&args, *addr.D)
	}
	return q, args
}

// Version is one event stored at a new event's address.
type Version struct {
	ID        string
	CreatedAt int64
}

// Replaces applies NIP-01 to saving ev over the versions stored at its address: it returns
// the indexes of those ev replaces, or ErrDuplicate when ev is stored already, or
// ErrNewerExists when one wins over ev: the newest wins, and on a created_at tie the lowest id.
func Replaces(ev *nostr.Event, stored []Version) ([]int, error) {
	var older []int
	newer := false
	for i, v := range stored {
		switch {
		case v.ID == ev.ID:
			return nil, ErrDuplicate
		case v.CreatedAt > int64(ev.CreatedAt) || (v.CreatedAt == int64(ev.CreatedAt) && v.ID < ev.ID):
			newer = true
		default:
			older = append(older, i)
		}
	}
	if newer {
		return nil, ErrNewerExists
	}
	return older, nil
}
