package harness_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/prompt"
	"github.com/buzz-harness/buzz/internal/testwait"
)

// standingIn reports whether a prompt text carries the standing [Base] section.
func standingIn(prompt string) bool { return strings.HasPrefix(prompt, "[Base]\n") }

func TestUserMessageRouteBriefsOncePerSession(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start([]string{"--system-prompt", "You are Helper."})
	one := s.mention(s.ownerSK, "one")
	replies := []nostr.Event{s.waitReply(one.ID)}
	for _, text := range []string{"two", "three"} { // the same thread: the same session
		s.mention(s.ownerSK, text, replyTo(one.ID))
		replies = append(replies, s.waitNewReply(one.ID, replies...))
	}
	ps := s.prompts()
	if len(ps) != 3 {
		t.Fatalf("%d prompts, want 3", len(ps))
	}
	if !standingIn(ps[0]) || !strings.Contains(ps[0], "[System]\nYou are Helper.") {
		t.Fatalf("first prompt of the session is not briefed:\n%.300s", ps[0])
	}
	for i, p := range ps[1:] {
		if strings.Contains(p, "[Base]") || strings.Contains(p, "[System]") {
			t.Fatalf("prompt %d re-sent standing context", i+2)
		}
	}
	if p := decodeSession(t, s.methods("session/new")[0]); p.SystemPrompt != nil || p.Meta["systemPrompt"] != nil {
		t.Fatal("a user-message agent got a system prompt on session/new")
	}
}

func TestUserMessageRouteBriefsAgainAfterRotate(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start(nil)
	first := s.mention(s.ownerSK, "one")
	s.waitReply(first.ID)
	s.waitOutcome(s.mention(s.ownerSK, "!rotate").ID)
	second := s.mention(s.ownerSK, "two")
	s.waitReply(second.ID)
	ps := s.prompts()
	if len(ps) != 2 || !standingIn(ps[0]) || !standingIn(ps[1]) {
		t.Fatalf("after !rotate the replacement session was not briefed (prompts: %d)", len(ps))
	}
}

func TestUserMessageRouteBriefsAgainAfterRespawn(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start(nil, "TESTAGENT_CRASH_ON=2")
	first := s.mention(s.ownerSK, "one")
	s.waitReply(first.ID)
	second := s.mention(s.ownerSK, "two") // crashes the agent mid-turn, then is retried
	s.waitReply(second.ID)
	ps := s.prompts()
	last := ps[len(ps)-1]
	if !standingIn(last) {
		t.Fatal("the retried prompt on the respawned agent's new session was not briefed")
	}
}

func TestSpecSystemPromptRouteSendsStandingOnSessionNewOnly(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start([]string{"--system-prompt", "You are Helper."}, "TESTAGENT_CAPS=systemPrompt")
	for _, text := range []string{"one", "two"} {
		s.waitReply(s.mention(s.ownerSK, text).ID)
	}
	p := decodeSession(t, s.methods("session/new")[0])
	if p.SystemPrompt == nil || p.SystemPrompt.Mode != "append" || len(p.SystemPrompt.Content) != 1 ||
		p.SystemPrompt.Content[0].Type != "text" || !strings.Contains(p.SystemPrompt.Content[0].Text, "[Base]\n") ||
		!strings.Contains(p.SystemPrompt.Content[0].Text, "[System]\nYou are Helper.") {
		t.Fatalf("session/new systemPrompt = %+v", p.SystemPrompt)
	}
	if p.Meta["systemPrompt"] != nil {
		t.Fatal("_meta.systemPrompt sent alongside the spec field")
	}
	for i, pr := range s.prompts() {
		if strings.Contains(pr, "[Base]") {
			t.Fatalf("prompt %d carries [Base] although the agent has a system prompt", i+1)
		}
	}
}

func TestClaudeAgentACPGetsMetaSystemPromptMergedWithChannelMeta(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"@agentclientprotocol/claude-agent-acp", "@zed-industries/claude-agent-acp", "@zed-industries/claude-code-acp"} {
		t.Run(name, func(t *testing.T) {
			s := newStack(t)
			s.start(nil, "TESTAGENT_NAME="+name, "TESTAGENT_VERSION=0.23.1")
			s.waitReply(s.mention(s.ownerSK, "hi").ID)
			p := decodeSession(t, s.methods("session/new")[0])
			sp, _ := p.Meta["systemPrompt"].(map[string]any)
			text, _ := sp["append"].(string)
			if !strings.Contains(text, "[Base]\n") || p.Meta["channelId"] != s.channel || p.Meta["sessionTitle"] == nil {
				t.Fatalf("_meta = %v", p.Meta)
			}
			if p.SystemPrompt != nil {
				t.Fatal("spec systemPrompt sent to an agent that did not advertise it")
			}
			if standingIn(s.prompts()[0]) {
				t.Fatal("claude-agent-acp also got the standing context in the user message")
			}
		})
	}
}

func TestClaudeAgentACPBelowVersionFloorFallsBackToUserMessage(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start(nil, "TESTAGENT_NAME=@zed-industries/claude-code-acp", "TESTAGENT_VERSION=0.5.2")
	s.waitReply(s.mention(s.ownerSK, "hi").ID)
	if p := decodeSession(t, s.methods("session/new")[0]); p.Meta["systemPrompt"] != nil {
		t.Fatal("_meta.systemPrompt sent below the 0.6.0 floor")
	}
	if !standingIn(s.prompts()[0]) {
		t.Fatal("standing context not delivered in the first user message")
	}
}

func TestGooseProbeSuccessDeliversViaCustomMethod(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start(nil, "TESTAGENT_NAME=goose", "TESTAGENT_GOOSE_SYSTEM_PROMPT=1")
	s.waitReply(s.mention(s.ownerSK, "hi").ID)
	calls := s.methods("_goose/unstable/session/system-prompt/set")
	if len(calls) != 1 || !strings.Contains(string(calls[0].Params), `"mode":"append"`) || !strings.Contains(string(calls[0].Params), `"key":"buzz"`) {
		t.Fatalf("goose method calls: %v", calls)
	}
	if standingIn(s.prompts()[0]) {
		t.Fatal("goose with a working system-prompt method also got standing in the user message")
	}
}

func TestGooseProbeMethodNotFoundFallsBackToUserMessage(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start(nil, "TESTAGENT_NAME=goose")
	hi := s.mention(s.ownerSK, "hi")
	r1 := s.waitReply(hi.ID)
	s.mention(s.ownerSK, "again", replyTo(hi.ID))
	s.waitNewReply(hi.ID, r1)
	ps := s.prompts()
	if !standingIn(ps[0]) || standingIn(ps[1]) {
		t.Fatal("after -32601 goose must be briefed once in the first user message")
	}
}

func TestGooseProbeOtherErrorFailsSessionCreationClearly(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start(nil, "TESTAGENT_NAME=goose", "TESTAGENT_GOOSE_SYSTEM_PROMPT=error")
	s.mention(s.ownerSK, "hi")
	s.waitLog("goose system prompt: ", 20*time.Second)
	if !strings.Contains(s.logs.String(), "system prompt store unavailable") {
		t.Fatal("the failure does not carry the agent's error")
	}
	if len(s.methods("session/prompt")) != 0 {
		t.Fatal("a session whose system prompt could not be set was prompted")
	}
}

func TestUserMessageRouteBriefsAgainAfterMaxTokens(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start(nil, "TESTAGENT_STOP_REASON=max_tokens")
	one := s.mention(s.ownerSK, "one")
	r1 := s.waitReply(one.ID)
	// The reply can land while its turn still runs; "two" sent then would cancel the turn to
	// merge, and a cancelled turn keeps its session. Let it end on max_tokens first.
	s.waitLogCount(`msg="turn done"`, 1, 20*time.Second)
	s.mention(s.ownerSK, "two", replyTo(one.ID))
	s.waitNewReply(one.ID, r1)
	ps := s.prompts()
	if len(ps) != 2 || !standingIn(ps[0]) || !standingIn(ps[1]) {
		t.Fatal("after max_tokens the session must be replaced and the new one briefed")
	}
	if len(s.methods("session/new")) != 2 {
		t.Fatalf("%d session/new, want 2", len(s.methods("session/new")))
	}
}

// promptBlocks is the text blocks of each session/prompt the agent received, in order.
func (s *stack) promptBlocks() [][]string {
	var out [][]string
	for _, r := range s.methods("session/prompt") {
		var p struct {
			Prompt []struct{ Text string } `json:"prompt"`
		}
		_ = json.Unmarshal(r.Params, &p)
		var texts []string
		for _, b := range p.Prompt {
			texts = append(texts, b.Text)
		}
		out = append(out, texts)
	}
	return out
}

// standingBytes is the size of the standing sections leading a prompt's blocks.
func standingBytes(blocks []string) int {
	n := 0
	for _, b := range blocks[:len(prompt.ParseStandingBlocks(blocks))] {
		n += len(b)
	}
	return n
}

// briefedThenRestarted answers one mention on the user-message route with the agent's env
// before, SIGKILLs buzz-acp (once ready, if given, has waited for what must be on disk),
// restarts it with env after and answers a follow-up in the same thread. It returns the blocks
// of both prompts.
func briefedThenRestarted(t *testing.T, before, after []string, ready func(s *stack)) (*stack, [][]string) {
	t.Helper()
	s := newStack(t)
	s.start(nil, before...)
	first := s.mention(s.ownerSK, "one")
	r1 := s.waitReply(first.ID)
	s.waitLog("turn done", 20*time.Second) // the test agent saves its history after posting the reply
	if ready != nil {
		ready(s)
	}
	s.kill()
	s.start(nil, after...)
	s.mention(s.ownerSK, "two", replyTo(first.ID))
	s.waitNewReply(first.ID, r1)
	s.waitLog("turn done", 20*time.Second)
	ps := s.promptBlocks()
	if len(ps) != 2 || standingBytes(ps[0]) == 0 {
		t.Fatalf("%d prompts; the first must carry the standing context", len(ps))
	}
	return s, ps
}

// waitStoreMark waits until the session store file records a briefed session.
func (s *stack) waitStoreMark() {
	s.t.Helper()
	path := filepath.Join(s.stateDir, "sessions-"+s.agentPK+".json")
	testwait.Eventually(s.t, 10*time.Second, func() bool {
		b, _ := os.ReadFile(path)
		return strings.Contains(string(b), `"standingDelivered": true`)
	}, "the session store to mark the session briefed")
}

func TestUserMessageRouteIsNotBriefedAgainAfterRestartWhoseLoadReplaysTheBriefing(t *testing.T) {
	t.Parallel()
	s, ps := briefedThenRestarted(t, nil, nil, nil)
	if len(s.methods("session/load")) != 1 {
		t.Fatalf("session/load ×%d, want 1", len(s.methods("session/load")))
	}
	if standingBytes(ps[1]) != 0 {
		t.Fatalf("the reloaded session got the standing context again:\n%.200s", ps[1][0])
	}
	t.Logf("bytes not re-sent per restart: %d", standingBytes(ps[0]))
}

func TestUserMessageRouteIsNotBriefedAgainAfterRestartWithSessionResume(t *testing.T) {
	t.Parallel()
	s, ps := briefedThenRestarted(t, []string{"TESTAGENT_CAPS=resume"}, []string{"TESTAGENT_CAPS=resume"},
		func(s *stack) { s.waitStoreMark() })
	if len(s.methods("session/resume")) != 1 {
		t.Fatalf("session/resume ×%d, want 1", len(s.methods("session/resume")))
	}
	if standingBytes(ps[1]) != 0 {
		t.Fatalf("the resumed session got the standing context again:\n%.200s", ps[1][0])
	}
}

func TestUserMessageRouteIsBriefedAgainWhenTheLoadReplayLacksTheBriefing(t *testing.T) {
	t.Parallel()
	// The store says briefed, but the agent's history came back without it: the replay wins.
	_, ps := briefedThenRestarted(t, nil, []string{"TESTAGENT_NO_REPLAY=1"}, func(s *stack) { s.waitStoreMark() })
	if standingBytes(ps[1]) == 0 {
		t.Fatal("a reloaded session whose history lacks the standing context was not briefed")
	}
}

func TestUserMessageRouteIsBriefedAgainAfterResumeOfARecordWithoutTheMark(t *testing.T) {
	t.Parallel()
	// A store file written before the mark existed: the session is briefed again, as before.
	_, ps := briefedThenRestarted(t, []string{"TESTAGENT_CAPS=resume"}, []string{"TESTAGENT_CAPS=resume"}, func(s *stack) {
		s.waitStoreMark()
		path := filepath.Join(s.stateDir, "sessions-"+s.agentPK+".json")
		s.kill() // the harness must not rewrite the file after the edit
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		old := strings.Replace(string(b), `,
      "standingDelivered": true`, "", 1)
		if old == string(b) {
			t.Fatalf("no mark to strip in %s", b)
		}
		if err := os.WriteFile(path, []byte(old), 0o600); err != nil {
			t.Fatal(err)
		}
	})
	if standingBytes(ps[1]) == 0 {
		t.Fatal("a resumed session without the stored mark was not briefed")
	}
}
