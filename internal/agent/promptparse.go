package agent

import (
	"regexp"
	"strings"
)

// StandingHeaders are the section headers of the harness's standing
// context, in the order the harness renders them (buzz-acp spec §6.1).
var StandingHeaders = []string{"[Base]", "[System]", "[Team Instructions]", "[Agent Memory — core]", "[Channel Canvas]"}

// promptInfo is what echo mode needs from a harness prompt (spec §6).
type promptInfo struct {
	ChannelID string // from the [Context] block's Channel: line
	ReplyTo   string // 64-hex anchor from a --reply-to instruction, if any
	EventID   string // Event ID: of the last event block
	Content   string // Content: of the last event block
	HasEvent  bool
}

var (
	uuidRe    = regexp.MustCompile(`[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}`)
	replyToRe = regexp.MustCompile("--reply-to[ =]+[`'\"]?([0-9a-fA-F]{64})\\b")
	hex64Re   = regexp.MustCompile(`^[0-9a-fA-F]{64}$`)
)

// parsePrompt reads the harness prompt blocks. It never fails: missing
// parts are left empty.
func parsePrompt(blocks []string) promptInfo {
	var pi promptInfo
	for _, b := range blocks {
		if firstLine(b) != "[Context]" || pi.ChannelID != "" {
			continue
		}
		for _, line := range strings.Split(b, "\n") {
			if rest, ok := strings.CutPrefix(line, "Channel:"); ok && pi.ChannelID == "" {
				// Prefer the "(#uuid)" form; a bare uuid is the fallback.
				if i := strings.LastIndex(rest, "(#"); i >= 0 {
					if m := uuidRe.FindString(rest[i:]); m != "" {
						pi.ChannelID = strings.ToLower(m)
						continue
					}
				}
				pi.ChannelID = strings.ToLower(uuidRe.FindString(rest))
			}
		}
		if m := replyToRe.FindStringSubmatch(b); m != nil {
			pi.ReplyTo = strings.ToLower(m[1])
		}
	}
	// The last event wins: scan every block for event lines in order.
	for _, b := range blocks {
		lines := strings.Split(b, "\n")
		for i := 0; i < len(lines); i++ {
			if rest, ok := strings.CutPrefix(lines[i], "Event ID: "); ok {
				pi.EventID = strings.TrimSpace(rest)
				pi.HasEvent = true
				pi.Content = ""
				continue
			}
			rest, ok := strings.CutPrefix(lines[i], "Content:")
			if !ok || !pi.HasEvent {
				continue
			}
			rest = strings.TrimPrefix(rest, " ")
			// Content is raw and may span lines; it ends at the Tags: line
			// (or the next event / end of block).
			parts := []string{rest}
			for i+1 < len(lines) && !strings.HasPrefix(lines[i+1], "Tags: ") &&
				!strings.HasPrefix(lines[i+1], "--- Event ") && !strings.HasPrefix(lines[i+1], "Event ID: ") {
				i++
				parts = append(parts, lines[i])
			}
			pi.Content = strings.Join(parts, "\n")
		}
	}
	if !hex64Re.MatchString(pi.EventID) {
		pi.EventID = ""
	}
	return pi
}

// standingIn lists the standing headers that open a line of text.
func standingIn(text string) []string {
	var found []string
	for _, h := range StandingHeaders {
		if text == h || strings.HasPrefix(text, h+"\n") || strings.Contains(text, "\n"+h+"\n") || strings.HasSuffix(text, "\n"+h) {
			found = append(found, h)
		}
	}
	return found
}

func firstLine(s string) string {
	s = strings.TrimLeft(s, " \t\r\n")
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}
