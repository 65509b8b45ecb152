package main

import (
	"regexp"
	"strings"
)

// promptInfo is what the agent needs from a rendered Buzz prompt (see buzz-acp-spec §6).
type promptInfo struct {
	EventIDs  []string // "Event ID: <hex>" lines, in order
	ChannelID string   // from the [Context] block's Channel line (or a bare uuid line)
	ReplyTo   string   // from an instruction mentioning "--reply-to <id>"
	Contents  []string // "Content: ..." lines (first line of each event's content)
}

var (
	reEventID = regexp.MustCompile(`(?m)^Event ID: ([0-9a-f]{64})\s*$`)
	reUUID    = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	reReplyTo = regexp.MustCompile("--reply-to[ =]<?`?([0-9a-f]{64})")
	reContent = regexp.MustCompile(`(?m)^Content: (.*)$`)
	reCode    = regexp.MustCompile(`codeword=([^\s,;.]+)`)
)

func parsePrompt(text string) promptInfo {
	var p promptInfo
	for _, m := range reEventID.FindAllStringSubmatch(text, -1) {
		p.EventIDs = append(p.EventIDs, m[1])
	}
	for _, m := range reContent.FindAllStringSubmatch(text, -1) {
		p.Contents = append(p.Contents, strings.TrimRight(m[1], "\r"))
	}
	if m := reReplyTo.FindStringSubmatch(text); m != nil {
		p.ReplyTo = m[1]
	}
	p.ChannelID = contextChannel(text)
	return p
}

// contextChannel prefers the [Context] block ("Channel: name (#uuid)" or a bare uuid), then any
// Channel line, then any uuid at all.
func contextChannel(text string) string {
	if i := strings.Index(text, "[Context]"); i >= 0 {
		block := text[i:]
		if j := strings.Index(block, "\n\n"); j >= 0 {
			block = block[:j]
		}
		for _, line := range strings.Split(block, "\n") {
			line = strings.TrimSpace(line)
			if strings.HasPrefix(line, "Channel:") || reUUID.MatchString(line) && reUUID.FindString(line) == line {
				if id := reUUID.FindString(line); id != "" {
					return id
				}
			}
		}
	}
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "Channel:") {
			if id := reUUID.FindString(line); id != "" {
				return id
			}
		}
	}
	return reUUID.FindString(text)
}

// LastEventID is the triggering event (the last one in the batch).
func (p promptInfo) LastEventID() string {
	if len(p.EventIDs) == 0 {
		return ""
	}
	return p.EventIDs[len(p.EventIDs)-1]
}

// LastContent is the first line of the last event's content.
func (p promptInfo) LastContent() string {
	if len(p.Contents) == 0 {
		return ""
	}
	return p.Contents[len(p.Contents)-1]
}

// replyTarget follows the harness's reply instruction when there is one, else the last event.
func (p promptInfo) replyTarget() string {
	if p.ReplyTo != "" {
		return p.ReplyTo
	}
	return p.LastEventID()
}

// learnCodeword returns the last "codeword=X" in the events' content, if any.
func (p promptInfo) learnCodeword() string {
	code := ""
	for _, c := range p.Contents {
		if m := reCode.FindAllStringSubmatch(c, -1); m != nil {
			code = m[len(m)-1][1]
		}
	}
	return code
}
