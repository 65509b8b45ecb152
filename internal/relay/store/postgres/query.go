package postgres

import (
	"sort"
	"strconv"
	"strings"

	"github.com/buzz-harness/buzz/internal/relay/store"
)

// args collects query parameters; add returns the placeholder of the one it appends.
type args []any

func (a *args) add(v any) string {
	if s, ok := v.(string); ok {
		v = text(s)
	}
	*a = append(*a, v)
	return "$" + strconv.Itoa(len(*a))
}

func textAll(vals []string) []string {
	out := make([]string, len(vals))
	for i, v := range vals {
		out[i] = text(v)
	}
	return out
}

// readAccess applies the relay's Access decision as SQL over events e, the same way the SQLite
// store does (store/query.go): the store adds no rule of its own. Events of channels not listed
// are never returned; PGated kinds only when a p tag names the reader; Personal kinds only for
// their author or the pubkey in a p tag.
func readAccess(a *args, acc store.Access) string {
	conds := []string{"(e.channel_id IS NULL OR e.channel_id = ANY(" + a.add(textAll(acc.Channels)) + "::text[]))"}
	if len(acc.PGated) > 0 || len(acc.Personal) > 0 {
		r := a.add(acc.Pubkey)
		// The p-tag tests name event_tags' whole key (name, value, created_at, seq): one lookup.
		if len(acc.PGated) > 0 {
			conds = append(conds, `(e.kind NOT IN (`+kindList(acc.PGated)+`)
		OR EXISTS (SELECT 1 FROM event_tags pt WHERE pt.name = 'p' AND pt.value = `+r+` AND pt.created_at = e.created_at AND pt.seq = e.seq))`)
		}
		if len(acc.Personal) > 0 {
			conds = append(conds, `(e.kind NOT IN (`+kindList(acc.Personal)+`) OR e.pubkey = `+r+`
		OR EXISTS (SELECT 1 FROM event_tags ot WHERE ot.name = 'p' AND ot.value = `+r+` AND ot.created_at = e.created_at AND ot.seq = e.seq))`)
		}
	}
	return strings.Join(conds, " AND ")
}

func kindList(kinds []int) string {
	s := make([]string, len(kinds))
	for i, k := range kinds {
		s[i] = strconv.Itoa(k)
	}
	return strings.Join(s, ",")
}

// buildWhere turns a filter into an SQL condition over events e, with acc applied, appending
// its parameters to a. empty is true when the filter can match nothing (an empty list in it).
func buildWhere(a *args, acc store.Access, f store.Filter) (where string, empty bool) {
	conds := []string{"e.deleted_at IS NULL", readAccess(a, acc)}
	if f.IDs != nil {
		if len(f.IDs) == 0 {
			return "", true
		}
		conds = append(conds, "e.id = ANY("+a.add(textAll(f.IDs))+")")
	}
	if f.Authors != nil {
		if len(f.Authors) == 0 {
			return "", true
		}
		conds = append(conds, "e.pubkey = ANY("+a.add(textAll(f.Authors))+")")
	}
	if f.Kinds != nil {
		if len(f.Kinds) == 0 {
			return "", true
		}
		conds = append(conds, "e.kind = ANY("+a.add(f.Kinds)+"::int[])")
	}
	if f.Since != nil {
		conds = append(conds, "e.created_at >= "+a.add(int64(*f.Since)))
	}
	if f.Until != nil {
		u := a.add(int64(*f.Until))
		if f.BeforeID != "" {
			// Keyset paging in (created_at DESC, id ASC) order: strictly after (until, before_id).
			conds = append(conds, "(e.created_at < "+u+" OR (e.created_at = "+u+" AND e.id > "+a.add(f.BeforeID)+"))")
		} else {
			conds = append(conds, "e.created_at <= "+u)
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
		conds = append(conds, "e.seq IN (SELECT seq FROM event_tags WHERE name = "+a.add(name)+
			" AND value = ANY("+a.add(textAll(vals))+"))")
	}
	if f.Search != "" {
		q := searchQuery(a, f.Search)
		if q == "" {
			return "", true
		}
		conds = append(conds, "e.search @@ ("+q+")")
	}
	return strings.Join(conds, " AND "), false
}

// asciiPunct splits words in search, matching the events.search column's translate().
const asciiPunct = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"

// searchQuery mirrors the SQLite store's NIP-50 search: every whitespace-separated word must
// occur, as a phrase of its parts (so "build-log" finds "build-log.txt"), case-insensitively,
// with no operators: query text can never be a syntax error. Returns "" when there are no words.
func searchQuery(a *args, s string) string {
	words := store.SearchTerms(s) // the words the relay counts against its search-term cap
	var parts []string
	for _, w := range words {
		w = strings.Map(func(r rune) rune {
			if r < 128 && strings.ContainsRune(asciiPunct, r) {
				return ' '
			}
			return r
		}, w)
		parts = append(parts, "phraseto_tsquery('simple', "+a.add(w)+")")
	}
	return strings.Join(parts, " && ")
}
