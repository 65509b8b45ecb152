package protocol

import (
	"encoding/json"
	"time"

	"github.com/nbd-wtf/go-nostr"
)

// MergeAgentProfile is the one way a kind-10100 agent profile changes. A 10100 is replaceable
// and several writers share it (buzz channels set-add-policy's channel_add_policy, buzz-acp's
// directory fields, other tools' fields), so each writer reads the newest entry, writes only its
// own fields over it and keeps the rest. cur is that entry (nil: none; content that is not a
// JSON object counts as empty, the relay ignores it anyway); a nil value in set removes the
// field. The result is unsigned and untagged, dated now or, when cur is not older, one second
// past it: a replaceable tie goes to the lower id, so a second write within a second must still
// win. changed reports whether the content differs from cur's.
func MergeAgentProfile(cur *nostr.Event, set map[string]any, now time.Time) (ev nostr.Event, changed bool, err error) {
	content := map[string]any{}
	if cur != nil {
		if json.Unmarshal([]byte(cur.Content), &content) != nil || content == nil {
			content = map[string]any{}
		}
	}
	for k, v := range set {
		if v == nil {
			delete(content, k)
		} else {
			content[k] = v
		}
	}
	raw, err := json.Marshal(content) // map keys are sorted: equal content, equal bytes
	if err != nil {
		return nostr.Event{}, false, err
	}
	at := nostr.Timestamp(now.Unix())
	if cur != nil && at <= cur.CreatedAt {
		at = cur.CreatedAt + 1
	}
	return nostr.Event{Kind: KindAgentProfile, CreatedAt: at, Content: string(raw), Tags: nostr.Tags{}},
		cur == nil || !sameJSON(cur.Content, raw), nil
}

// sameJSON reports whether a and b hold the same JSON value.
func sameJSON(a string, b []byte) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	ra, _ := json.Marshal(x)
	rb, _ := json.Marshal(y)
	return string(ra) == string(rb)
}

// NewestEvent is the newest of evs (the lower id on a created_at tie), nil when there is none.
func NewestEvent(evs []nostr.Event) *nostr.Event {
	var best *nostr.Event
	for i := range evs {
		if best == nil || newer(&evs[i], best) {
			best = &evs[i]
		}
	}
	return best
}
