package store_test

import (
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/relay/store"
)

// BenchmarkIndexedTags is the tag-row derivation every save and purge runs: a mention reply
// (h, e, e, p) and the same with one imeta attachment, whose hash is indexed too.
func BenchmarkIndexedTags(b *testing.B) {
	id := strings.Repeat("e", 64)
	reply := nostr.Tags{{"h", "6f1c1d3e-8c55-4a53-9a9b-1a2b3c4d5e6f"}, {"e", id, "", "root"}, {"e", id, "", "reply"}, {"p", strings.Repeat("a", 64)}}
	withFile := append(append(nostr.Tags{}, reply...), nostr.Tag{"imeta", "url https://r.example/media/" + id + ".png", "m image/png", "x " + id, "size 48213", "alt a screenshot"})
	for name, tags := range map[string]nostr.Tags{"reply": reply, "reply+imeta": withFile} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				store.IndexedTags(tags, nil)
			}
		})
	}
}
