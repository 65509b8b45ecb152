package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/buzz-harness/buzz/internal/client"
	"github.com/buzz-harness/buzz/internal/protocol"
)

// Exit codes (upstream buzz CLI).
const (
	ExitOK      = 0
	ExitUsage   = 1 // bad flags or arguments, not found, refused input
	ExitNetwork = 2 // relay or network failure
	ExitAuth    = 3 // missing/invalid key, relay 401/403
	ExitOther   = 4
	// ExitConflict: a write lost a race or was made against a stale base (mem patch
	// --base-hash, reminders --if-event, a duplicate engram): read again and retry.
	ExitConflict = 5
)

// Error is what the CLI prints on stderr as one JSON line, with the process exit code.
type Error struct {
	Category  string `json:"error"`
	Message   string `json:"message"`
	Retryable bool   `json:"retryable"`
	Code      int    `json:"-"`
}

func (e *Error) Error() string { return e.Category + ": " + e.Message }

func usageError(format string, a ...any) *Error {
	return &Error{Category: "user_error", Message: fmt.Sprintf(format, a...), Code: ExitUsage}
}

func notFound(format string, a ...any) *Error {
	return &Error{Category: "not_found", Message: fmt.Sprintf(format, a...), Code: ExitUsage}
}

func keyError(format string, a ...any) *Error {
	return &Error{Category: "key_error", Message: fmt.Sprintf(format, a...), Code: ExitAuth}
}

// classify maps any error a command returns to the CLI's category and exit code.
func classify(err error) *Error {
	var ce *Error
	if errors.As(err, &ce) {
		return ce
	}
	var he *client.HTTPError
	var te *client.TransportError
	switch {
	case client.IsAuthError(err):
		return &Error{Category: "auth_error", Message: err.Error(), Code: ExitAuth}
	case errors.As(err, &he) && he.Status == 400 && isUnknownID(he.Message):
		return &Error{Category: "not_found", Message: he.Message, Code: ExitUsage}
	case errors.As(err, &he):
		return &Error{Category: "relay_error", Message: err.Error(), Retryable: client.IsRetryable(err), Code: ExitNetwork}
	case errors.As(err, &te), errors.Is(err, context.DeadlineExceeded):
		return &Error{Category: "network_error", Message: err.Error(), Retryable: true, Code: ExitNetwork}
	}
	return &Error{Category: "error", Message: err.Error(), Code: ExitOther}
}

// rejected maps a relay's accepted=false answer to an error. Like an HTTP 400 refusal (which is
// how the bridge usually reports a rejected event) it is a relay error, exit 2; only rate limits
// are retryable.
func rejected(msg string) *Error {
	if msg == "" {
		msg = "relay did not accept the event"
	}
	// The relay names an id it does not know: the same not_found (exit 1) a read of that id gives.
	if isUnknownID(msg) {
		return &Error{Category: "not_found", Message: msg, Code: ExitUsage}
	}
	return &Error{Category: "relay_error", Message: msg, Retryable: protocol.ReasonOf(msg) == protocol.ReasonRateLimited, Code: ExitNetwork}
}

// isUnknownID reports relay refusals that mean "no such channel or event", as opposed to a
// rule refusing an existing one.
func isUnknownID(msg string) bool {
	for _, s := range []string{"unknown channel", "not found", "not in this channel"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}
