package harness

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/acp"
	"github.com/buzz-harness/buzz/internal/protocol"
)

func failedSend(output string, exit int) callRecord {
	return callRecord{send: true, channel: followChannel, status: "failed", output: output, exit: exit}
}

func TestDecideReplyPostsTheTextOnlyForASilentTurnWithTextUnderFallback(t *testing.T) {
	text := turnReport{text: "the answer is 4"}
	for name, c := range map[string]struct {
		f    replyFacts
		want replyKind
	}{
		"answered":               {replyFacts{answered: true, mode: PublishFallback, report: text}, replyAnswered},
		"text, fallback":         {replyFacts{mode: PublishFallback, report: text}, replyFallback},
		"text, off":              {replyFacts{mode: PublishOff, report: text}, replyNotice},
		"no text, fallback":      {replyFacts{mode: PublishFallback}, replyNotice},
		"failed send, text left": {replyFacts{mode: PublishFallback, report: turnReport{text: "sorry", sends: []callRecord{failedSend("Exit code 3", 3)}}}, replyFallback},
	} {
		if got := decideReply(c.f); got.kind != c.want {
			t.Errorf("%s: decided %v, want %v", name, got.kind, c.want)
		}
	}
}

func TestSilentReasonSaysWhyInOneLineAPersonUnderstands(t *testing.T) {
	cliKeyError := "Exit code 3\n" + `{"error":"key_error","message":"no private key: set BUZZ_PRIVATE_KEY or pass --private-key (hex or nsec)","retryable":false}`
	for name, c := range map[string]struct {
		report    turnReport
		elsewhere string
		want      string
	}{
		"nothing at all":  {turnReport{}, "", "without writing or sending an answer"},
		"text, no send":   {turnReport{text: "4"}, "", "never sent it"},
		"no key":          {turnReport{sends: []callRecord{failedSend(cliKeyError, 3)}}, "", "BUZZ_PRIVATE_KEY is not set"},
		"bad credentials": {turnReport{sends: []callRecord{failedSend(`{"error":"auth_error","message":"relay said 401"}`, 3)}}, "", "refused my `buzz` command's credentials"},
		"not a member":    {turnReport{sends: []callRecord{failedSend(`{"error":"relay_error","message":"restricted: not a channel member"}`, 2)}}, "", "not a member of channel " + followChannel},
		"no such channel": {turnReport{sends: []callRecord{failedSend(`{"error":"not_found","message":"unknown channel"}`, 1)}}, "", "does not exist"},
		"denied":          {turnReport{sends: []callRecord{{send: true, status: "failed", denied: true, exit: -1}}}, "", "permission mode denied"},
		"still running":   {turnReport{sends: []callRecord{{send: true, status: "in_progress", exit: -1}}}, "", "had not finished"},
		"posted elsewhere": {turnReport{sends: []callRecord{{send: true, status: "completed", exit: 0}}}, followChannel,
			"I posted it in channel " + followChannel},
		"other failure": {turnReport{sends: []callRecord{failedSend("```console\nExit code 4\nsegfault in the CLI\n```", 4)}}, "", "failed: segfault in the CLI"},
		"last send decides": {turnReport{sends: []callRecord{failedSend(cliKeyError, 3), {send: true, status: "failed", denied: true, exit: -1}}}, "",
			"permission mode denied"},
	} {
		got := silentReason(replyFacts{report: c.report, elsewhere: c.elsewhere})
		if !strings.Contains(got, c.want) || strings.Contains(got, "\n") {
			t.Errorf("%s: reason %q, want one line containing %q", name, got, c.want)
		}
	}
}

func TestAnswersCountsTheBatchsThreadAndItsChannelsTopLevelButNotOtherThreads(t *testing.T) {
	start := time.Unix(1_800_000_000, 0)
	root := &nostr.Event{ID: rootN(1), Tags: nostr.Tags{{"h", followChannel}}, CreatedAt: nostr.Timestamp(start.Unix() - 5)}
	b := &Batch{Conv: convKey{Channel: followChannel, Root: root.ID}, Items: []queued{{Event: root}}}
	msg := func(sec int64, tags ...nostr.Tag) *nostr.Event {
		return &nostr.Event{Kind: 9, Tags: append(nostr.Tags{{"h", followChannel}}, tags...), CreatedAt: nostr.Timestamp(start.Unix() + sec)}
	}
	for name, c := range map[string]struct {
		r    *nostr.Event
		want bool
	}{
		"reply in the thread":          {msg(1, nostr.Tag{"e", root.ID, "", "reply"}), true},
		"top level in the channel":     {msg(1), true},
		"reply in another thread":      {msg(1, nostr.Tag{"e", rootN(9), "", "reply"}), false},
		"top level, before the turn":   {msg(-1), false},
		"a notice for another batch":   {msg(1, nostr.Tag{FailureMarker, "1"}), false},
		"a permission question":        {msg(1, nostr.Tag{"e", root.ID, "", "reply"}, protocol.PermissionRequestTag), false},
		"top level in another channel": {&nostr.Event{Kind: 9, Tags: nostr.Tags{{"h", "00000000-0000-4000-8000-000000000000"}}, CreatedAt: nostr.Timestamp(start.Unix() + 1)}, false},
	} {
		if got := answers(c.r, b, start, true); got != c.want {
			t.Errorf("%s: answers = %v, want %v", name, got, c.want)
		}
	}
	// A conversation spanning the channel: any message in the channel since then.
	b.Conv.Root = ""
	if !answers(msg(1, nostr.Tag{"e", rootN(9), "", "reply"}), b, start, true) {
		t.Error("a message in a channel-wide conversation's channel does not answer it")
	}
}

// agentUpdate builds a session/update as claude-agent-acp sends it.
func agentUpdate(t *testing.T, sid string, u map[string]any) acp.SessionUpdate {
	t.Helper()
	raw, err := json.Marshal(map[string]any{"sessionId": sid, "update": u})
	if err != nil {
		t.Fatal(err)
	}
	return acp.ParseSessionUpdate(raw)
}

func TestTranscriptKeepsTheTextAfterTheLastToolCallAndHowEachSendEnded(t *testing.T) {
	var tr transcripts
	tr.start("s1")
	for _, u := range []map[string]any{
		{"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "text", "text": "Let me post that."}},
		{"sessionUpdate": "tool_call", "toolCallId": "toolu_1", "title": "/usr/local/bin/buzz messages send --channel " + followChannel + " --content hi",
			"kind": "execute", "status": "pending", "rawInput": map[string]any{"command": "buzz messages send --channel " + followChannel + " --content hi"}},
		{"sessionUpdate": "tool_call_update", "toolCallId": "toolu_1", "status": "failed",
			"content": []any{map[string]any{"type": "content", "content": map[string]any{"type": "text", "text": "```console\nExit code 3\nno private key\n```"}}}},
		{"sessionUpdate": "tool_call", "toolCallId": "toolu_2", "title": "Read file", "kind": "read", "status": "completed"},
		{"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "text", "text": "The answer "}},
		{"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "text", "text": "is 4."}},
	} {
		tr.observe(agentUpdate(t, "s1", u))
	}
	tr.observe(agentUpdate(t, "other", map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "text", "text": "not this turn's"}}))
	r := tr.end("s1")
	if r.text != "The answer is 4." {
		t.Fatalf("final text %q, want the text after the last tool call", r.text)
	}
	if len(r.sends) != 1 {
		t.Fatalf("%d send calls, want 1 (the read is not one): %+v", len(r.sends), r.sends)
	}
	if c := r.sends[0]; c.status != "failed" || c.exit != 3 || c.channel != followChannel || !strings.Contains(c.output, "no private key") {
		t.Fatalf("send call %+v, want failed with exit 3 in the named channel", c)
	}
	if r := tr.end("s1"); r.text != "" || r.sends != nil {
		t.Fatal("a session's record outlived its turn")
	}
}

func TestTranscriptTakesADenialFromClaudesNonExecutionKind(t *testing.T) {
	var tr transcripts
	tr.start("s1")
	tr.observe(agentUpdate(t, "s1", map[string]any{"sessionUpdate": "tool_call", "toolCallId": "t", "title": "buzz messages send --content x", "status": "pending"}))
	tr.observe(agentUpdate(t, "s1", map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": "t", "status": "failed",
		"_meta": map[string]any{"claudeCode": map[string]any{"toolName": "Bash", "nonExecutionKind": "permission-rule"}}}))
	if r := tr.end("s1"); len(r.sends) != 1 || !r.sends[0].denied {
		t.Fatalf("sends %+v, want one denied", r.sends)
	}
}

func TestSendCallsAreFoundByTheCommandOrTheMCPTool(t *testing.T) {
	for s, want := range map[string]bool{
		"buzz messages send --channel x --content hi":        true,
		`{"command":["bash","-lc","buzz messages send -c"]}`: true,
		"/opt/buzz/bin/buzz messages send --content hi":      true,
		"mcp__buzz__send_message":                            true,
		"buzz messages get --channel x":                      false,
		"mybuzz messages send":                               false,
		"echo 'buzz is great'":                               false,
	} {
		if got := isSendCall(s); got != want {
			t.Errorf("isSendCall(%q) = %v, want %v", s, got, want)
		}
	}
}
