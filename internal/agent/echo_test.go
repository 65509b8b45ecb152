package agent

import (
	"strings"
	"testing"

	"github.com/buzz-harness/buzz/internal/acp"
)

func TestEchoModeRepliesInThreadThroughBuzzCLI(t *testing.T) {
	rf := startRelay(t)
	root := rf.post(t, "@agent ping")
	p := startBinary(t, baseEnv(append(rf.env, "BUZZ_AGENT_STATE_DIR="+t.TempDir())...))
	p.initialize()
	sid := p.newSession(specPrompt("[Base]\nbase\n\n[System]\npersona"))
	res := p.prompt(sid, harnessPrompt(rf.channel, root, root, "@agent ping")...)
	if res.StopReason != "end_turn" {
		t.Fatalf("stopReason = %q; stderr:\n%s", res.StopReason, p.stderr.String())
	}
	want := "echo: @" + zwsp + "agent ping (standing context: [Base], [System] via system prompt)"
	posted := rf.agentMessages(t)
	if len(posted) != 1 || posted[0].Content != want {
		t.Fatalf("relay has %+v, want one %q; stderr:\n%s", posted, want, p.stderr.String())
	}
	if posted[0].Tags.FindWithValue("e", root) == nil {
		t.Errorf("echo reply not threaded under %s: %v", root, posted[0].Tags)
	}
	if got := p.agentText(sid); got != want {
		t.Errorf("agent_message_chunk text = %q", got)
	}
	calls := p.sessionUpdates(sid, acp.UpdateToolCall)
	if len(calls) != 1 || !strings.Contains(string(calls[0].Raw), `"kind":"execute"`) ||
		!strings.HasPrefix(calls[0].Title, "buzz messages send --channel "+rf.channel+" --reply-to "+root+" --content ") {
		t.Errorf("tool_call = %+v", calls)
	}
	ups := p.sessionUpdates(sid, acp.UpdateToolCallUpdate)
	if len(ups) != 2 || ups[1].Status != "completed" || !strings.Contains(string(ups[1].Raw), posted[0].ID) {
		t.Errorf("tool_call_updates = %+v", ups)
	}
	if res.Usage.InputTokens == 0 || res.Usage.TotalTokens != res.Usage.InputTokens+res.Usage.OutputTokens {
		t.Errorf("usage estimate = %+v", res.Usage)
	}
	if !strings.Contains(p.stderr.String(), "echo mode") {
		t.Errorf("echo default not announced on stderr: %q", p.stderr.String())
	}
}

func TestEchoRepliesTopLevelWithoutAnchorAndNamesFirstMessageSections(t *testing.T) {
	rf := startRelay(t)
	c := startInProcess(t, Config{Env: baseEnv(rf.env...)})
	sid := c.newSession(nil)
	evID := strings.Repeat("b", 64)
	// A legacy-style first prompt: standing sections as leading blocks.
	first := append([]string{"[Base]\nbase", "[Team Instructions]\nteam"}, harnessPrompt(rf.channel, "", evID, "first")...)
	if res := c.prompt(sid, first...); res.StopReason != "end_turn" {
		t.Fatalf("stopReason %q", res.StopReason)
	}
	c.prompt(sid, harnessPrompt(rf.channel, "", evID, "second\nline two")...)
	posted := rf.agentMessages(t)
	if len(posted) != 2 {
		t.Fatalf("relay has %d agent messages", len(posted))
	}
	contents := map[string]bool{}
	for _, ev := range posted {
		contents[ev.Content] = true
		if ev.Tags.Find("e") != nil {
			t.Errorf("top-level echo has an e tag: %v", ev.Tags)
		}
	}
	for _, want := range []string{
		"echo: first (standing context: [Base], [Team Instructions] via first user message)",
		"echo: second\nline two (standing context: [Base], [Team Instructions] via first user message)",
	} {
		if !contents[want] {
			t.Errorf("missing post %q; have %v", want, contents)
		}
	}
}

func TestEchoQuoteMentionsNobody(t *testing.T) {
	rf := startRelay(t)
	c := startInProcess(t, Config{Env: baseEnv(rf.env...)})
	sid := c.newSession(nil)
	npub := "nostr:npub1" + strings.Repeat("q", 58)
	c.prompt(sid, harnessPrompt(rf.channel, "", strings.Repeat("b", 64), "@someone and "+npub)...)
	posted := rf.agentMessages(t)
	if len(posted) != 1 {
		t.Fatalf("posted %d; agent said %q", len(posted), c.agentText(sid))
	}
	if p := posted[0].Tags.Find("p"); p != nil {
		t.Errorf("echo mentioned %v", p)
	}
}

func TestEchoFlagsStandingContextRepeatedInALaterPrompt(t *testing.T) {
	c := startInProcess(t, Config{})
	sid := c.newSession(specPrompt("[Base]\nb"))
	c.prompt(sid, "hello")
	c.prompt(sid, "[Base]\nb", "hello again")
	text := c.agentText(sid)
	if !strings.Contains(text, "echo: hello again (standing context: [Base] via system prompt; repeated in this prompt: [Base])") {
		t.Errorf("agent text = %q", text)
	}
}

func TestEchoReportsAFailedPostInTheReplyStream(t *testing.T) {
	rf := startRelay(t)
	// No BUZZ_PRIVATE_KEY: the buzz CLI refuses to send.
	c := startInProcess(t, Config{Env: baseEnv("BUZZ_RELAY_URL=" + rf.srv.URL)})
	sid := c.newSession(nil)
	res := c.prompt(sid, harnessPrompt(rf.channel, "", strings.Repeat("b", 64), "hello")...)
	if res.StopReason != "end_turn" {
		t.Errorf("stopReason = %q", res.StopReason)
	}
	if text := c.agentText(sid); !strings.Contains(text, "posting the echo reply failed") || !strings.Contains(text, "private key") {
		t.Errorf("reply = %q", text)
	}
	if ups := c.sessionUpdates(sid, acp.UpdateToolCallUpdate); len(ups) != 2 || ups[1].Status != "failed" {
		t.Errorf("tool_call_updates = %+v", ups)
	}
}
