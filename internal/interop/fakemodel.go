package interop

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/buzz-harness/buzz/internal/fakemodel"
)

// ReplyFunc decides the content the fake model has the agent post, given the model request that
// starts a turn (it sees the whole conversation the adapter sent).
type ReplyFunc func(fakemodel.Request) string

func replyContent(reply ReplyFunc, r fakemodel.Request) string {
	if reply == nil {
		return "pong"
	}
	return reply(r)
}

// ClaudeScript plays the model for claude-agent-acp on a fakemodel Anthropic server. A request
// that offers the Bash tool and ends with a user message naming a Buzz channel and event gets a
// Bash tool_use running `buzz messages send` there; once the tool result comes back it ends the
// turn with short text. Other requests (Claude Code's side calls: titles, classifiers) get plain
// text. reply picks the posted content; nil posts "pong".
func ClaudeScript(reply ReplyFunc) fakemodel.Script {
	return func(n int, r fakemodel.Request) fakemodel.Reply {
		rep := fakemodel.Reply{Text: []string{"ok"}, InputTokens: 100, OutputTokens: 10}
		// Claude Code may end the conversation with a system message (its environment notes);
		// the turn is decided by the newest user or tool message.
		var last fakemodel.Msg
		for _, m := range slices.Backward(r.Messages) {
			if m.Role == "user" || m.Role == "tool" {
				last = m
				break
			}
		}
		switch ch, ev, ok := ReplyTarget(last.Text); {
		case r.HasTool("Bash") && last.Role == "user" && ok:
			args, _ := json.Marshal(map[string]string{"command": SendCommand(ch, ev, replyContent(reply, r)), "description": "Reply in Buzz"})
			rep.Text, rep.Calls = nil, []fakemodel.Call{{ID: fmt.Sprintf("toolu_%02d", n+1), Name: "Bash", Args: string(args)}}
		case r.HasTool("Bash") && last.Role == "tool":
			rep.Text = []string{"Replied."}
		}
		return rep
	}
}

// CodexScript plays the model for codex-acp on a fakemodel Responses server: a request whose
// newest input item is a user message naming a Buzz channel and event gets a shell function call
// running `buzz messages send`; once the call's output comes back it ends the turn with short
// text. Anything else gets plain text. reply picks the posted content; nil posts "pong".
func CodexScript(reply ReplyFunc) fakemodel.Script { return codexScript(reply, true) }

// CodexFullAccessScript is CodexScript for a codex that runs commands without a sandbox or
// approvals (codex-acp 2.6's agent-full-access mode): it asks for no escalation, which codex
// refuses under approval policy "never".
func CodexFullAccessScript(reply ReplyFunc) fakemodel.Script { return codexScript(reply, false) }

func codexScript(reply ReplyFunc, escalate bool) fakemodel.Script {
	return func(n int, r fakemodel.Request) fakemodel.Reply {
		rep := fakemodel.Reply{Text: []string{"ok"}, InputTokens: 100, OutputTokens: 10}
		last := r.Last()
		if ch, ev, ok := ReplyTarget(last.Text); ok && last.Role == "user" {
			if call, ok := shellCall(r, n+1, SendCommand(ch, ev, replyContent(reply, r)), escalate); ok {
				rep.Text, rep.Calls = nil, []fakemodel.Call{call}
			}
		} else if last.Role == "tool" {
			rep.Text = []string{"Replied."}
		}
		return rep
	}
}

// shellCall builds the function call that makes codex run command, in the argument shape of
// whichever shell tool the request offered; escalate asks to leave codex's sandbox.
func shellCall(req fakemodel.Request, id int, command string, escalate bool) (fakemodel.Call, bool) {
	var args any
	name := ""
	switch {
	case req.HasTool("shell"):
		name, args = "shell", map[string]any{"command": []string{"bash", "-lc", command}}
	case req.HasTool("shell_command"):
		name, args = "shell_command", map[string]any{"command": command}
	case req.HasTool("exec_command"):
		// Ask to run outside codex's sandbox: the sandbox blocks the network `buzz` needs (and
		// needs bubblewrap, which CI machines may lack). Escalation makes codex ask the client.
		// login=false: a login shell re-reads /etc/profile, which resets PATH and loses the
		// buzz CLI directory buzz-acp put first on it.
		a := map[string]any{"cmd": command, "login": false}
		if escalate {
			a["sandbox_permissions"], a["justification"] = "require_escalated", "post the reply to the Buzz relay"
		}
		name, args = "exec_command", a
	default:
		return fakemodel.Call{}, false
	}
	b, _ := json.Marshal(args)
	return fakemodel.Call{ID: fmt.Sprintf("call_%02d", id), Name: name, Args: string(b)}, true
}

var (
	replyToRE = regexp.MustCompile(`--reply-to ([0-9a-f]{64})`)
	channelRE = regexp.MustCompile(`\(#([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\)`)
)

// ReplyTarget extracts the channel UUID and the event to reply to from a buzz-acp prompt: the
// channel from "Channel: name (#uuid)", the event from the [Context] block's instruction
// "buzz messages send --reply-to <id>" (the last one, so quoted history cannot win).
func ReplyTarget(prompt string) (channel, eventID string, ok bool) {
	ch := channelRE.FindStringSubmatch(prompt)
	ids := replyToRE.FindAllStringSubmatch(prompt, -1)
	if ch == nil || len(ids) == 0 {
		return "", "", false
	}
	return ch[1], ids[len(ids)-1][1], true
}

// SendCommand is the shell command the fake model asks the agent to run to answer in Buzz.
func SendCommand(channel, eventID, content string) string {
	return "buzz messages send --channel " + channel + " --reply-to " + eventID + " --content " + shellQuote(content)
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// ChatScript plays the model for agents on a fakemodel chat-completions server (qwen-code,
// opencode): a request whose newest message is a user message naming a Buzz channel and event
// gets a call of whichever shell tool the request offered, running `buzz messages send`; once
// the tool result comes back it ends the turn with short text. Anything else (titles, summaries)
// gets plain text. reply picks the posted content; nil posts "pong".
func ChatScript(reply ReplyFunc) fakemodel.Script {
	return func(n int, r fakemodel.Request) fakemodel.Reply {
		rep := fakemodel.Reply{Text: []string{"ok"}, InputTokens: 100, OutputTokens: 10}
		last := r.Last()
		if ch, ev, ok := ReplyTarget(last.Text); ok && last.Role == "user" {
			if call, ok := chatShellCall(r, n+1, SendCommand(ch, ev, replyContent(reply, r))); ok {
				rep.Text, rep.Calls = nil, []fakemodel.Call{call}
			}
		} else if last.Role == "tool" {
			rep.Text = []string{"Replied."}
		}
		return rep
	}
}

// chatShellCall builds the call of the shell tool the request offered: qwen-code's
// run_shell_command or opencode's bash.
func chatShellCall(req fakemodel.Request, id int, command string) (fakemodel.Call, bool) {
	var name string
	var args map[string]any
	switch {
	case req.HasTool("run_shell_command"):
		name, args = "run_shell_command", map[string]any{"command": command, "is_background": false, "description": "Reply in Buzz"}
	case req.HasTool("bash"):
		name, args = "bash", map[string]any{"command": command, "description": "Reply in Buzz"}
	default:
		return fakemodel.Call{}, false
	}
	b, _ := json.Marshal(args)
	return fakemodel.Call{ID: fmt.Sprintf("call_%02d", id), Name: name, Args: string(b)}, true
}

// GeminiScript plays the model for gemini-cli on a fakemodel Gemini server. Its shell tool is
// run_shell_command with the arguments qwen-code (a fork of it) takes, and the fake turns
// functionResponse parts into "tool" messages, so ChatScript's turn logic serves unchanged.
func GeminiScript(reply ReplyFunc) fakemodel.Script { return ChatScript(reply) }
