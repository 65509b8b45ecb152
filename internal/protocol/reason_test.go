package protocol

import "testing"

func TestReasonMessagesKeepTheirWireText(t *testing.T) {
	for got, want := range map[string]string{
		ReasonRestricted.Msg("not a channel member"):   "restricted: not a channel member",
		ReasonAuthRequired.Msg("not authenticated"):    "auth-required: not authenticated",
		ReasonRateLimited.Msgf("retry in %ds", 1):      "rate-limited: retry in 1s",
		Response(`{"channel_id":"c","created":false}`): `response:{"channel_id":"c","created":false}`,
	} {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
}

func TestParseReasonSplitsOnlyKnownPrefixes(t *testing.T) {
	for msg, want := range map[string]struct {
		reason Reason
		text   string
	}{
		"restricted: not a channel member": {ReasonRestricted, "not a channel member"},
		"duplicate: event already stored":  {ReasonDuplicate, "event already stored"},
		`response:{"channel_id":"c"}`:      {ReasonResponse, `{"channel_id":"c"}`},
		"blocked:no space":                 {ReasonBlocked, "no space"},
		"invalid: a: b":                    {ReasonInvalid, "a: b"},
		"hello: world":                     {"", "hello: world"},
		"Restricted: case matters":         {"", "Restricted: case matters"},
		"invalid":                          {"", "invalid"},
		"":                                 {"", ""},
	} {
		r, text := ParseReason(msg)
		if r != want.reason || text != want.text {
			t.Errorf("ParseReason(%q) = %q, %q; want %q, %q", msg, r, text, want.reason, want.text)
		}
		if ReasonOf(msg) != want.reason {
			t.Errorf("ReasonOf(%q) = %q, want %q", msg, ReasonOf(msg), want.reason)
		}
	}
}
