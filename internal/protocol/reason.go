package protocol

import (
	"fmt"
	"strings"
)

// Reason is the machine-readable prefix of a relay's OK, CLOSED or NOTICE message (NIP-01):
// "restricted" in "restricted: not a channel member". Clients classify a refusal by it, so the
// relay builds every such message with Msg and clients read it with ParseReason; the text after
// it is for people.
type Reason string

// The NIP-01 prefixes, and the two Buzz adds.
const (
	ReasonDuplicate    Reason = "duplicate"
	ReasonPoW          Reason = "pow"
	ReasonBlocked      Reason = "blocked"
	ReasonRateLimited  Reason = "rate-limited"
	ReasonInvalid      Reason = "invalid"
	ReasonRestricted   Reason = "restricted"
	ReasonMute         Reason = "mute"
	ReasonError        Reason = "error"
	ReasonAuthRequired Reason = "auth-required"
	// ReasonForbidden is upstream Buzz's refusal of a DM command by a non-participant.
	ReasonForbidden Reason = "forbidden"
	// ReasonResponse is an accepted command's JSON answer: "response:{...}", with no space.
	ReasonResponse Reason = "response"
)

var reasons = []Reason{ReasonDuplicate, ReasonPoW, ReasonBlocked, ReasonRateLimited, ReasonInvalid,
	ReasonRestricted, ReasonMute, ReasonError, ReasonAuthRequired, ReasonForbidden, ReasonResponse}

// Msg is the message "<reason>: <text>".
func (r Reason) Msg(text string) string { return string(r) + ": " + text }

// Msgf is Msg with the text formatted.
func (r Reason) Msgf(format string, args ...any) string { return r.Msg(fmt.Sprintf(format, args...)) }

// Response is the accepted answer of a command that returns data: "response:" and its JSON.
func Response(body string) string { return string(ReasonResponse) + ":" + body }

// ParseReason splits a relay message into its prefix and the text after it (one space after the
// colon dropped). A message that starts with no known prefix gives "" and the message whole.
func ParseReason(msg string) (Reason, string) {
	prefix, text, found := strings.Cut(msg, ":")
	if !found {
		return "", msg
	}
	for _, r := range reasons {
		if prefix == string(r) {
			return r, strings.TrimPrefix(text, " ")
		}
	}
	return "", msg
}

// ReasonOf is the prefix msg starts with ("" for none): ParseReason without the text.
func ReasonOf(msg string) Reason {
	r, _ := ParseReason(msg)
	return r
}
