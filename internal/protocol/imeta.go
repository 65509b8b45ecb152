package protocol

import (
	"net/url"
	"strconv"
	"strings"

	"github.com/nbd-wtf/go-nostr"
)

// Attachment is one NIP-92 imeta tag: a file a message carries, as
// ["imeta", "url https://…", "m image/png", "x <sha256>", "size 1234", "alt …", …], each entry a
// space-delimited key and value. Fields the tag omits, or gives malformed, are zero.
type Attachment struct {
	URL      string   // http(s) URL of the file
	Type     string   // m: MIME type, lowercase (type/subtype)
	SHA256   string   // x: the file's SHA-256, lowercase hex
	Size     int64    // size in bytes; 0 when unknown
	Dim      string   // dim: WIDTHxHEIGHT
	Alt      string   // alt: a description of the file
	Blurhash string   // blurhash: a preview placeholder
	Fallback []string // fallback: other URLs of the same file
}

// MaxAttachments bounds how many attachments one event is read for: an event of the relay's
// largest size could otherwise carry thousands, each a fetch or a line of prompt.
const MaxAttachments = 16

// maxTagSize bounds the size field: beyond 2^53 a JSON reader would round it.
const maxTagSize = 1 << 53

// Attachments returns an event's valid imeta tags in order, one per URL (the first wins, as
// NIP-92 allows only one), at most MaxAttachments. Invalid tags are skipped, as NIP-92 lets
// clients do: it is outside input.
func Attachments(tags nostr.Tags) []Attachment {
	var out []Attachment
	seen := map[string]bool{}
	for _, t := range tags {
		a, ok := ParseImeta(t)
		if !ok || seen[a.URL] {
			continue
		}
		seen[a.URL] = true
		out = append(out, a)
		if len(out) == MaxAttachments {
			break
		}
	}
	return out
}

// ParseImeta reads one tag as NIP-92 imeta: exactly one url (http or https) and at least one
// other field. Unknown keys are ignored; a known key given twice keeps its first value.
func ParseImeta(t nostr.Tag) (Attachment, bool) {
	if len(t) < 3 || t[0] != "imeta" {
		return Attachment{}, false
	}
	var a Attachment
	urls, others := 0, 0
	for _, entry := range t[1:] {
		key, val, ok := strings.Cut(entry, " ")
		val = strings.TrimSpace(val)
		if !ok || key == "" || val == "" {
			continue
		}
		if key == "url" {
			urls++
			a.URL = val
			continue
		}
		others++
		switch key {
		case "m":
			a.Type = first(a.Type, MediaType(val))
		case "x":
			a.SHA256 = first(a.SHA256, hexHash(val))
		case "size":
			if a.Size == 0 {
				a.Size = size(val)
			}
		case "dim":
			a.Dim = first(a.Dim, val)
		case "alt":
			a.Alt = first(a.Alt, val)
		case "blurhash":
			a.Blurhash = first(a.Blurhash, val)
		case "fallback":
			if webURL(val) {
				a.Fallback = append(a.Fallback, val)
			}
		}
	}
	if urls != 1 || others == 0 || !webURL(a.URL) {
		return Attachment{}, false
	}
	return a, true
}

// Tag is the attachment as an imeta tag, fields in NIP-92's order; empty fields are left out.
func (a Attachment) Tag() nostr.Tag {
	t := nostr.Tag{"imeta", "url " + a.URL}
	add := func(key, val string) {
		if val != "" {
			t = append(t, key+" "+val)
		}
	}
	add("m", a.Type)
	add("x", a.SHA256)
	if a.Size > 0 {
		add("size", strconv.FormatInt(a.Size, 10))
	}
	add("dim", a.Dim)
	add("alt", a.Alt)
	add("blurhash", a.Blurhash)
	for _, f := range a.Fallback {
		add("fallback", f)
	}
	return t
}

// ContentWithAttachments is a message's text with the URLs of its attachments after it, one a
// line (NIP-92: each imeta's URL appears in the content). Blank text leaves only the URLs.
func ContentWithAttachments(content string, atts []Attachment) string {
	lines := []string{}
	if strings.TrimSpace(content) != "" {
		lines = append(lines, content)
	}
	for _, a := range atts {
		lines = append(lines, a.URL)
	}
	return strings.Join(lines, "\n")
}

// IsImage reports an attachment whose declared type is an image.
func (a Attachment) IsImage() bool { return strings.HasPrefix(a.Type, "image/") }

// ImetaHashes are the x values of an event's imeta tags (every valid one, not only the first
// MaxAttachments): what the relay indexes so that a blob's readers can be found.
func ImetaHashes(tags nostr.Tags) []string {
	var out []string
	for _, t := range tags {
		if a, ok := ParseImeta(t); ok && a.SHA256 != "" {
			out = append(out, a.SHA256)
		}
	}
	return out
}

func first(have, v string) string {
	if have != "" {
		return have
	}
	return v
}

// webURL reports an absolute http or https URL with a host.
func webURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// hexHash is s as a lowercase SHA-256 hex string, or "" when it is not one.
func hexHash(s string) string {
	s = strings.ToLower(s)
	if !IsHex64(s) {
		return ""
	}
	return s
}

// size is a non-negative decimal byte count, or 0.
func size(s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > maxTagSize {
		return 0
	}
	return n
}

// MediaType is s as a lowercase type/subtype (parameters dropped), or "" when it is not one.
func MediaType(s string) string {
	s, _, _ = strings.Cut(s, ";")
	s = strings.ToLower(strings.TrimSpace(s))
	typ, sub, ok := strings.Cut(s, "/")
	if !ok || !mediaToken(typ) || !mediaToken(sub) {
		return ""
	}
	return s
}

// mediaToken is an RFC 6838 restricted name: letters, digits and !#$&-^_.+ , at most 127.
func mediaToken(s string) bool {
	if s == "" || len(s) > 127 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$&-^_.+", c) >= 0:
		default:
			return false
		}
	}
	return true
}
