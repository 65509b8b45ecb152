package agent

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/buzz-harness/buzz/internal/acp"
	"github.com/buzz-harness/buzz/internal/agent/provider"
	"github.com/buzz-harness/buzz/internal/fakemodel"
	"github.com/buzz-harness/buzz/internal/testbin"
)

type fakeModel struct {
	name   string
	server func(testing.TB, fakemodel.Script) *fakemodel.Server
	client func(*fakemodel.Server) provider.Provider
}

var fakeModels = []fakeModel{
	{"openai", fakemodel.NewOpenAI, func(s *fakemodel.Server) provider.Provider {
		return provider.NewOpenAI(provider.OpenAIConfig{APIKey: "sk-test", BaseURL: s.BaseURL, Model: "gpt-test"})
	}},
	{"anthropic", fakemodel.NewAnthropic, func(s *fakemodel.Server) provider.Provider {
		return provider.NewAnthropic(provider.AnthropicConfig{APIKey: "sk-ant-test", BaseURL: s.BaseURL, Model: "claude-test"})
	}},
}

// noSleep makes retries instant.
func noSleep(context.Context, time.Duration) error { return nil }

func TestTextTurnStreamsChunksWithSessionSystemPromptAndReturnsUsage(t *testing.T) {
	for _, m := range fakeModels {
		t.Run(m.name, func(t *testing.T) {
			srv := m.server(t, func(n int, r fakemodel.Request) fakemodel.Reply {
				return fakemodel.Reply{Text: []string{"Hello", " there"}, InputTokens: 11, OutputTokens: 2}
			})
			c := startInProcess(t, Config{Provider: m.client(srv)})
			c.initialize()
			sid := c.newSession(specPrompt("[Base]\nYou are helpful."))
			res := c.prompt(sid, "[Context]\nScope: channel", "hi")
			if res.StopReason != "end_turn" {
				t.Errorf("stopReason = %q", res.StopReason)
			}
			if res.Usage.InputTokens != 11 || res.Usage.OutputTokens != 2 || res.Usage.TotalTokens != 13 {
				t.Errorf("usage = %+v", res.Usage)
			}
			if chunks := c.sessionUpdates(sid, acp.UpdateAgentMessageChunk); len(chunks) != 2 || c.agentText(sid) != "Hello there" {
				t.Errorf("chunks = %+v", chunks)
			}
			req := srv.Requests()[0]
			if req.System != "[Base]\nYou are helpful." {
				t.Errorf("model system prompt = %q", req.System)
			}
			if len(req.Messages) != 1 || req.Messages[0].Text != "[Context]\nScope: channel\n\nhi" {
				t.Errorf("model messages = %+v", req.Messages)
			}
			// Second turn: the model sees the first exchange as history.
			c.prompt(sid, "again")
			msgs := srv.Requests()[1].Messages
			if len(msgs) != 3 || msgs[1].Role != "assistant" || msgs[1].Text != "Hello there" || msgs[2].Text != "again" {
				t.Errorf("second turn history = %+v", msgs)
			}
		})
	}
}

func TestPlainStringSystemPromptIsAccepted(t *testing.T) {
	srv := fakemodel.NewAnthropic(t, func(n int, r fakemodel.Request) fakemodel.Reply {
		return fakemodel.Reply{Text: []string{"ok"}}
	})
	c := startInProcess(t, Config{Provider: fakeModels[1].client(srv)})
	sid := c.newSession("[Base]\nplain string form")
	c.prompt(sid, "x")
	if got := srv.Requests()[0].System; got != "[Base]\nplain string form" {
		t.Errorf("system = %q", got)
	}
}

func TestToolCallRunsBuzzMessagesSendAndPostsToRelay(t *testing.T) {
	for _, m := range fakeModels {
		t.Run(m.name, func(t *testing.T) {
			rf := startRelay(t)
			root := rf.post(t, "@agent say hi please")
			cmd := "buzz messages send --channel " + rf.channel + " --reply-to " + root + " --content 'model says hi'"
			args, _ := json.Marshal(map[string]string{"command": cmd})
			srv := m.server(t, func(n int, r fakemodel.Request) fakemodel.Reply {
				if r.Last().Role == "tool" {
					return fakemodel.Reply{Text: []string{"Posted."}, InputTokens: 20, OutputTokens: 3}
				}
				return fakemodel.Reply{Calls: []fakemodel.Call{{ID: "call_1", Name: "shell", Args: string(args)}}, InputTokens: 10, OutputTokens: 5}
			})
			c := startInProcess(t, Config{Provider: m.client(srv), Env: baseEnv(rf.env...)})
			sid := c.newSession(specPrompt("[Base]\nuse buzz"))
			res := c.prompt(sid, harnessPrompt(rf.channel, root, root, "@agent say hi please")...)
			if res.StopReason != "end_turn" || res.Usage.InputTokens != 30 || res.Usage.OutputTokens != 8 {
				t.Fatalf("result = %+v", res)
			}

			posted := rf.agentMessages(t)
			if len(posted) != 1 || posted[0].Content != "model says hi" {
				t.Fatalf("agent messages on relay = %+v", posted)
			}
			if tag := posted[0].Tags.FindWithValue("e", root); tag == nil {
				t.Errorf("reply lacks e tag to %s: %v", root, posted[0].Tags)
			}

			perms := c.permissions()
			if len(perms) != 1 {
				t.Fatalf("permission requests = %d", len(perms))
			}
			kinds := map[string]bool{}
			for _, o := range perms[0].Options {
				kinds[o.Kind] = true
			}
			for _, k := range []string{acp.KindAllowOnce, acp.KindAllowAlways, acp.KindRejectOnce, acp.KindRejectAlways} {
				if !kinds[k] {
					t.Errorf("permission options lack %s: %+v", k, perms[0].Options)
				}
			}
			calls := c.sessionUpdates(sid, acp.UpdateToolCall)
			if len(calls) != 1 || calls[0].ToolCallID != "call_1" || calls[0].Title != cmd || !strings.Contains(string(calls[0].Raw), `"kind":"execute"`) {
				t.Errorf("tool_call updates = %+v", calls)
			}
			var statuses []string
			for _, u := range c.sessionUpdates(sid, acp.UpdateToolCallUpdate) {
				statuses = append(statuses, u.Status)
			}
			if strings.Join(statuses, ",") != "in_progress,completed" {
				t.Errorf("tool_call_update statuses = %v", statuses)
			}
			result := srv.Requests()[1].Last()
			if result.ToolCallID != "call_1" || !strings.Contains(result.Text, posted[0].ID) || !strings.Contains(result.Text, "[exit code: 0]") {
				t.Errorf("tool result sent to model = %+v", result)
			}
			if c.agentText(sid) != "Posted." {
				t.Errorf("agent text = %q", c.agentText(sid))
			}
		})
	}
}

func TestDeniedPermissionSkipsTheCommandAndTellsTheModel(t *testing.T) {
	cwd := t.TempDir()
	marker := filepath.Join(cwd, "should-not-exist")
	args, _ := json.Marshal(map[string]string{"command": "touch " + marker})
	srv := fakemodel.NewOpenAI(t, func(n int, r fakemodel.Request) fakemodel.Reply {
		if r.Last().Role == "tool" {
			return fakemodel.Reply{Text: []string{"ok, I will not"}}
		}
		return fakemodel.Reply{Calls: []fakemodel.Call{{ID: "call_x", Name: "shell", Args: string(args)}}}
	})
	c := startInProcess(t, Config{Provider: fakeModels[0].client(srv)})
	c.setAnswer(pick(acp.KindRejectOnce))
	var ns struct{ SessionID string }
	c.mustCall("session/new", map[string]any{"cwd": cwd, "mcpServers": []any{}}, &ns)
	res := c.prompt(ns.SessionID, "make the file")
	if res.StopReason != "end_turn" {
		t.Errorf("stopReason = %q", res.StopReason)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the denied command ran")
	}
	ups := c.sessionUpdates(ns.SessionID, acp.UpdateToolCallUpdate)
	if len(ups) != 1 || ups[0].Status != "failed" {
		t.Errorf("tool_call_update = %+v", ups)
	}
	if got := srv.Requests()[1].Last(); got.Role != "tool" || !strings.Contains(got.Text, "permission denied") {
		t.Errorf("model was told %+v", got)
	}
}

func TestAlwaysAllowIsNotAskedAgainInTheSession(t *testing.T) {
	srv := fakemodel.NewOpenAI(t, func(n int, r fakemodel.Request) fakemodel.Reply {
		if r.Last().Role == "tool" {
			return fakemodel.Reply{Text: []string{"done"}}
		}
		return fakemodel.Reply{Calls: []fakemodel.Call{{ID: "c" + string(rune('0'+n)), Name: "shell", Args: `{"command":"true"}`}}}
	})
	c := startInProcess(t, Config{Provider: fakeModels[0].client(srv)})
	c.setAnswer(pick(acp.KindAllowAlways))
	sid := c.newSession(nil)
	c.prompt(sid, "one")
	c.prompt(sid, "two")
	if n := len(c.permissions()); n != 1 {
		t.Errorf("permission requests = %d, want 1", n)
	}
	if n := len(c.sessionUpdates(sid, acp.UpdateToolCallUpdate)); n != 4 {
		t.Errorf("tool_call_updates = %d, want 4 (both calls ran)", n)
	}
}

func TestCancelledPermissionOutcomeCancelsTheTurn(t *testing.T) {
	srv := fakemodel.NewOpenAI(t, func(n int, r fakemodel.Request) fakemodel.Reply {
		return fakemodel.Reply{Calls: []fakemodel.Call{{ID: "c1", Name: "shell", Args: `{"command":"true"}`}}}
	})
	c := startInProcess(t, Config{Provider: fakeModels[0].client(srv)})
	c.setAnswer(func(acp.PermissionRequest) acp.PermissionResponse {
		return acp.PermissionResponse{Outcome: acp.PermissionOutcome{Outcome: "cancelled"}}
	})
	sid := c.newSession(nil)
	if res := c.prompt(sid, "go"); res.StopReason != "cancelled" {
		t.Errorf("stopReason = %q, want cancelled", res.StopReason)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("model calls = %d, want 1", n)
	}
}

func TestSessionCancelMidStreamEndsTurnAsCancelled(t *testing.T) {
	for _, m := range fakeModels {
		t.Run(m.name, func(t *testing.T) {
			srv := m.server(t, func(n int, r fakemodel.Request) fakemodel.Reply {
				if n == 0 {
					return fakemodel.Reply{Text: []string{"partial answer"}, Hang: true}
				}
				return fakemodel.Reply{Text: []string{"fresh"}}
			})
			c := startInProcess(t, Config{Provider: m.client(srv)})
			sid := c.newSession(nil)
			done := make(chan promptResult, 1)
			go func() {
				var res promptResult
				if err := c.call("session/prompt", acp.PromptParams{SessionID: sid, Prompt: textBlocks("talk")}, &res); err != nil {
					t.Error(err)
				}
				done <- res
			}()
			// Cancel only once the model is visibly mid-stream.
			for u := range c.updateCh {
				if u.Kind == acp.UpdateAgentMessageChunk {
					break
				}
			}
			if err := c.conn.Notify("session/cancel", acp.SessionIDParams{SessionID: sid}); err != nil {
				t.Fatal(err)
			}
			select {
			case res := <-done:
				if res.StopReason != "cancelled" {
					t.Errorf("stopReason = %q", res.StopReason)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("prompt not answered after session/cancel")
			}
			// The session stays usable and remembers what was already said.
			if res := c.prompt(sid, "again"); res.StopReason != "end_turn" {
				t.Errorf("next turn stopReason = %q", res.StopReason)
			}
			hist := srv.Requests()[1].Messages
			if len(hist) != 3 || hist[1].Text != "partial answer" {
				t.Errorf("history after cancel = %+v", hist)
			}
		})
	}
}

func TestRateLimitIsRetriedAndTheTurnSucceeds(t *testing.T) {
	for _, m := range fakeModels {
		t.Run(m.name, func(t *testing.T) {
			srv := m.server(t, func(n int, r fakemodel.Request) fakemodel.Reply {
				if n == 0 {
					return fakemodel.Reply{Status: 429, ErrorMessage: "rate limited"}
				}
				return fakemodel.Reply{Text: []string{"after retry"}}
			})
			var waits []time.Duration
			p := &provider.Retrying{Provider: m.client(srv), Sleep: func(_ context.Context, d time.Duration) error {
				waits = append(waits, d)
				return nil
			}}
			c := startInProcess(t, Config{Provider: p})
			sid := c.newSession(nil)
			res := c.prompt(sid, "hi")
			if res.StopReason != "end_turn" || c.agentText(sid) != "after retry" {
				t.Errorf("result %+v, text %q", res, c.agentText(sid))
			}
			if len(srv.Requests()) != 2 || len(waits) != 1 {
				t.Errorf("requests = %d, backoffs = %v", len(srv.Requests()), waits)
			}
		})
	}
}

func TestBadKeyEndsTheTurnWithAClearMessage(t *testing.T) {
	for _, m := range fakeModels {
		t.Run(m.name, func(t *testing.T) {
			srv := m.server(t, func(n int, r fakemodel.Request) fakemodel.Reply {
				return fakemodel.Reply{Status: 401, ErrorMessage: "invalid x-api-key"}
			})
			logs := &testbin.Output{}
			c := startInProcess(t, Config{Provider: &provider.Retrying{Provider: m.client(srv), Sleep: noSleep}, Log: logs})
			sid := c.newSession(nil)
			res := c.prompt(sid, "hi")
			if res.StopReason != "end_turn" {
				t.Errorf("stopReason = %q", res.StopReason)
			}
			text := c.agentText(sid)
			for _, want := range []string{"model provider error", m.name, "401", "invalid x-api-key", "check the API key"} {
				if !strings.Contains(text, want) {
					t.Errorf("reply %q lacks %q", text, want)
				}
				if !strings.Contains(logs.String(), want) {
					t.Errorf("stderr %q lacks %q", logs.String(), want)
				}
			}
			if n := len(srv.Requests()); n != 1 {
				t.Errorf("a bad key was retried: %d requests", n)
			}
			// The error notice is not sent to the model on the next turn
			// (Anthropic merges the two user turns into one).
			c.prompt(sid, "again")
			for _, msg := range srv.Requests()[1].Messages {
				if msg.Role != "user" || strings.Contains(msg.Text, "provider error") {
					t.Errorf("next request history = %+v", srv.Requests()[1].Messages)
				}
			}
		})
	}
}

func TestToolLoopStopsAfterMaxRounds(t *testing.T) {
	srv := fakemodel.NewOpenAI(t, func(n int, r fakemodel.Request) fakemodel.Reply {
		return fakemodel.Reply{Calls: []fakemodel.Call{{ID: "r" + string(rune('a'+n)), Name: "read_file", Args: `{"path":"nope.txt"}`}}}
	})
	c := startInProcess(t, Config{Provider: fakeModels[0].client(srv), MaxToolRounds: 3})
	sid := c.newSession(nil)
	res := c.prompt(sid, "loop")
	if res.StopReason != "end_turn" || len(srv.Requests()) != 3 {
		t.Errorf("stop %q after %d model calls", res.StopReason, len(srv.Requests()))
	}
	if !strings.Contains(c.agentText(sid), "stopped after 3 tool rounds") {
		t.Errorf("agent text = %q", c.agentText(sid))
	}
	if got := srv.Requests()[1].Last(); got.Role != "tool" || !strings.Contains(got.Text, "no such file") {
		t.Errorf("read_file error not reported to model: %+v", got)
	}
}

func TestWriteAndReadFileToolsWorkInSessionCwd(t *testing.T) {
	srv := fakemodel.NewAnthropic(t, func(n int, r fakemodel.Request) fakemodel.Reply {
		switch n {
		case 0:
			return fakemodel.Reply{Calls: []fakemodel.Call{{ID: "w", Name: "write_file", Args: `{"path":"sub/note.txt","content":"abc"}`}}}
		case 1:
			return fakemodel.Reply{Calls: []fakemodel.Call{{ID: "r", Name: "read_file", Args: `{"path":"sub/note.txt"}`}}}
		}
		return fakemodel.Reply{Text: []string{"read: " + r.Last().Text}}
	})
	c := startInProcess(t, Config{Provider: fakeModels[1].client(srv)})
	cwd := t.TempDir()
	var ns struct{ SessionID string }
	c.mustCall("session/new", map[string]any{"cwd": cwd, "mcpServers": []any{}}, &ns)
	c.prompt(ns.SessionID, "note it")
	if b, err := os.ReadFile(filepath.Join(cwd, "sub", "note.txt")); err != nil || string(b) != "abc" {
		t.Fatalf("file = %q, %v", b, err)
	}
	if got := c.agentText(ns.SessionID); got != "read: abc" {
		t.Errorf("agent text = %q", got)
	}
	// write_file asks permission, read_file does not.
	if p := c.permissions(); len(p) != 1 || !strings.Contains(string(p[0].ToolCall), `"kind":"edit"`) {
		t.Errorf("permissions = %+v", p)
	}
}

func TestUnreachableProviderEndsTheTurnWithAClearMessage(t *testing.T) {
	srv := fakemodel.NewOpenAI(t, func(int, fakemodel.Request) fakemodel.Reply { return fakemodel.Reply{} })
	base := srv.BaseURL
	srv.Close() // nothing listens there any more
	logs := &testbin.Output{}
	p := provider.NewOpenAI(provider.OpenAIConfig{APIKey: "k", BaseURL: base})
	c := startInProcess(t, Config{Provider: &provider.Retrying{Provider: p, Sleep: noSleep}, Log: logs})
	sid := c.newSession(nil)
	if res := c.prompt(sid, "hi"); res.StopReason != "end_turn" {
		t.Errorf("stopReason = %q", res.StopReason)
	}
	if text := c.agentText(sid); !strings.Contains(text, "model provider error") || !strings.Contains(text, "connection refused") {
		t.Errorf("reply = %q", text)
	}
	if !strings.Contains(logs.String(), "connection refused") {
		t.Errorf("stderr = %q", logs.String())
	}
}

func TestBinaryReachesEachProviderThroughItsEnvironment(t *testing.T) {
	cases := []struct {
		name   string
		server func(testing.TB, fakemodel.Script) *fakemodel.Server
		env    func(*fakemodel.Server) []string
		check  func(*testing.T, fakemodel.Request)
	}{
		{"openai", fakemodel.NewOpenAI, func(s *fakemodel.Server) []string {
			return []string{"OPENAI_API_KEY=sk-env", "OPENAI_BASE_URL=" + s.BaseURL, "OPENAI_ORG_ID=org-env", "OPENAI_PROJECT_ID=proj-env"}
		}, func(t *testing.T, r fakemodel.Request) {
			if r.Key != "sk-env" || r.Header.Get("OpenAI-Organization") != "org-env" || r.Header.Get("OpenAI-Project") != "proj-env" {
				t.Errorf("headers = %v", r.Header)
			}
		}},
		{"anthropic", fakemodel.NewAnthropic, func(s *fakemodel.Server) []string {
			return []string{"ANTHROPIC_API_KEY=sk-ant-env", "ANTHROPIC_BASE_URL=" + s.BaseURL}
		}, func(t *testing.T, r fakemodel.Request) {
			if r.Header.Get("X-Api-Key") != "sk-ant-env" || r.Header.Get("Anthropic-Version") == "" {
				t.Errorf("headers = %v", r.Header)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := c.server(t, func(int, fakemodel.Request) fakemodel.Reply {
				return fakemodel.Reply{Text: []string{"from ", c.name}}
			})
			p := startBinary(t, baseEnv(append(c.env(srv), "BUZZ_AGENT_MODEL=m-env")...), "--state-dir", t.TempDir())
			p.initialize()
			sid := p.newSession(nil)
			if res := p.prompt(sid, "hi"); res.StopReason != "end_turn" || p.agentText(sid) != "from "+c.name {
				t.Fatalf("result %+v, text %q; stderr:\n%s", res, p.agentText(sid), p.stderr.String())
			}
			if !strings.Contains(p.stderr.String(), "provider "+c.name) {
				t.Errorf("stderr = %q", p.stderr.String())
			}
			req := srv.Requests()[0]
			if req.Model != "m-env" || req.LastUser().Text != "hi" {
				t.Errorf("request = %+v", req)
			}
			c.check(t, req)
		})
	}
}
