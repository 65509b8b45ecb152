package harness

import (
	"fmt"
	"strings"

	"github.com/buzz-harness/buzz/internal/acp"
	"github.com/buzz-harness/buzz/internal/observer"
	"github.com/buzz-harness/buzz/internal/prompt"
)

// activity is the harness's side of the activity feed: what turns, sessions and agents did, as
// observer events. It is also where every session/update from the agents arrives first, for the
// bookkeeping that reads them (goose run ids, running costs, the turns' transcripts, replayed
// histories). Any goroutine may use it.
type activity struct {
	bus     *observer.Bus
	cwd     string // the agents' working directory, which the standing context names
	costs   *costTracker
	runIDs  *runIDs
	turns   *transcripts
	replays *replayWatch
}

// emit publishes a turn's event.
func (h *activity) emit(in turnInput, p observer.Payload) {
	sid := ""
	if in.session != nil {
		sid = in.session.ID
	}
	h.bus.Publish(observer.Scope{ChannelID: in.channel.ID, ThreadID: in.conv.Root, SessionID: sid, TurnID: in.turnID}, p)
}

// emitSession publishes a session's event (opened, resumed, failed, its system prompt).
func (h *activity) emitSession(in turnInput, sess *convSession, p observer.Payload) {
	sid := ""
	if sess != nil {
		sid = sess.ID
	}
	h.bus.Publish(observer.Scope{ChannelID: in.channel.ID, ThreadID: in.conv.Root, SessionID: sid, TurnID: in.turnID}, p)
}

// emitSystemPrompt publishes the standing context a session was given, split into its sections,
// whichever route carried it (for user-message agents, from the prompt's leading blocks).
func (h *activity) emitSystemPrompt(in turnInput, sess *convSession, standing prompt.Standing, blocks []string) {
	var secs []prompt.Section
	text := ""
	if blocks != nil {
		secs = prompt.ParseStandingBlocks(blocks)
		parts := make([]string, len(secs))
		for i, s := range secs {
			parts[i] = s.Text
		}
		text = strings.Join(parts, "\n\n")
	} else {
		text = standing.SystemPrompt(h.cwd)
		secs = prompt.ParseStandingSections(text)
	}
	out := make([]observer.PromptSection, len(secs))
	for i, s := range secs {
		out[i] = observer.PromptSection{Label: s.Label, Body: s.Body}
	}
	h.emitSession(in, sess, observer.SystemPrompt{Route: string(sess.Route), Text: text, Sections: out})
}

// maxFeedText caps text copied into the activity feed: an agent may write lines of any size, and
// the feed is for reading, not archiving.
const maxFeedText = 64 << 10

func clip(s string) string {
	if len(s) <= maxFeedText {
		return s
	}
	return s[:maxFeedText] + fmt.Sprintf("… [%d bytes cut]", len(s)-maxFeedText)
}

// onLine records every raw ACP line (long lines clipped) on the activity feed. It runs on the
// path that writes a prompt to the agent, so it does no more: secrets are redacted where events
// leave the process (observer.MarshalLine, for the activity log and the console).
func (h *activity) onLine(l acp.Line) {
	line := string(l.Data)
	if len(line) > maxFeedText {
		line = line[:maxFeedText] // redact only what is kept
	}
	h.bus.Publish(observer.Scope{}, observer.ACPLine{Dir: string(l.Dir), Bytes: len(l.Data), Line: line + cutNote(len(l.Data))})
}

func cutNote(n int) string {
	if n <= maxFeedText {
		return ""
	}
	return fmt.Sprintf("… [%d bytes cut]", n-maxFeedText)
}

// onUpdate sees every session/update: first for goose's run ids, the running costs and the
// prompting turn's transcript, then as activity (replayed history marked).
func (h *activity) onUpdate(u acp.SessionUpdate) {
	h.runIDs.observe(u)
	h.costs.observe(u)
	h.turns.observe(u)
	h.replays.observe(u)
	h.bus.Publish(observer.Scope{SessionID: u.SessionID}, observer.AgentUpdate{Kind: u.Kind, Replay: u.Replay,
		Text: clip(u.Text), ToolCallID: u.ToolCallID, Title: u.Title, Status: u.Status})
}
