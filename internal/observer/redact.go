package observer

import (
	"regexp"
	"strings"
)

// Redacted replaces every secret Redact removes.
const Redacted = "[REDACTED]"

var (
	// Bech32 nostr secret keys.
	nsecRe = regexp.MustCompile(`nsec1[qpzry9x8gf2tvdw0s3jn54khce6mua7l]{20,}`)
	// A 64-hex value shortly after a secret-key name, however it is spelled around it:
	// BUZZ_PRIVATE_KEY=…, "private_key": "…", {"name":"BUZZ_PRIVATE_KEY","value":"…"}, or the
	// same inside an escaped JSON string (an ACP line carried in the feed).
	hexAfterNameRe = regexp.MustCompile(`(?i)((?:PRIVATE_KEY|SECRET_KEY|PRIVKEY|NSEC|SECRET)[^\n]{0,48}?)\b[0-9a-f]{64}\b`)
	// NAME=value / NAME: value for env-style credential names (API keys, tokens, passwords).
	assignRe = regexp.MustCompile(`((?:API_KEY|API_TOKEN|AUTH_TOKEN|ACCESS_TOKEN|SECRET|PASSWORD|PRIVATE_KEY)[A-Z0-9_]*\\?"?\s*[=:]\s*\\?"?)([^\s"'\\,;&}\[\]]{4,})`)
	// ACP/MCP env arrays: {"name":"ANTHROPIC_API_KEY","value":"sk-…"}.
	envPairRe = regexp.MustCompile(`((?:API_KEY|API_TOKEN|AUTH_TOKEN|ACCESS_TOKEN|SECRET|PASSWORD|PRIVATE_KEY)[A-Z0-9_]*\\?"\s*,\s*\\?"value\\?"\s*:\s*\\?")([^"\\]+)`)
)

// maybeSecret is a cheap pre-check so the common line (no secret-ish word at all) skips the
// regexps: a case-insensitive search for nsec1, key, secret, token or password.
func maybeSecret(s string) bool {
	for i := 0; i < len(s); i++ {
		var word string
		switch s[i] | 0x20 { // ASCII lower-casing; only letters map onto these
		case 'n':
			word = "nsec1"
		case 'k':
			word = "key"
		case 's':
			word = "secret"
		case 't':
			word = "token"
		case 'p':
			word = "password"
		default:
			continue
		}
		if len(s)-i >= len(word) && strings.EqualFold(s[i:i+len(word)], word) {
			return true
		}
	}
	return false
}

// Redact removes secrets from s so they never reach logs or the activity feed: nsec1… keys,
// 64-hex values following a secret-key name such as BUZZ_PRIVATE_KEY=, and the values of
// env-style credentials (…_API_KEY, …_TOKEN, …SECRET, …PASSWORD), including in JSON env arrays.
// It errs towards over-redaction; names are kept so the reader knows what was there.
func Redact(s string) string {
	if !maybeSecret(s) {
		return s
	}
	if strings.Contains(s, "nsec1") {
		s = nsecRe.ReplaceAllString(s, Redacted)
	}
	// Repeat so a second key right after a redacted one (within the window) goes too.
	for range 8 {
		next := hexAfterNameRe.ReplaceAllString(s, "${1}"+Redacted)
		if next == s {
			break
		}
		s = next
	}
	s = envPairRe.ReplaceAllString(s, "${1}"+Redacted)
	// Values already replaced start with '[', which the value pattern excludes: no double work.
	return assignRe.ReplaceAllString(s, "${1}"+Redacted)
}
