package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/acp"
	"github.com/buzz-harness/buzz/internal/observer"
	"github.com/buzz-harness/buzz/internal/protocol"
)

// --permissions ask: an agent's session/request_permission becomes a message in the thread the
// turn serves, mentioning the owner and listing the options by number. The owner's reply (a
// number or an option's name) answers it; --permission-timeout without one picks the reject
// option; a cancelled turn (!cancel, shutdown) answers "cancelled".

// DefaultPermissionTimeout is how long a permission question waits for the owner.
const DefaultPermissionTimeout = 10 * time.Minute

// permAsker connects permission requests (on ACP reader goroutines) with the turns they belong
// to (turn goroutines) and the owner's answers (the loop).
type permAsker struct {
	h *Harness

	mu      sync.Mutex
	turns   map[string]turnInput     // ACP session id → the turn prompting it
	waiting map[scopeKey][]*permWait // open questions per conversation, oldest first
}

type permWait struct {
	opts   []acp.PermissionOption
	answer chan permChoice // buffered: the loop never blocks on it
}

type permChoice struct{ optionID, decider string }

// permissionFunc is the ACP client's PermissionFunc: the asker's under --permissions ask, else
// nil (the allow/deny policy answers).
func (h *Harness) permissionFunc() func(context.Context, acp.PermissionRequest) (string, error) {
	if !h.cfg.PermissionsAsk {
		return nil
	}
	return h.asker.ask
}

func newPermAsker(h *Harness) *permAsker {
	return &permAsker{h: h, turns: map[string]turnInput{}, waiting: map[scopeKey][]*permWait{}}
}

// track ties a session to the turn prompting it until the returned func is called.
func (p *permAsker) track(sessionID string, in turnInput) func() {
	p.mu.Lock()
	p.turns[sessionID] = in
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		delete(p.turns, sessionID)
		p.mu.Unlock()
	}
}

// ask is the ACP client's PermissionFunc.
func (p *permAsker) ask(ctx context.Context, req acp.PermissionRequest) (string, error) {
	p.mu.Lock()
	in, ok := p.turns[req.SessionID]
	p.mu.Unlock()
	tool := describeToolCall(req.ToolCall)
	if !ok || in.batch == nil || len(req.Options) == 0 {
		// Not a channel turn (a heartbeat, an initial message): nobody to ask, so no.
		return rejectOption(req.Options), nil
	}
	h := p.h
	w := &permWait{opts: req.Options, answer: make(chan permChoice, 1)}
	p.mu.Lock()
	p.waiting[in.scope] = append(p.waiting[in.scope], w)
	p.mu.Unlock()
	defer p.forget(in.scope, w)

	h.emit(in, observer.AgentUpdate{Kind: "permission_request", ToolCallID: tool.id, Title: tool.title, Text: clip(tool.input), Status: "asked"})
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	h.relay.publish(pctx, p.question(in, tool, req.Options))
	cancel()

	timer := time.NewTimer(h.cfg.PermissionTimeout)
	defer timer.Stop()
	var choice permChoice
	select {
	case choice = <-w.answer:
	case <-timer.C:
		choice = permChoice{optionID: rejectOption(req.Options), decider: "timeout"}
	case <-ctx.Done():
		choice = permChoice{decider: "cancelled"}
	}
	status := "cancelled"
	for _, o := range req.Options {
		if o.OptionID == choice.optionID && o.OptionID != "" {
			status = o.Kind
		}
	}
	h.log.Info("permission decided", "tool", tool.title, "decision", status, "by", choice.decider, "channel", in.channel.ID, "scope", in.scope.String())
	h.emit(in, observer.AgentUpdate{Kind: "permission_decision", ToolCallID: tool.id, Title: tool.title, Text: "decided by " + choice.decider, Status: status})
	return choice.optionID, nil
}

func (p *permAsker) forget(k scopeKey, w *permWait) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ws := p.waiting[k]
	for i, x := range ws {
		if x == w {
			ws = append(ws[:i:i], ws[i+1:]...)
			break
		}
	}
	if len(ws) == 0 {
		delete(p.waiting, k)
	} else {
		p.waiting[k] = ws
	}
}

// answer takes an owner's message in a conversation with an open question: if it picks one of
// the question's options it answers the oldest question and reports true (the message is
// consumed); anything else is an ordinary message.
func (p *permAsker) answer(ev *nostr.Event, k scopeKey) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	ws := p.waiting[k]
	if len(ws) == 0 {
		return false
	}
	w := ws[0]
	id := matchOption(ev.Content, w.opts)
	if id == "" {
		return false
	}
	p.waiting[k] = ws[1:] // answered: a second reply goes to the next question, or is a message
	w.answer <- permChoice{optionID: id, decider: ev.PubKey}
	return true
}

// matchOption reads an answer: the option's number, name or kind, with only mentions around it.
func matchOption(content string, opts []acp.PermissionOption) string {
	var words []string
	for _, w := range strings.Fields(content) {
		if !isMentionWord(w) {
			words = append(words, w)
		}
	}
	// The whole text must be the answer: "use port 2" is a message, not option 2.
	for _, c := range []string{strings.TrimSpace(content), strings.Join(words, " ")} {
		c = strings.TrimSuffix(strings.TrimSpace(c), ".")
		if n, err := strconv.Atoi(c); err == nil && n >= 1 && n <= len(opts) {
			return opts[n-1].OptionID
		}
		for _, o := range opts {
			if c != "" && (strings.EqualFold(c, o.Name) || strings.EqualFold(c, o.Kind)) {
				return o.OptionID
			}
		}
	}
	return ""
}

// rejectOption is the option a timeout (or a turn nobody can be asked about) picks.
func rejectOption(opts []acp.PermissionOption) string {
	for _, kind := range []string{acp.KindRejectOnce, acp.KindRejectAlways} {
		for _, o := range opts {
			if o.Kind == kind && o.OptionID != "" {
				return o.OptionID
			}
		}
	}
	return ""
}

type toolCall struct{ id, title, input string }

// describeToolCall reads what a permission request says the tool wants to do.
func describeToolCall(raw json.RawMessage) toolCall {
	var tc struct {
		ToolCallID string          `json:"toolCallId"`
		Title      string          `json:"title"`
		Kind       string          `json:"kind"`
		RawInput   json.RawMessage `json:"rawInput"`
	}
	_ = json.Unmarshal(raw, &tc)
	t := toolCall{id: tc.ToolCallID, title: strings.TrimSpace(tc.Title)}
	if t.title == "" {
		t.title = "a tool call"
	}
	if tc.Kind != "" {
		t.title += " (" + tc.Kind + ")"
	}
	if len(tc.RawInput) > 0 && string(tc.RawInput) != "null" {
		t.input = string(tc.RawInput)
		if len(t.input) > 600 {
			t.input = t.input[:600] + "…"
		}
	}
	return t
}

// question is the thread message asking the owner.
func (p *permAsker) question(in turnInput, tool toolCall, opts []acp.PermissionOption) *nostr.Event {
	h := p.h
	var b strings.Builder
	fmt.Fprintf(&b, "nostr:%s permission needed: %s\n", protocol.Npub(h.cfg.Owner), tool.title)
	if tool.input != "" {
		fmt.Fprintf(&b, "```\n%s\n```\n", tool.input)
	}
	b.WriteString("Reply (mentioning me) with a number or an option's name:\n")
	for i, o := range opts {
		fmt.Fprintf(&b, "%d. %s\n", i+1, o.Name)
	}
	fmt.Fprintf(&b, "No answer within %s picks the reject option.", h.cfg.PermissionTimeout)
	tags := nostr.Tags{{"h", in.channel.ID}}
	tags = append(tags, threadTags(in.batch.Last())...)
	tags = append(tags, nostr.Tag{"p", h.cfg.Owner})
	return &nostr.Event{Kind: protocol.KindStreamMessage, Content: b.String(), Tags: tags, CreatedAt: nostr.Now()}
}
