package relay

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/relay/store"
)

// frame is one parsed client→relay message.
type frame struct {
	Type    string // EVENT, REQ, CLOSE, COUNT, AUTH
	SubID   string
	Event   *nostr.Event
	Filters []store.Filter
	// FilterBytes is the size of the filters as sent: what a live subscription's budget counts.
	FilterBytes int64
}

// frameError is a parse failure; SubID is set when the frame named a subscription, so the
// answer can be a CLOSED for it rather than a NOTICE.
type frameError struct {
	SubID string
	Msg   string
}

func (e *frameError) Error() string { return e.Msg }

func invalidf(subID, format string, args ...any) *frameError {
	return &frameError{SubID: subID, Msg: protocol.ReasonInvalid.Msgf(format, args...)}
}

// parseFrame decodes a client message strictly: a JSON array whose first element is a known
// label, with the arity and element types that label requires.
func parseFrame(data []byte) (frame, error) {
	var parts []json.RawMessage
	if err := json.Unmarshal(data, &parts); err != nil {
		return frame{}, invalidf("", "message is not a JSON array")
	}
	if len(parts) == 0 {
		return frame{}, invalidf("", "empty message")
	}
	var label string
	if err := json.Unmarshal(parts[0], &label); err != nil {
		return frame{}, invalidf("", "message type must be a string")
	}
	f := frame{Type: label}
	switch label {
	case "EVENT", "AUTH":
		if len(parts) != 2 {
			return frame{}, invalidf("", "%s takes exactly one event", label)
		}
		ev, err := parseEvent(parts[1])
		if err != nil {
			return frame{}, invalidf("", "%v", err)
		}
		f.Event = ev
	case "REQ", "COUNT":
		if len(parts) < 2 {
			return frame{}, invalidf("", "%s needs a subscription id", label)
		}
		sub, err := parseSubID(parts[1])
		if err != nil {
			return frame{}, invalidf("", "%v", err)
		}
		f.SubID = sub
		if len(parts) < 3 {
			return frame{}, invalidf(sub, "%s needs at least one filter", label)
		}
		if len(parts)-2 > maxFilters {
			return frame{}, invalidf(sub, "too many filters (max %d)", maxFilters)
		}
		for _, raw := range parts[2:] {
			flt, err := parseFilter(raw)
			if err != nil {
				return frame{}, invalidf(sub, "%v", err)
			}
			f.Filters = append(f.Filters, flt)
			f.FilterBytes += int64(len(raw))
		}
	case "CLOSE":
		if len(parts) != 2 {
			return frame{}, invalidf("", "CLOSE takes exactly one subscription id")
		}
		sub, err := parseSubID(parts[1])
		if err != nil {
			return frame{}, invalidf("", "%v", err)
		}
		f.SubID = sub
	default:
		return frame{}, invalidf("", "unknown message type %q", truncate(label, 32))
	}
	return f, nil
}

func parseSubID(raw json.RawMessage) (string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", errors.New("subscription id must be a string")
	}
	if s == "" || len(s) > maxSubIDLen {
		return "", fmt.Errorf("subscription id must be 1..%d bytes", maxSubIDLen)
	}
	return s, nil
}

// parseEvent decodes an event object; id and signature are checked later, in the pipeline.
func parseEvent(raw []byte) (*nostr.Event, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return nil, errors.New("event must be a JSON object")
	}
	var shape struct {
		ID        *string    `json:"id"`
		PubKey    *string    `json:"pubkey"`
		CreatedAt *int64     `json:"created_at"`
		Kind      *int       `json:"kind"`
		Tags      [][]string `json:"tags"`
		Content   *string    `json:"content"`
		Sig       *string    `json:"sig"`
	}
	if err := json.Unmarshal(raw, &shape); err != nil {
		return nil, fmt.Errorf("malformed event: %v", shortErr(err))
	}
	switch {
	case shape.ID == nil, shape.PubKey == nil, shape.CreatedAt == nil, shape.Kind == nil,
		shape.Content == nil, shape.Sig == nil:
		return nil, errors.New("event is missing a required field")
	case *shape.Kind < 0 || *shape.Kind > 65535:
		return nil, errors.New("event kind out of range")
	case *shape.CreatedAt < 0:
		return nil, errors.New("negative created_at")
	}
	tags := make(nostr.Tags, 0, len(shape.Tags))
	for _, t := range shape.Tags {
		if len(t) == 0 {
			return nil, errors.New("empty tag")
		}
		tags = append(tags, nostr.Tag(t))
	}
	return &nostr.Event{
		ID:        *shape.ID,
		PubKey:    *shape.PubKey,
		CreatedAt: nostr.Timestamp(*shape.CreatedAt),
		Kind:      *shape.Kind,
		Tags:      tags,
		Content:   *shape.Content,
		Sig:       *shape.Sig,
	}, nil
}

// parseFilter decodes one NIP-01 filter plus Buzz's before_id, and validates it: ids and
// authors are 64-hex, tag filters are single letters, before_id needs until.
func parseFilter(raw []byte) (store.Filter, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return store.Filter{}, errors.New("filter must be a JSON object")
	}
	var out store.Filter
	strList := func(key string) ([]string, error) {
		var v []string
		if err := json.Unmarshal(fields[key], &v); err != nil {
			return nil, fmt.Errorf("filter %q must be an array of strings", key)
		}
		if v == nil {
			v = []string{}
		}
		return v, nil
	}
	for key, val := range fields {
		if string(val) == "null" {
			continue
		}
		var err error
		switch {
		case key == "ids" || key == "authors":
			var v []string
			if v, err = strList(key); err != nil {
				return store.Filter{}, err
			}
			for _, s := range v {
				if !protocol.IsHex64(s) {
					return store.Filter{}, fmt.Errorf("filter %q entries must be 64 lowercase hex characters", key)
				}
			}
			if key == "ids" {
				out.IDs = v
			} else {
				out.Authors = v
			}
		case key == "kinds":
			var v []int
			if json.Unmarshal(val, &v) != nil {
				return store.Filter{}, errors.New(`filter "kinds" must be an array of integers`)
			}
			if v == nil {
				v = []int{}
			}
			for _, k := range v {
				if k < 0 || k > 65535 {
					return store.Filter{}, errors.New(`filter "kinds" entries must be 0..65535`)
				}
			}
			out.Kinds = v
		case key == "since" || key == "until":
			var v int64
			if json.Unmarshal(val, &v) != nil || v < 0 {
				return store.Filter{}, fmt.Errorf("filter %q must be a non-negative integer", key)
			}
			ts := nostr.Timestamp(v)
			if key == "since" {
				out.Since = &ts
			} else {
				out.Until = &ts
			}
		case key == "limit":
			var v int
			if json.Unmarshal(val, &v) != nil || v < 0 {
				return store.Filter{}, errors.New(`filter "limit" must be a non-negative integer`)
			}
			out.Limit = v
			out.LimitZero = v == 0
		case key == "search":
			if json.Unmarshal(val, &out.Search) != nil {
				return store.Filter{}, errors.New(`filter "search" must be a string`)
			}
			if err := checkSearch(out.Search); err != nil {
				return store.Filter{}, err
			}
		case key == "before_id":
			if json.Unmarshal(val, &out.BeforeID) != nil || !protocol.IsHex64(out.BeforeID) {
				return store.Filter{}, errors.New(`filter "before_id" must be a 64-hex event id`)
			}
		case strings.HasPrefix(key, "#"):
			name := key[1:]
			if len(name) != 1 {
				return store.Filter{}, fmt.Errorf("tag filter %q: only single-letter tags are supported", truncate(key, 32))
			}
			var v []string
			if v, err = strList(key); err != nil {
				return store.Filter{}, err
			}
			if out.Tags == nil {
				out.Tags = nostr.TagMap{}
			}
			out.Tags[name] = v
		default:
			// Unknown extension fields (depth_limit, include_aux, ...) are ignored.
		}
	}
	if out.BeforeID != "" && out.Until == nil {
		return store.Filter{}, errors.New(`filter "before_id" requires "until"`)
	}
	return out, nil
}

// effectiveLimit is a filter's historical limit: 500 when absent, capped at 2000.
func effectiveLimit(f store.Filter) int {
	switch {
	case f.LimitZero:
		return 0
	case f.Limit <= 0:
		return defaultLimit
	case f.Limit > maxLimit:
		return maxLimit
	}
	return f.Limit
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func shortErr(err error) string { return truncate(err.Error(), 120) }
