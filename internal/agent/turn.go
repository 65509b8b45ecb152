package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/buzz-harness/buzz/internal/acp"
	"github.com/buzz-harness/buzz/internal/agent/provider"
)

// ACP stop reasons.
const (
	stopEndTurn   = "end_turn"
	stopCancelled = "cancelled"
)

// turn is one session/prompt in flight.
type turn struct {
	a     *Agent
	s     *session
	ctx   context.Context
	id    string
	usage provider.Usage
}

func (t *turn) update(u map[string]any) {
	if err := acp.SendUpdate(t.a.conn, t.id, u); err != nil {
		t.a.logf("session %s: send update: %v", t.id, err)
	}
}

func (t *turn) say(text string) {
	t.update(acp.TextChunk(acp.UpdateAgentMessageChunk, text))
}

// record appends to the history and saves it at once, so a crash mid-turn
// loses nothing already said or done.
func (t *turn) record(msgs ...storedMessage) {
	t.s.mu.Lock()
	t.s.data.Messages = append(t.s.data.Messages, msgs...)
	err := t.a.store.save(t.s.data)
	t.s.mu.Unlock()
	if err != nil {
		t.a.logf("%v", err)
	}
}

// snapshot copies what a model call needs, notices left out.
func (t *turn) snapshot() (system, cwd string, history []provider.Message) {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	for _, m := range t.s.data.Messages {
		if !m.Notice {
			history = append(history, m.Message)
		}
	}
	return t.s.data.SystemPrompt, t.s.data.Cwd, history
}

func (t *turn) runner(cwd string) toolRunner {
	return toolRunner{cwd: cwd, env: t.a.cfg.Env, shellTimeout: t.a.cfg.ShellTimeout, maxOutput: t.a.cfg.MaxOutput}
}

// notice tells the user something went wrong, on the reply stream and
// stderr, and keeps it in the history for replay.
func (t *turn) notice(text string) {
	t.a.logf("session %s: %s", t.id, text)
	text = "buzz-agent: " + text
	t.say(text)
	t.record(storedMessage{Message: provider.Message{Role: provider.RoleAssistant, Text: text}, Notice: true})
}

// model runs the model ↔ tool loop for one prompt.
func (t *turn) model(userText string) string {
	t.record(storedMessage{Message: provider.Message{Role: provider.RoleUser, Text: userText}})
	p := t.a.cfg.Provider
	for round := 0; round < t.a.cfg.MaxToolRounds; round++ {
		system, cwd, history := t.snapshot()
		var streamed strings.Builder
		resp, err := p.Complete(t.ctx, provider.Request{System: system, Messages: history, Tools: toolDefs}, func(d string) {
			streamed.WriteString(d)
			t.say(d)
		})
		if t.ctx.Err() != nil {
			// Keep what the user already saw, so the next turn's model knows it.
			if streamed.Len() > 0 {
				t.record(storedMessage{Message: provider.Message{Role: provider.RoleAssistant, Text: streamed.String()}})
			}
			return stopCancelled
		}
		if err != nil {
			if streamed.Len() > 0 {
				t.record(storedMessage{Message: provider.Message{Role: provider.RoleAssistant, Text: streamed.String()}})
				t.say("\n\n")
			}
			t.notice(fmt.Sprintf("model provider error, turn ended: %v", err))
			return stopEndTurn
		}
		t.usage = t.usage.Add(resp.Usage)
		t.record(storedMessage{Message: resp.Message})
		if len(resp.Message.ToolCalls) == 0 {
			switch resp.StopReason {
			case provider.StopMaxTokens:
				return "max_tokens"
			case provider.StopRefusal:
				return "refusal"
			}
			return stopEndTurn
		}
		run := t.runner(cwd)
		for i, call := range resp.Message.ToolCalls {
			res, cancelled := t.tool(run, call)
			t.record(storedMessage{Message: res})
			if cancelled {
				// Every tool call needs a result or the history cannot be re-sent.
				for _, rest := range resp.Message.ToolCalls[i+1:] {
					t.record(storedMessage{Message: provider.Message{Role: provider.RoleTool, ToolCallID: rest.ID, ToolName: rest.Name, Text: "cancelled before it ran", IsError: true}})
				}
				return stopCancelled
			}
		}
	}
	t.notice(fmt.Sprintf("stopped after %d tool rounds without a final answer", t.a.cfg.MaxToolRounds))
	return stopEndTurn
}

// tool reports, authorises and runs one tool call. cancelled means the turn
// must stop (session/cancel, or the client cancelled the permission prompt).
func (t *turn) tool(run toolRunner, call provider.ToolCall) (result provider.Message, cancelled bool) {
	result = provider.Message{Role: provider.RoleTool, ToolCallID: call.ID, ToolName: call.Name}
	title, kind, needsPermission, err := toolMeta(call)
	t.update(map[string]any{
		"sessionUpdate": acp.UpdateToolCall, "toolCallId": call.ID, "title": title, "kind": kind,
		"status": "pending", "rawInput": call.Input,
	})
	fail := func(text string) (provider.Message, bool) {
		t.update(map[string]any{
			"sessionUpdate": acp.UpdateToolCallUpdate, "toolCallId": call.ID, "status": "failed", "content": toolContent(text),
		})
		result.Text, result.IsError = text, true
		return result, false
	}
	if err != nil {
		return fail(err.Error())
	}
	if needsPermission {
		allowed, cancel := t.permission(call, title, kind)
		if cancel {
			r, _ := fail("cancelled")
			return r, true
		}
		if !allowed {
			return fail("permission denied by the user; the tool call did not run")
		}
	}
	t.update(map[string]any{"sessionUpdate": acp.UpdateToolCallUpdate, "toolCallId": call.ID, "status": "in_progress"})
	text, isErr := run.run(t.ctx, call)
	status := "completed"
	if isErr {
		status = "failed"
	}
	t.update(map[string]any{
		"sessionUpdate": acp.UpdateToolCallUpdate, "toolCallId": call.ID, "status": status,
		"content": toolContent(text), "rawOutput": map[string]any{"output": text},
	})
	result.Text, result.IsError = text, isErr
	return result, t.ctx.Err() != nil
}

// permissionOptions are offered for every guarded call; ids equal kinds.
var permissionOptions = []acp.PermissionOption{
	{OptionID: acp.KindAllowOnce, Name: "Allow once", Kind: acp.KindAllowOnce},
	{OptionID: acp.KindAllowAlways, Name: "Always allow this tool in this session", Kind: acp.KindAllowAlways},
	{OptionID: acp.KindRejectOnce, Name: "Reject", Kind: acp.KindRejectOnce},
	{OptionID: acp.KindRejectAlways, Name: "Always reject this tool in this session", Kind: acp.KindRejectAlways},
}

// permission asks the client whether call may run, remembering "always"
// answers per tool for the session.
func (t *turn) permission(call provider.ToolCall, title, kind string) (allowed, cancelled bool) {
	t.s.mu.Lock()
	switch {
	case t.s.data.AlwaysReject[call.Name]:
		t.s.mu.Unlock()
		return false, false
	case t.s.data.AlwaysAllow[call.Name]:
		t.s.mu.Unlock()
		return true, false
	}
	t.s.mu.Unlock()

	req := acp.PermissionRequest{SessionID: t.id, Options: permissionOptions}
	req.ToolCall, _ = json.Marshal(map[string]any{
		"toolCallId": call.ID, "title": title, "kind": kind, "status": "pending", "rawInput": call.Input,
	})
	var resp acp.PermissionResponse
	err := t.a.conn.Call(t.ctx, "session/request_permission", req, &resp)
	if t.ctx.Err() != nil {
		return false, true
	}
	if err != nil {
		t.a.logf("session %s: permission request failed, treating as rejected: %v", t.id, err)
		return false, false
	}
	if resp.Outcome.Outcome == "cancelled" {
		return false, true
	}
	if resp.Outcome.Outcome != "selected" {
		return false, false
	}
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	switch resp.Outcome.OptionID {
	case acp.KindAllowOnce:
		return true, false
	case acp.KindAllowAlways:
		if t.s.data.AlwaysAllow == nil {
			t.s.data.AlwaysAllow = map[string]bool{}
		}
		t.s.data.AlwaysAllow[call.Name] = true
		return true, false
	case acp.KindRejectAlways:
		if t.s.data.AlwaysReject == nil {
			t.s.data.AlwaysReject = map[string]bool{}
		}
		t.s.data.AlwaysReject[call.Name] = true
	}
	return false, false
}

// maxQuote bounds how much of the request echo mode quotes back.
const maxQuote = 500

// echo answers without a model: it quotes the last event back into the
// channel (and thread) named by [Context] through the real buzz CLI.
func (t *turn) echo(blocks []string) string {
	full := strings.Join(blocks, "\n\n")
	t.s.mu.Lock()
	firstUser, isFirst := full, true
	for _, m := range t.s.data.Messages {
		if m.Role == provider.RoleUser {
			firstUser, isFirst = m.Text, false
			break
		}
	}
	system, cwd := t.s.data.SystemPrompt, t.s.data.Cwd
	t.s.mu.Unlock()
	t.record(storedMessage{Message: provider.Message{Role: provider.RoleUser, Text: full}})

	pi := parsePrompt(blocks)
	quote := pi.Content
	if !pi.HasEvent {
		quote = fallbackQuote(blocks)
	}
	reply := fmt.Sprintf("echo: %s (standing context: %s)", defang(truncateRunes(quote, maxQuote)), standingSummary(system, firstUser, full, isFirst))
	// Echo has no tokenizer: usage is a bytes/4 estimate.
	t.usage = provider.Usage{InputTokens: int64(len(full)+3) / 4, OutputTokens: int64(len(reply)+3) / 4}

	if pi.ChannelID == "" {
		t.say(reply + "\n(no channel in a [Context] block; nothing posted)")
		t.record(storedMessage{Message: provider.Message{Role: provider.RoleAssistant, Text: reply}})
		return stopEndTurn
	}
	args := []string{"messages", "send", "--channel", pi.ChannelID}
	if pi.ReplyTo != "" {
		args = append(args, "--reply-to", pi.ReplyTo)
	}
	args = append(args, "--content", reply)
	display := shellJoin(append([]string{"buzz"}, args...))
	input, _ := json.Marshal(map[string]string{"command": display})
	call := provider.ToolCall{ID: "echo-" + uuid.NewString(), Name: toolShell, Input: input}

	t.say(reply)
	t.update(map[string]any{
		"sessionUpdate": acp.UpdateToolCall, "toolCallId": call.ID, "title": display, "kind": "execute",
		"status": "pending", "rawInput": call.Input,
	})
	t.update(map[string]any{"sessionUpdate": acp.UpdateToolCallUpdate, "toolCallId": call.ID, "status": "in_progress"})
	res := runCommand(t.ctx, cwd, t.a.cfg.Env, nil, t.a.cfg.ShellTimeout, t.a.cfg.MaxOutput, lookPathIn(t.a.cfg.BuzzCommand, t.a.cfg.Env), args...)
	out := res.String()
	status := "completed"
	if res.Failed() {
		status = "failed"
	}
	t.update(map[string]any{
		"sessionUpdate": acp.UpdateToolCallUpdate, "toolCallId": call.ID, "status": status,
		"content": toolContent(out), "rawOutput": map[string]any{"output": out},
	})
	t.record(
		storedMessage{Message: provider.Message{Role: provider.RoleAssistant, Text: reply, ToolCalls: []provider.ToolCall{call}}},
		storedMessage{Message: provider.Message{Role: provider.RoleTool, ToolCallID: call.ID, ToolName: toolShell, Text: out, IsError: res.Failed()}},
	)
	if res.Cancelled {
		return stopCancelled
	}
	if res.Failed() {
		t.say("\n")
		t.notice(fmt.Sprintf("posting the echo reply failed: %s", strings.TrimSpace(out)))
	}
	return stopEndTurn
}

// zwsp is a zero-width space.
const zwsp = "\u200b"

// defang stops a quote from mentioning anyone: the buzz CLI turns @names and
// nostr:npub URIs into p tags, and an echo that pings the agents it quotes
// could set two echo agents talking to each other forever. A zero-width
// space after each "@" and "nostr:" keeps the text readable but inert.
func defang(s string) string {
	s = strings.ReplaceAll(s, "@", "@"+zwsp)
	return strings.ReplaceAll(s, "nostr:", "nostr:"+zwsp)
}

// standingSummary names where the session's standing sections came from.
func standingSummary(system, firstUser, current string, isFirst bool) string {
	var parts []string
	if s := standingIn(system); len(s) > 0 {
		parts = append(parts, strings.Join(s, ", ")+" via system prompt")
	}
	if s := standingIn(firstUser); len(s) > 0 {
		parts = append(parts, strings.Join(s, ", ")+" via first user message")
	}
	// A later prompt carrying them again means someone re-sent standing context.
	if !isFirst {
		if s := standingIn(current); len(s) > 0 {
			parts = append(parts, "repeated in this prompt: "+strings.Join(s, ", "))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "; ")
}

// fallbackQuote is the prompt minus [Context] and standing blocks, for
// prompts with no event block (heartbeats, slash commands, hand-typed).
func fallbackQuote(blocks []string) string {
	var keep []string
	for _, b := range blocks {
		h := firstLine(b)
		if h == "[Context]" || len(standingIn(h)) > 0 {
			continue
		}
		keep = append(keep, strings.TrimSpace(b))
	}
	q := strings.TrimSpace(strings.Join(keep, " "))
	if q == "" {
		return "(empty prompt)"
	}
	return q
}

func truncateRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}

var plainArg = regexp.MustCompile(`^[A-Za-z0-9_./:=@%+,-]+$`)

// shellJoin renders argv as a copy-pasteable sh command (display only: the
// command is executed without a shell).
func shellJoin(argv []string) string {
	out := make([]string, len(argv))
	for i, a := range argv {
		if plainArg.MatchString(a) {
			out[i] = a
		} else {
			out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(out, " ")
}
