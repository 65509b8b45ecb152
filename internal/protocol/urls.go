package protocol

import (
	"net"
	"net/url"
	"strings"
)

// NormalizeURL canonicalises a relay or HTTP URL for comparison: lowercase scheme and host,
// loopback spellings (localhost, ::1) mapped to 127.0.0.1, trailing slash stripped, query and
// fragment dropped. Unparseable input is returned trimmed and lowercased.
func NormalizeURL(raw string) string {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Host == "" {
		return strings.TrimRight(strings.ToLower(strings.TrimSpace(raw)), "/")
	}
	host, port := u.Hostname(), u.Port()
	host = strings.ToLower(host)
	if host == "localhost" || host == "::1" {
		host = "127.0.0.1"
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port != "" {
		host = net.JoinHostPort(strings.Trim(host, "[]"), port)
	}
	return strings.ToLower(u.Scheme) + "://" + host + strings.TrimRight(u.EscapedPath(), "/")
}

// SameURL reports whether two URLs are equal after NormalizeURL.
func SameURL(a, b string) bool { return NormalizeURL(a) == NormalizeURL(b) }

// HTTPBase turns a relay URL (ws://, wss://, http://, https://) into the HTTP base URL of its
// bridge, without a trailing slash.
func HTTPBase(relayURL string) string {
	s := strings.TrimRight(strings.TrimSpace(relayURL), "/")
	switch {
	case strings.HasPrefix(s, "ws://"):
		return "http://" + strings.TrimPrefix(s, "ws://")
	case strings.HasPrefix(s, "wss://"):
		return "https://" + strings.TrimPrefix(s, "wss://")
	case strings.HasPrefix(s, "http://"), strings.HasPrefix(s, "https://"):
		return s
	}
	return "http://" + s
}

// WSURL turns a relay URL (any of the four schemes) into its WebSocket URL.
func WSURL(relayURL string) string {
	s := HTTPBase(relayURL)
	if strings.HasPrefix(s, "https://") {
		return "wss://" + strings.TrimPrefix(s, "https://")
	}
	return "ws://" + strings.TrimPrefix(s, "http://")
}
