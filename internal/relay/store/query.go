package store

import (
	"encoding/json"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// buildWhere turns a filter into an SQL condition over events e, with the reader's Access
// applied. empty is true when the filter can match nothing (an empty list in it).
func buildWhere(a Access, f Filter) (where string, args []any, empty bool) {
	conds := []string{"e.deleted_at IS NULL"}
	chans, _ := json.Marshal(a.Channels)
	if a.Channels == nil {
		chans = []byte("[]")
	}
	// One JSON parameter however many channels the reader may see.
	conds = append(conds, `(e.channel_id IS NULL OR e.channel_id IN (SELECT value FROM json_each(?)))`)
	args = append(args, string(chans))
	// The p-tag tests name event_tags' whole key (name, value, created_at, seq): one lookup.
	if len(a.PGated) > 0 {
		conds = append(conds, `(e.kind NOT IN (`+intList(a.PGated)+`)
		OR EXISTS (SELECT 1 FROM event_tags pt WHERE pt.name = 'p' AND pt.value = ? AND pt.created_at = e.created_at AND pt.seq = e.seq))`)
		args = append(args, a.Pubkey)
	}
	if len(a.Personal) > 0 {
		conds = append(conds, `(e.kind NOT IN (`+intList(a.Personal)+`) OR e.pubkey = ?
		OR EXISTS (SELECT 1 FROM event_tags ot WHERE ot.name = 'p' AND ot.value = ? AND ot.created_at = e.created_at AND ot.seq = e.seq))`)
		args = append(args, a.Pubkey, a.Pubkey)
	}

	in := func(col string, vals []string) {
		conds = append(conds, col+" IN ("+placeholders(len(vals))+")")
		for _, v := range vals {
			args = append(args, v)
		}
	}
	if f.IDs != nil {
		if len(f.IDs) == 0 {
			return "", nil, true
		}
		in("e.id", f.IDs)
	}
	if f.Authors != nil {
		if len(f.Authors) == 0 {
			return "", nil, true
		}
		in("e.pubkey", f.Authors)
	}
	if f.Kinds != nil {
		if len(f.Kinds) == 0 {
			return "", nil, true
		}
		conds = append(conds, "e.kind IN ("+placeholders(len(f.Kinds))+")")
		for _, k := range f.Kinds {
			args = append(args, k)
		}
	}
	if f.Since != nil {
		conds = append(conds, "e.created_at >= ?")
		args = append(args, int64(*f.Since))
	}
	if f.Until != nil {
		if f.BeforeID != "" {
			// Keyset paging in (created_at DESC, id ASC) order: strictly after (until, before_id).
			conds = append(conds, "(e.created_at < ? OR (e.created_at = ? AND e.id > ?))")
			args = append(args, int64(*f.Until), int64(*f.Until), f.BeforeID)
		} else {
			conds = append(conds, "e.created_at <= ?")
			args = append(args, int64(*f.Until))
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
			return "", nil, true
		}
		conds = append(conds, "e.seq IN (SELECT seq FROM event_tags WHERE name = ? AND value IN ("+placeholders(len(vals))+"))")
		args = append(args, name)
		for _, v := range vals {
			args = append(args, v)
		}
	}
	if f.Search != "" {
		q := FTSQuery(f.Search)
		if q == "" {
			return "", nil, true
		}
		conds = append(conds, "e.seq IN (SELECT rowid FROM events_fts WHERE events_fts MATCH ?)")
		args = append(args, q)
	}
	return strings.Join(conds, " AND "), args, false
}

func intList(ks []int) string {
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = strconv.Itoa(k)
	}
	return strings.Join(s, ",")
}

// SearchTerms splits search text into the words FTSQuery matches (the relay bounds their number).
func SearchTerms(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) })
}

func placeholders(n int) string {
	if n <= 0 {
		return ""
	}
	return strings.Repeat("?,", n-1) + "?"
}

// FTSQuery turns free text into an FTS5 query that cannot be a syntax error: every word
// becomes a quoted string (all must match). Returns "" when there are no words.
func FTSQuery(s string) string {
	words := SearchTerms(s)
	var parts []string
	for _, w := range words {
		w = strings.ReplaceAll(w, `"`, `""`)
		parts = append(parts, `"`+w+`"`)
	}
	return strings.Join(parts, " ")
}
