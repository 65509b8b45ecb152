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

// maybeSecret is a cheap pre-check so the common line skips the regexps: a case-insensitive
// search for the fragments every pattern's names contain (nsec, _key, privkey, secret, _token,
// password). It must stay a superset of the patterns (FuzzRedact checks it does). Plain "key" or
// "token" would not do: every prompt names a pubkey, and that sent each line through all four
// regexps (a quarter of buzz-acp's CPU in the overhead benchmark).
func maybeSecret(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		var words []string
		switch c {
		case 'n':
			words = []string{"nsec"}
		case '_':
			words = []string{"_key", "_token"}
		case 'p':
			words = []string{"privkey", "password"}
		case 's':
			words = []string{"secret"}
		default:
			continue
		}
		for _, w := range words {
			if len(s)-i >= len(w) && strings.EqualFold(s[i:i+len(w)], w) {
				return true
			}
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
	return redactAll(s)
}

// redactAll applies every pattern.
func redactAll(s string) string {
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
