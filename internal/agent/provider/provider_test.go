package provider_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/buzz-harness/buzz/internal/agent/provider"
	"github.com/buzz-harness/buzz/internal/fakemodel"
)

// fake pairs a fake server constructor with the provider that talks to it.
type fake struct {
	name   string
	server func(testing.TB, fakemodel.Script) *fakemodel.Server
	client func(s *fakemodel.Server, key string) provider.Provider
}

var fakes = []fake{
	{"openai", fakemodel.NewOpenAI, func(s *fakemodel.Server, key string) provider.Provider {
		return provider.NewOpenAI(provider.OpenAIConfig{APIKey: key, BaseURL: s.BaseURL, Model: "gpt-test"})
	}},
	{"anthropic", fakemodel.NewAnthropic, func(s *fakemodel.Server, key string) provider.Provider {
		return provider.NewAnthropic(provider.AnthropicConfig{APIKey: key, BaseURL: s.BaseURL, Model: "claude-test"})
	}},
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestProviderStreamsTextWithSystemPromptAndUsage(t *testing.T) {
	for _, f := range fakes {
		t.Run(f.name, func(t *testing.T) {
			srv := f.server(t, func(n int, r fakemodel.Request) fakemodel.Reply {
				return fakemodel.Reply{Text: []string{"hel", "lo"}, InputTokens: 11, OutputTokens: 2}
			})
			p := f.client(srv, "sk-good")
			var deltas []string
			resp, err := p.Complete(ctxT(t), provider.Request{
				System:   "[Base]\nbe brief",
				Messages: []provider.Message{{Role: provider.RoleUser, Text: "hi"}},
			}, func(d string) { deltas = append(deltas, d) })
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(deltas, "|"); got != "hel|lo" {
				t.Errorf("deltas = %q, want hel|lo", got)
			}
			if resp.Message.Text != "hello" || resp.StopReason != provider.StopEndTurn {
				t.Errorf("resp = %+v", resp)
			}
			if resp.Usage != (provider.Usage{InputTokens: 11, OutputTokens: 2}) {
				t.Errorf("usage = %+v", resp.Usage)
			}
			req := srv.Requests()[0]
			if req.System != "[Base]\nbe brief" || req.Key != "sk-good" || req.Last().Text != "hi" {
				t.Errorf("request = %+v", req)
			}
		})
	}
}

func TestProviderReturnsToolCallsAndSendsResultsBack(t *testing.T) {
	for _, f := range fakes {
		t.Run(f.name, func(t *testing.T) {
			srv := f.server(t, func(n int, r fakemodel.Request) fakemodel.Reply {
				if r.Last().Role == "tool" {
					return fakemodel.Reply{Text: []string{"done: " + r.Last().Text}}
				}
				return fakemodel.Reply{Calls: []fakemodel.Call{{ID: "call_a", Name: "shell", Args: `{"command":"echo hi"}`}}}
			})
			p := f.client(srv, "k")
			tools := []provider.Tool{{Name: "shell", Description: "run", Schema: map[string]any{"type": "object", "properties": map[string]any{"command": map[string]any{"type": "string"}}, "required": []string{"command"}}}}
			hist := []provider.Message{{Role: provider.RoleUser, Text: "run it"}}
			resp, err := p.Complete(ctxT(t), provider.Request{Messages: hist, Tools: tools}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StopReason != provider.StopToolUse || len(resp.Message.ToolCalls) != 1 {
				t.Fatalf("resp = %+v", resp)
			}
			c := resp.Message.ToolCalls[0]
			var in struct{ Command string }
			if c.ID != "call_a" || c.Name != "shell" || json.Unmarshal(c.Input, &in) != nil || in.Command != "echo hi" {
				t.Fatalf("call = %+v (%s)", c, c.Input)
			}
			hist = append(hist, resp.Message, provider.Message{Role: provider.RoleTool, ToolCallID: "call_a", ToolName: "shell", Text: "hi\n[exit code: 0]"})
			resp, err = p.Complete(ctxT(t), provider.Request{Messages: hist, Tools: tools}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Message.Text != "done: hi\n[exit code: 0]" {
				t.Errorf("second answer = %q", resp.Message.Text)
			}
			second := srv.Requests()[1]
			if got := second.Tools; len(got) != 1 || got[0] != "shell" {
				t.Errorf("tools offered = %v", got)
			}
			if n := len(second.Messages); n != 3 || second.Messages[1].ToolCalls[0] != "shell" || second.Messages[2].ToolCallID != "call_a" {
				t.Errorf("history sent = %+v", second.Messages)
			}
		})
	}
}

func TestRetryingRetries429AndServerErrorsThenSucceeds(t *testing.T) {
	for _, f := range fakes {
		t.Run(f.name, func(t *testing.T) {
			srv := f.server(t, func(n int, r fakemodel.Request) fakemodel.Reply {
				switch n {
				case 0:
					return fakemodel.Reply{Status: 429, ErrorMessage: "slow down", RetryAfter: "3"}
				case 1:
					return fakemodel.Reply{Status: 503, ErrorMessage: "overloaded"}
				}
				return fakemodel.Reply{Text: []string{"ok"}}
			})
			var slept []time.Duration
			p := &provider.Retrying{
				Provider:  f.client(srv, "k"),
				BaseDelay: time.Second,
				Sleep:     func(_ context.Context, d time.Duration) error { slept = append(slept, d); return nil },
			}
			resp, err := p.Complete(ctxT(t), provider.Request{Messages: []provider.Message{{Role: "user", Text: "x"}}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Message.Text != "ok" || len(srv.Requests()) != 3 {
				t.Fatalf("resp %+v after %d requests", resp, len(srv.Requests()))
			}
			// Retry-After (3 s) beats the 1 s base; then the doubled base (2 s).
			if len(slept) != 2 || slept[0] != 3*time.Second || slept[1] != 2*time.Second {
				t.Errorf("backoff = %v, want [3s 2s]", slept)
			}
		})
	}
}

func TestRetryingGivesUpAfterAttempts(t *testing.T) {
	srv := fakemodel.NewOpenAI(t, func(n int, r fakemodel.Request) fakemodel.Reply {
		return fakemodel.Reply{Status: 500, ErrorMessage: "boom"}
	})
	p := &provider.Retrying{
		Provider: provider.NewOpenAI(provider.OpenAIConfig{APIKey: "k", BaseURL: srv.BaseURL}),
		Attempts: 3,
		Sleep:    func(context.Context, time.Duration) error { return nil },
	}
	_, err := p.Complete(ctxT(t), provider.Request{Messages: []provider.Message{{Role: "user", Text: "x"}}}, nil)
	var ae *provider.APIError
	if !errors.As(err, &ae) || ae.Status != 500 || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("err = %v", err)
	}
	if n := len(srv.Requests()); n != 3 {
		t.Errorf("requests = %d, want 3", n)
	}
}

func TestBadKeyIsAClearErrorWithoutRetry(t *testing.T) {
	for _, f := range fakes {
		t.Run(f.name, func(t *testing.T) {
			srv := f.server(t, func(n int, r fakemodel.Request) fakemodel.Reply {
				return fakemodel.Reply{Status: 401, ErrorMessage: "invalid api key"}
			})
			p := &provider.Retrying{Provider: f.client(srv, "sk-bad"), Sleep: func(context.Context, time.Duration) error {
				t.Error("a 401 must not be retried")
				return nil
			}}
			_, err := p.Complete(ctxT(t), provider.Request{Messages: []provider.Message{{Role: "user", Text: "x"}}}, nil)
			if err == nil {
				t.Fatal("no error for a bad key")
			}
			msg := err.Error()
			for _, want := range []string{f.name, "401", "invalid api key", "check the API key"} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q lacks %q", msg, want)
				}
			}
		})
	}
}

func TestCancelMidStreamReturnsPromptly(t *testing.T) {
	for _, f := range fakes {
		t.Run(f.name, func(t *testing.T) {
			srv := f.server(t, func(n int, r fakemodel.Request) fakemodel.Reply {
				return fakemodel.Reply{Text: []string{"partial"}, Hang: true}
			})
			p := f.client(srv, "k")
			ctx, cancel := context.WithCancel(ctxT(t))
			got := make(chan string, 1)
			done := make(chan error, 1)
			go func() {
				_, err := p.Complete(ctx, provider.Request{Messages: []provider.Message{{Role: "user", Text: "x"}}}, func(d string) { got <- d })
				done <- err
			}()
			if d := <-got; d != "partial" {
				t.Fatalf("first delta %q", d)
			}
			cancel()
			select {
			case err := <-done:
				if !errors.Is(err, context.Canceled) {
					t.Errorf("err = %v, want context.Canceled", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Complete did not return after cancel")
			}
		})
	}
}
