package relayframes

import (
	"encoding/json"
	"fmt"

	"github.com/buzz-harness/buzz/internal/protocol/observerframe"
)

// keepEnds is how much of a cut string's start and end stays (upstream's).
const keepEnds = 3000

// trim makes a frame fit observerframe.MaxPlaintext: the largest string in its payload is cut
// to its first and last keepEnds bytes around "…[elided N bytes]…", again while it does not
// fit; when that cannot help, the payload becomes {"elided": "<kind> payload too large",
// "originalBytes": N}.
func trim(e observerframe.Event) observerframe.Event {
	size := func() int { b, _ := json.Marshal(e); return len(b) }
	if size() <= observerframe.MaxPlaintext {
		return e
	}
	original := len(e.Payload)
	var v any
	if json.Unmarshal(e.Payload, &v) == nil {
		for range 8 {
			n := longest(v)
			if n <= 2*keepEnds+64 {
				break
			}
			v, _ = cut(v, n)
			e.Payload, _ = json.Marshal(v)
			if size() <= observerframe.MaxPlaintext {
				return e
			}
		}
	}
	e.Payload, _ = json.Marshal(map[string]any{"elided": e.Kind + " payload too large", "originalBytes": original})
	return e
}

// longest is the length of the longest string leaf under v.
func longest(v any) int {
	n := 0
	switch t := v.(type) {
	case string:
		n = len(t)
	case map[string]any:
		for _, x := range t {
			n = max(n, longest(x))
		}
	case []any:
		for _, x := range t {
			n = max(n, longest(x))
		}
	}
	return n
}

// cut shortens the first string leaf of length n under v; done reports it found one.
func cut(v any, n int) (out any, done bool) {
	switch t := v.(type) {
	case string:
		if len(t) == n {
			return t[:keepEnds] + fmt.Sprintf("…[elided %d bytes]…", n-2*keepEnds) + t[n-keepEnds:], true
		}
	case map[string]any:
		for k, x := range t {
			if y, ok := cut(x, n); ok {
				t[k] = y
				return t, true
			}
		}
	case []any:
		for i, x := range t {
			if y, ok := cut(x, n); ok {
				t[i] = y
				return t, true
			}
		}
	}
	return v, false
}
