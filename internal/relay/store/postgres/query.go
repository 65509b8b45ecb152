package postgres

import (
	"strconv"
	"strings"

	"github.com/buzz-harness/buzz/internal/relay/store"
)

// dialect is PostgreSQL's store.Dialect: numbered placeholders, lists as one array parameter,
// and full-text search on the events.search column. Strings are passed through text, as
// they are when stored, so lookups agree with what was saved.
type dialect struct{}

func (dialect) Param(args *[]any, v any) string {
	if s, ok := v.(string); ok {
		v = text(s)
	}
	*args = append(*args, v)
	return "$" + strconv.Itoa(len(*args))
}

func (d dialect) In(args *[]any, col string, vals []string) string {
	return col + " = ANY(" + d.Param(args, textAll(vals)) + ")"
}

func (d dialect) InInts(args *[]any, col string, vals []int) string {
	return col + " = ANY(" + d.Param(args, vals) + "::int[])"
}

func (d dialect) InSet(args *[]any, col string, vals []string) string {
	return col + " = ANY(" + d.Param(args, textAll(vals)) + "::text[])"
}

func textAll(vals []string) []string {
	out := make([]string, len(vals))
	for i, v := range vals {
		out[i] = text(v)
	}
	return out
}

// asciiPunct splits words in search, matching the events.search column's translate().
const asciiPunct = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"

// Search matches the SQLite store's NIP-50 search: every whitespace-separated word must occur,
// as a phrase of its parts (so "build-log" finds "build-log.txt"), case-insensitively, with no
// operators.
func (d dialect) Search(args *[]any, s string) string {
	words := store.SearchTerms(s) // the words the relay counts against its search-term cap
	var parts []string
	for _, w := range words {
		w = strings.Map(func(r rune) rune {
			if r < 128 && strings.ContainsRune(asciiPunct, r) {
				return ' '
			}
			return r
		}, w)
		parts = append(parts, "phraseto_tsquery('simple', "+d.Param(args, w)+")")
	}
	if len(parts) == 0 {
		return ""
	}
	return "e.search @@ (" + strings.Join(parts, " && ") + ")"
}
