package prompt

import (
	"strings"
	"time"
)

// DefaultHeartbeatPrompt is the built-in heartbeat: no incoming message, so check the feed and
// act only on what it surfaces (spec §9.4).
func DefaultHeartbeatPrompt(now time.Time) string {
	return "[System: Heartbeat]\nTime: " + now.UTC().Format(time.RFC3339) + `
This is a scheduled check-in; no new message triggered it.
1. Run ` + "`buzz feed get --since <unix time of your last check>`" + `. Items whose feed_type is
   needs_action are requests addressed to you that you have not answered; mentions are the rest.
2. For context on an item, read its thread:
   ` + "`buzz messages thread --channel <uuid from its h tag> --event <its id>`" + `.
Act only on what you find, answering in the item's channel and thread with
` + "`buzz messages send --channel <uuid> --reply-to <event-id> --content <text>`" + `.
If nothing needs you, end the turn without posting anything.`
}

// RenderHeartbeat returns the blocks of a heartbeat prompt: [Base] first when standing is given
// (the first heartbeat of a legacy agent's heartbeat session), then the prompt, or the default
// one when prompt is blank. Persona, memory and canvas never ride on a heartbeat.
func RenderHeartbeat(prompt string, standing *Standing, now time.Time) []string {
	var blocks []string
	if standing != nil {
		for _, s := range standing.BaseOnly().Sections() {
			blocks = append(blocks, s.Text)
		}
	}
	if strings.TrimSpace(prompt) == "" {
		prompt = DefaultHeartbeatPrompt(now)
	}
	return append(blocks, prompt)
}
