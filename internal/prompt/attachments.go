package prompt

import (
	"fmt"
	"strings"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
)

// attachments is an event's NIP-92 files on one line — "Attachments (N): url, type, size, alt"
// for each, "; " between them — so the agent knows they exist even when it cannot see them;
// "" when the event has none. URL and alt are outside input: cut to one line and a bounded
// length, and alt quoted so it cannot pass for another attachment.
func attachments(tags nostr.Tags) string {
	list := protocol.Attachments(tags)
	if len(list) == 0 {
		return ""
	}
	parts := make([]string, len(list))
	for i, a := range list {
		typ := a.Type
		if typ == "" {
			typ = "type unknown"
		}
		size := "size unknown"
		if a.Size > 0 {
			size = fmt.Sprintf("%d bytes", a.Size)
		}
		p := cleanLine(a.URL, 500) + ", " + typ + ", " + size
		if alt := cleanLine(a.Alt, 200); alt != "" {
			p += `, "` + strings.ReplaceAll(alt, `"`, `'`) + `"`
		}
		parts[i] = p
	}
	return fmt.Sprintf("Attachments (%d): %s", len(list), strings.Join(parts, "; "))
}
