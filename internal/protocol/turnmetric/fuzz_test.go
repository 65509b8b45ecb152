package turnmetric

import (
	"encoding/json"
	"testing"
)

// FuzzPayload: an owner decodes whatever its agents send. Never panic; what validates must
// re-encode and decode to the same payload.
func FuzzPayload(f *testing.F) {
	b, _ := json.Marshal(sample())
	f.Add(string(b))
	f.Add(`{"harness":"h","timestamp":"2026-07-01T20:11:03Z","stopReason":"odd","deltaReliable":false}`)
	f.Add(`{"harness":"h","timestamp":"x","turn":{"costUsd":-1}}`)
	f.Fuzz(func(t *testing.T, s string) {
		var m Metric
		if json.Unmarshal([]byte(s), &m) != nil || m.Validate() != nil {
			return
		}
		enc, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		var back Metric
		if err := json.Unmarshal(enc, &back); err != nil {
			t.Fatal(err)
		}
		again, _ := json.Marshal(back)
		if string(again) != string(enc) {
			t.Fatalf("re-encoding changed the payload:\n%s\n%s", enc, again)
		}
	})
}
