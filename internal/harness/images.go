package harness

import (
	"context"
	"slices"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/acp"
	"github.com/buzz-harness/buzz/internal/protocol"
)

// DefaultMaxImageBytes is Config.MaxImageBytes when it is 0: the largest image the common
// model APIs take.
const DefaultMaxImageBytes = 5 << 20

const (
	// maxPromptImages bounds the images one prompt carries (so MaxImageBytes bounds its size).
	maxPromptImages = 4
	// imageFetchBudget bounds the time all of one prompt's image fetches take together: the
	// turn waits for them before it prompts, so a slow relay must not hold it long.
	imageFetchBudget = 15 * time.Second
)

// promptImageTypes are the image types sent as image blocks: what model APIs accept.
var promptImageTypes = []string{"image/png", "image/jpeg", "image/gif", "image/webp"}

// images fetches the image attachments (NIP-92 imeta) of evs and returns them as ACP image
// blocks, for an agent that advertised promptCapabilities.image. The prompt's text lists every
// attachment already; this adds the pictures. It runs on the turn's goroutine and is bounded:
// at most maxPromptImages, each at most max bytes (its declared size is checked before the
// fetch, the bytes read during it), all within imageFetchBudget. Only blob URLs on the agent's
// own relay are fetched, with the agent's key: any other URL would let a message make the
// harness request any host it names. A fetch that fails is logged and skipped: the text prompt
// goes out whatever happens here.
func (rc *relayClient) images(ctx context.Context, evs []*nostr.Event, max int64) []acp.ContentBlock {
	ctx, cancel := context.WithTimeout(ctx, imageFetchBudget)
	defer cancel()
	var out []acp.ContentBlock
	seen := map[string]bool{}
	for _, ev := range evs {
		for _, a := range protocol.Attachments(ev.Tags) {
			if len(out) == maxPromptImages || ctx.Err() != nil {
				return out
			}
			if !slices.Contains(promptImageTypes, a.Type) || a.Size > max || seen[a.URL] {
				continue
			}
			seen[a.URL] = true
			sha, ok := rc.bridge.BlobHash(a.URL)
			if !ok || (a.SHA256 != "" && a.SHA256 != sha) {
				continue
			}
			data, typ, err := rc.bridge.FetchBlob(ctx, a.URL, max)
			if err != nil {
				rc.log.Warn("image attachment not sent to the agent", "url", a.URL, "event", ev.ID, "err", err)
				continue
			}
			if t := protocol.MediaType(typ); slices.Contains(promptImageTypes, t) {
				out = append(out, acp.ImageBlock(t, data))
			}
		}
	}
	return out
}
