package cli

import (
	"encoding/json"
	"regexp"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/buzz-harness/buzz/internal/protocol"
)

// mentionCap bounds the p tags one message may carry (upstream MENTION_CAP).
const mentionCap = 50

// StripCode returns text with fenced code blocks and inline code spans blanked out (each masked
// byte becomes a space; line breaks are kept), so mention scanning ignores code. The result has
// the same length as text.
func StripCode(text string) string {
	masked := make([]bool, len(text))
	maskFences(text, masked)
	maskSpans(text, masked)
	out := []byte(text)
	for i, m := range masked {
		if m {
			out[i] = ' '
		}
	}
	return string(out)
}

func maskRange(text string, masked []bool, from, to int) {
	for i := from; i < to && i < len(text); i++ {
		if text[i] != '\n' && text[i] != '\r' {
			masked[i] = true
		}
	}
}

// lineSpans returns [start,end) of each line without its terminator (LF, CRLF or CR).
func lineSpans(text string) [][2]int {
	var out [][2]int
	start := 0
	for i := 0; i < len(text); i++ {
		switch text[i] {
		case '\n':
			out = append(out, [2]int{start, i})
			start = i + 1
		case '\r':
			out = append(out, [2]int{start, i})
			if i+1 < len(text) && text[i+1] == '\n' {
				i++
			}
			start = i + 1
		}
	}
	if start < len(text) {
		out = append(out, [2]int{start, len(text)})
	}
	return out
}

func runOf(s string, at int, c byte) int {
	n := 0
	for at+n < len(s) && s[at+n] == c {
		n++
	}
	return n
}

// maskFences masks CommonMark fenced blocks (``` or ~~~, at most 3 spaces of indent), whole
// lines at a time. An unclosed fence runs to the end of the text.
func maskFences(text string, masked []bool) {
	var marker byte
	var length int
	for _, ln := range lineSpans(text) {
		line := text[ln[0]:ln[1]]
		indent := len(line) - len(strings.TrimLeft(line, " "))
		if marker != 0 {
			maskRange(text, masked, ln[0], ln[1])
			if indent <= 3 {
				n := runOf(line, indent, marker)
				if n >= length && strings.Trim(line[indent+n:], " \t") == "" {
					marker = 0
				}
			}
			continue
		}
		if indent > 3 || indent >= len(line) || (line[indent] != '`' && line[indent] != '~') {
			continue
		}
		c := line[indent]
		n := runOf(line, indent, c)
		if n < 3 || (c == '`' && strings.Contains(line[indent+n:], "`")) {
			continue
		}
		maskRange(text, masked, ln[0], ln[1])
		marker, length = c, n
	}
}

// maskSpans masks inline code spans over the text the fence pass left: a backtick run opens a
// span closed by the next unmasked run of the same length (spans may cross lines).
func maskSpans(text string, masked []bool) {
	run := func(at int) int {
		n := 0
		for at+n < len(text) && text[at+n] == '`' && !masked[at+n] {
			n++
		}
		return n
	}
	for i := 0; i < len(text); {
		if text[i] != '`' || masked[i] || escaped(text, i) {
			i++
			continue
		}
		n := run(i)
		closeEnd := -1
		for j := i + n; j < len(text); {
			if text[j] != '`' || masked[j] {
				j++
				continue
			}
			m := run(j)
			if m == n {
				closeEnd = j + m
				break
			}
			j += m
		}
		if closeEnd < 0 {
			i += n
			continue
		}
		maskRange(text, masked, i, closeEnd)
		i = closeEnd
	}
}

// escaped reports whether text[i] is preceded by an odd number of backslashes.
func escaped(text string, i int) bool {
	n := 0
	for j := i - 1; j >= 0 && text[j] == '\\'; j-- {
		n++
	}
	return n%2 == 1
}

// AtMentions returns the distinct lowercased @names in text (which should already have code
// stripped), in first-seen order. An @ counts at the start of text or after whitespace or an
// opening bracket/quote. At each @ the known names (e.g. members' display names, possibly
// multi-word) are tried longest first, case-insensitively, ending at a word boundary; otherwise
// one word of letters, digits, '.', '-' and '_' is taken (trailing dots dropped).
func AtMentions(text string, known []string) []string {
	if !strings.Contains(text, "@") {
		return nil
	}
	names := make([]string, 0, len(known))
	for _, k := range known {
		if strings.TrimSpace(k) != "" {
			names = append(names, k)
		}
	}
	sort.SliceStable(names, func(i, j int) bool { return len(names[i]) > len(names[j]) })

	var out []string
	seen := map[string]bool{}
	for i := 0; i < len(text); i++ {
		if text[i] != '@' || !mentionStart(text, i) {
			continue
		}
		rest := text[i+1:]
		name := ""
		for _, k := range names {
			if len(rest) >= len(k) && strings.EqualFold(rest[:len(k)], k) && wordBoundary(rest[len(k):]) {
				name = strings.ToLower(k)
				break
			}
		}
		if name == "" {
			end := 0
			for end < len(rest) {
				r, size := utf8.DecodeRuneInString(rest[end:])
				if !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '.' || r == '-' || r == '_') {
					break
				}
				end += size
			}
			name = strings.ToLower(strings.TrimRight(rest[:end], "."))
		}
		if name != "" && !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	return out
}

func mentionStart(text string, at int) bool {
	if at == 0 {
		return true
	}
	r, _ := utf8.DecodeLastRuneInString(text[:at])
	return unicode.IsSpace(r) || strings.ContainsRune("([{\"'", r)
}

func wordBoundary(s string) bool {
	if s == "" {
		return true
	}
	r, _ := utf8.DecodeRuneInString(s)
	if r == '-' || r == '_' || r == '@' || r == '/' {
		return false
	}
	return unicode.IsSpace(r) || unicode.IsPunct(r) || unicode.IsSymbol(r)
}

var nostrURIRE = regexp.MustCompile(`nostr:(npub1[02-9ac-hj-np-z]+)`)

// NostrURIPubkeys returns the hex pubkeys of NIP-27 nostr:npub1… references in text (which
// should already have code stripped), deduplicated; undecodable ones are skipped.
func NostrURIPubkeys(text string) []string {
	var out []string
	seen := map[string]bool{}
	for _, m := range nostrURIRE.FindAllStringSubmatch(text, -1) {
		pk, err := protocol.ParsePubkey(m[1])
		if err == nil && !seen[pk] {
			seen[pk] = true
			out = append(out, pk)
		}
	}
	return out
}

// profileNames returns the display_name and name of a kind 0 content (either may be "").
func profileNames(content string) (displayName, name string) {
	var p struct {
		DisplayName any `json:"display_name"`
		Name        any `json:"name"`
	}
	if json.Unmarshal([]byte(content), &p) != nil {
		return "", ""
	}
	s := func(v any) string { t, _ := v.(string); return strings.TrimSpace(t) }
	return s(p.DisplayName), s(p.Name)
}

// mentionResolution is the outcome of matching @names against member profiles.
type mentionResolution struct {
	Pubkeys    []string            // resolved, in name order
	Unresolved []string            // names matching no member
	Ambiguous  map[string][]string // name → the several members it matches
}

// resolveNames matches each @name case-insensitively against members' display_name or name.
// profiles maps member pubkey → kind 0 content.
func resolveNames(names []string, profiles map[string]string) mentionResolution {
	res := mentionResolution{Ambiguous: map[string][]string{}}
	pks := make([]string, 0, len(profiles))
	for pk := range profiles {
		pks = append(pks, pk)
	}
	sort.Strings(pks)
	for _, n := range names {
		var hits []string
		for _, pk := range pks {
			dn, nm := profileNames(profiles[pk])
			if (dn != "" && strings.EqualFold(dn, n)) || (nm != "" && strings.EqualFold(nm, n)) {
				hits = append(hits, pk)
			}
		}
		switch len(hits) {
		case 0:
			res.Unresolved = append(res.Unresolved, n)
		case 1:
			res.Pubkeys = append(res.Pubkeys, hits[0])
		default:
			res.Ambiguous[n] = hits
		}
	}
	return res
}

// knownNames lists every display_name and name in profiles, for multi-word @name matching.
func knownNames(profiles map[string]string) []string {
	var out []string
	for _, c := range profiles {
		dn, nm := profileNames(c)
		for _, s := range []string{dn, nm} {
			if s != "" {
				out = append(out, s)
			}
		}
	}
	sort.Strings(out)
	return out
}
