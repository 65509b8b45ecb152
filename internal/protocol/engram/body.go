// Package engram implements NIP-AE agent memory ("engrams"): addressable kind-30174 events signed
// by the agent, NIP-44 v2 encrypted under the agent↔owner conversation key, each addressed by an
// HMAC of its slug so the slug never appears in clear. It covers slugs, the d tag, the byte-exact
// body encoding, building and strictly validating events, head selection, the core-memory
// decision the harness makes, and the pure parts of `buzz mem` (listing, hashing, patching).
//
// Everything here is pure: callers fetch events and publish them.
package engram

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Wire constants from NIP-AE.
const (
	CoreSlug   = "core"
	memPrefix  = "mem/"
	MaxSlugLen = 255
	// MaxBody is the largest serialised body NIP-44 can carry.
	MaxBody = 65535
	// DTagDomain is the HMAC domain prefix for d tags, followed by one 0x00 byte and the slug.
	DTagDomain = "agent-memory/v1/d-tag"
)

// ValidateSlug checks the NIP-AE slug grammar: "core", or
// mem/<seg>(/<seg>)* where each seg is [a-z0-9][a-z0-9_-]{0,63}, at most 255 bytes in all.
func ValidateSlug(slug string) error {
	if slug == CoreSlug {
		return nil
	}
	if len(slug) > MaxSlugLen {
		return fmt.Errorf("invalid slug: %d bytes, the limit is %d", len(slug), MaxSlugLen)
	}
	rest, ok := strings.CutPrefix(slug, memPrefix)
	if !ok {
		return fmt.Errorf("invalid slug %q: want core or mem/…", slug)
	}
	for i, seg := range strings.Split(rest, "/") {
		if err := checkSegment(seg); err != nil {
			return fmt.Errorf("invalid slug %q: segment %d %s", slug, i+1, err)
		}
	}
	return nil
}

func checkSegment(s string) error {
	if s == "" {
		return errors.New("is empty")
	}
	if len(s) > 64 {
		return errors.New("is longer than 64 bytes")
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if i == 0 && !alnum {
			return errors.New("must start with [a-z0-9]")
		}
		if !alnum && c != '_' && c != '-' {
			return fmt.Errorf("has %q; only [a-z0-9_-] are allowed", c)
		}
	}
	return nil
}

// NormalizeSlug turns CLI shorthand into a slug: "core" stays, anything else gains "mem/" unless
// it already has it. The result is validated.
func NormalizeSlug(raw string) (string, error) {
	slug := raw
	if raw != CoreSlug && !strings.HasPrefix(raw, memPrefix) {
		slug = memPrefix + raw
	}
	if err := ValidateSlug(slug); err != nil {
		return "", err
	}
	return slug, nil
}

// Body is a decrypted engram. For core, Text is the profile. For a memory, Text is the value and
// Tombstone marks "value": null (the slug reads as absent).
type Body struct {
	Slug      string
	Text      string
	Tombstone bool
}

// CoreBody is the core record holding the agent's identity, rules and goals.
func CoreBody(profile string) Body { return Body{Slug: CoreSlug, Text: profile} }

// MemoryBody is a memory record with a value.
func MemoryBody(slug, value string) Body { return Body{Slug: slug, Text: value} }

// TombstoneBody deletes a memory in band ("value": null).
func TombstoneBody(slug string) Body { return Body{Slug: slug, Tombstone: true} }

// IsCore reports whether b is the core record.
func (b Body) IsCore() bool { return b.Slug == CoreSlug }

// Marshal returns the byte-exact body NIP-AE encrypts: no whitespace, slug first, then value or
// profile. It rejects a bad slug, a core tombstone, text that is not UTF-8, and a body over
// MaxBody bytes.
func (b Body) Marshal() ([]byte, error) {
	if err := ValidateSlug(b.Slug); err != nil {
		return nil, err
	}
	if b.IsCore() && b.Tombstone {
		return nil, errors.New("core cannot be a tombstone; write an empty profile instead")
	}
	if !utf8.ValidString(b.Text) {
		return nil, errors.New("memory text is not valid UTF-8")
	}
	var out bytes.Buffer
	out.Grow(len(b.Slug) + len(b.Text) + 32)
	out.WriteString(`{"slug":`)
	writeString(&out, b.Slug)
	switch {
	case b.IsCore():
		out.WriteString(`,"profile":`)
		writeString(&out, b.Text)
	case b.Tombstone:
		out.WriteString(`,"value":null`)
	default:
		out.WriteString(`,"value":`)
		writeString(&out, b.Text)
	}
	out.WriteByte('}')
	if out.Len() > MaxBody {
		return nil, fmt.Errorf("memory body is %d bytes, the limit is %d", out.Len(), MaxBody)
	}
	return out.Bytes(), nil
}

// writeString escapes as upstream does: quote and backslash, the five short control escapes,
// \u00xx (lowercase) for other control bytes, everything else raw UTF-8. encoding/json would
// also escape <, >, & and U+2028/9, which changes the bytes and so the vectors.
func writeString(out *bytes.Buffer, s string) {
	const hexdig = "0123456789abcdef"
	out.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '"':
			out.WriteString(`\"`)
		case '\\':
			out.WriteString(`\\`)
		case '\b':
			out.WriteString(`\b`)
		case '\f':
			out.WriteString(`\f`)
		case '\n':
			out.WriteString(`\n`)
		case '\r':
			out.WriteString(`\r`)
		case '\t':
			out.WriteString(`\t`)
		default:
			if c < 0x20 {
				out.WriteString(`\u00`)
				out.WriteByte(hexdig[c>>4])
				out.WriteByte(hexdig[c&0xf])
			} else {
				out.WriteByte(c)
			}
		}
	}
	out.WriteByte('"')
}

// ParseBody strictly decodes a decrypted body: valid UTF-8, one JSON object, no duplicate member
// names at any depth, nothing after it. Unknown members are ignored. The slug must pass the
// grammar and the shape must match it: a string profile for core, a string or null value for a
// memory.
func ParseBody(plain []byte) (Body, error) {
	if !utf8.Valid(plain) {
		return Body{}, errors.New("body is not valid UTF-8")
	}
	if err := checkStrictJSON(plain); err != nil {
		return Body{}, err
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(plain, &obj); err != nil || obj == nil {
		return Body{}, errors.New("body is not a JSON object")
	}
	slug, err := stringField(obj, "slug")
	if err != nil {
		return Body{}, err
	}
	if err := ValidateSlug(slug); err != nil {
		return Body{}, err
	}
	if slug == CoreSlug {
		profile, err := stringField(obj, "profile")
		if err != nil {
			return Body{}, err
		}
		return CoreBody(profile), nil
	}
	raw, ok := obj["value"]
	if !ok {
		return Body{}, errors.New("memory body has no value")
	}
	if string(raw) == "null" {
		return TombstoneBody(slug), nil
	}
	value, err := stringField(obj, "value")
	if err != nil {
		return Body{}, err
	}
	return MemoryBody(slug, value), nil
}

func stringField(obj map[string]json.RawMessage, name string) (string, error) {
	raw, ok := obj[name]
	if !ok {
		return "", fmt.Errorf("body has no %s", name)
	}
	if len(raw) == 0 || raw[0] != '"' {
		return "", fmt.Errorf("body %s is not a string", name)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fmt.Errorf("body %s is not a string", name)
	}
	return s, nil
}

// checkStrictJSON walks one JSON value and rejects duplicate object keys (compared after
// unescaping) and trailing data. encoding/json itself keeps the last duplicate silently, and two
// readers that pick different duplicates would pick different heads.
func checkStrictJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := walkValue(dec); err != nil {
		return fmt.Errorf("body is not strict JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("body is not strict JSON: trailing data after the object")
	}
	return checkSurrogates(b)
}

// checkSurrogates rejects \u escapes that encode an unpaired UTF-16 surrogate. encoding/json
// turns them into U+FFFD; upstream's parser refuses them, and both sides must agree on validity.
// It runs on text already known to be valid JSON, where a backslash only occurs inside strings.
func checkSurrogates(b []byte) error {
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		i++
		if i >= len(b) || b[i] != 'u' {
			continue // a two-byte escape such as \\ or \n: skip the escaped byte
		}
		hi, ok := hex4(b, i+1)
		if !ok {
			continue
		}
		i += 4
		switch {
		case hi >= 0xdc00 && hi <= 0xdfff:
			return errors.New("body is not strict JSON: unpaired low surrogate escape")
		case hi >= 0xd800 && hi <= 0xdbff:
			lo, ok := hex4(b, i+3)
			if i+2 >= len(b) || b[i+1] != '\\' || b[i+2] != 'u' || !ok || lo < 0xdc00 || lo > 0xdfff {
				return errors.New("body is not strict JSON: unpaired high surrogate escape")
			}
			i += 6
		}
	}
	return nil
}

func hex4(b []byte, at int) (rune, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[at : at+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

func walkValue(dec *json.Decoder) error {
	t, err := dec.Token()
	if err != nil {
		return err
	}
	d, ok := t.(json.Delim)
	if !ok {
		return nil
	}
	switch d {
	case '{':
		seen := map[string]bool{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return err
			}
			k, _ := kt.(string)
			if seen[k] {
				return fmt.Errorf("duplicate member %q", k)
			}
			seen[k] = true
			if err := walkValue(dec); err != nil {
				return err
			}
		}
	case '[':
		for dec.More() {
			if err := walkValue(dec); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("unexpected %q", d)
	}
	_, err = dec.Token() // the closing delimiter
	return err
}
