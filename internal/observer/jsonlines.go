package observer

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
)

// MarshalLine encodes e as one redacted JSON line (newline included), the form of the activity
// log and of SSE data. Data that cannot be encoded is replaced by an error note rather than
// losing the event.
func MarshalLine(e Event) []byte {
	b, err := json.Marshal(e)
	if err != nil {
		// The outer Data field hides the embedded event's (encoding/json picks the shallower).
		b, _ = json.Marshal(struct {
			Event
			Data map[string]string `json:"data"`
		}{e, map[string]string{"encodeError": err.Error()}})
	}
	return append([]byte(Redact(string(b))), '\n')
}

// WriteJSONLines writes the bus's history and then every new event to w, one redacted JSON
// object per line, until ctx ends (after draining what was already delivered) or a write fails.
// It is the --activity-log writer.
func WriteJSONLines(ctx context.Context, b *Bus, w io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // on a write error, stop the subscription
	ch, history := b.Subscribe(ctx, 0)
	for _, e := range history {
		if _, err := w.Write(MarshalLine(e)); err != nil {
			return fmt.Errorf("activity log: %w", err)
		}
	}
	for e := range ch {
		if _, err := w.Write(MarshalLine(e)); err != nil {
			return fmt.Errorf("activity log: %w", err)
		}
	}
	return nil
}
