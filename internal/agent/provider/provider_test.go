package provider_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
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

func TestStreamErrorBeforeAnyTextIsRetried(t *testing.T) {
	for _, f := range fakes {
		t.Run(f.name, func(t *testing.T) {
			srv := f.server(t, func(n int, r fakemodel.Request) fakemodel.Reply {
				if n == 0 {
					return fakemodel.Reply{StreamError: "Overloaded"}
				}
				return fakemodel.Reply{Text: []string{"ok"}}
			})
			var slept []time.Duration
			p := &provider.Retrying{Provider: f.client(srv, "k"), Sleep: func(_ context.Context, d time.Duration) error {
				slept = append(slept, d)
				return nil
			}}
			resp, err := p.Complete(ctxT(t), provider.Request{Messages: []provider.Message{{Role: "user", Text: "x"}}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Message.Text != "ok" || len(srv.Requests()) != 2 || len(slept) != 1 {
				t.Errorf("resp %+v after %d requests and backoffs %v", resp, len(srv.Requests()), slept)
			}
		})
	}
}

func TestStreamErrorAfterTextIsReportedNotRetried(t *testing.T) {
	for _, f := range fakes {
		t.Run(f.name, func(t *testing.T) {
			srv := f.server(t, func(n int, r fakemodel.Request) fakemodel.Reply {
				return fakemodel.Reply{Text: []string{"half an"}, StreamError: "Overloaded"}
			})
			p := &provider.Retrying{Provider: f.client(srv, "k"), Sleep: func(context.Context, time.Duration) error {
				t.Error("text already streamed must not be streamed again")
				return nil
			}}
			var got string
			_, err := p.Complete(ctxT(t), provider.Request{Messages: []provider.Message{{Role: "user", Text: "x"}}}, func(d string) { got += d })
			var ae *provider.APIError
			if !errors.As(err, &ae) || !ae.Streamed || ae.Status < 500 {
				t.Fatalf("err = %#v", err)
			}
			if want := f.name + ": error in the response stream: Overloaded"; err.Error() != want {
				t.Errorf("error %q, want %q", err, want)
			}
			if got != "half an" || len(srv.Requests()) != 1 {
				t.Errorf("streamed %q in %d requests", got, len(srv.Requests()))
			}
		})
	}
}

func TestStreamCutOffBeforeTheEndIsAnError(t *testing.T) {
	for _, f := range fakes {
		t.Run(f.name, func(t *testing.T) {
			srv := f.server(t, func(n int, r fakemodel.Request) fakemodel.Reply {
				return fakemodel.Reply{Text: []string{"half"}, Truncate: true}
			})
			_, err := f.client(srv, "k").Complete(ctxT(t), provider.Request{Messages: []provider.Message{{Role: "user", Text: "x"}}}, nil)
			if want := f.name + ": the response stream ended before the answer was complete"; err == nil || err.Error() != want {
				t.Errorf("err = %v, want %q", err, want)
			}
		})
	}
}

func TestOpenAISendsKeyOrganizationAndProjectHeaders(t *testing.T) {
	srv := fakemodel.NewOpenAI(t, func(int, fakemodel.Request) fakemodel.Reply { return fakemodel.Reply{Text: []string{"ok"}} })
	p := provider.NewOpenAI(provider.OpenAIConfig{APIKey: "sk-1", BaseURL: srv.BaseURL + "/", Organization: "org-1", Project: "proj-1"})
	if _, err := p.Complete(ctxT(t), provider.Request{Messages: []provider.Message{{Role: "user", Text: "x"}}}, nil); err != nil {
		t.Fatal(err)
	}
	req := srv.Requests()[0]
	h := req.Header
	if h.Get("Authorization") != "Bearer sk-1" || h.Get("OpenAI-Organization") != "org-1" || h.Get("OpenAI-Project") != "proj-1" {
		t.Errorf("headers = %v", h)
	}
	if req.Path != "/v1/chat/completions" || req.Model != provider.DefaultOpenAIModel || !req.Stream {
		t.Errorf("request = %s %q stream=%v", req.Path, req.Model, req.Stream)
	}
}

func TestOpenAIWithoutAKeySendsNoAuthorization(t *testing.T) {
	srv := fakemodel.NewOpenAI(t, func(int, fakemodel.Request) fakemodel.Reply { return fakemodel.Reply{Text: []string{"ok"}} })
	p := provider.NewOpenAI(provider.OpenAIConfig{BaseURL: srv.BaseURL})
	if _, err := p.Complete(ctxT(t), provider.Request{Messages: []provider.Message{{Role: "user", Text: "x"}}}, nil); err != nil {
		t.Fatal(err)
	}
	if h := srv.Requests()[0].Header; h.Get("Authorization") != "" {
		t.Errorf("Authorization = %q for a keyless local server", h.Get("Authorization"))
	}
}

func TestAnthropicSendsKeyAndVersionHeaders(t *testing.T) {
	srv := fakemodel.NewAnthropic(t, func(int, fakemodel.Request) fakemodel.Reply { return fakemodel.Reply{Text: []string{"ok"}} })
	p := provider.NewAnthropic(provider.AnthropicConfig{APIKey: "sk-ant-1", BaseURL: srv.BaseURL + "/", MaxTokens: 77})
	if _, err := p.Complete(ctxT(t), provider.Request{Messages: []provider.Message{{Role: "user", Text: "x"}}}, nil); err != nil {
		t.Fatal(err)
	}
	req := srv.Requests()[0]
	h := req.Header
	if h.Get("X-Api-Key") != "sk-ant-1" || h.Get("Anthropic-Version") != "2023-06-01" || h.Get("Authorization") != "" {
		t.Errorf("headers = %v", h)
	}
	var body struct {
		MaxTokens int `json:"max_tokens"`
	}
	if req.Path != "/v1/messages" || req.Model != provider.DefaultAnthropicModel || json.Unmarshal(req.Body, &body) != nil || body.MaxTokens != 77 {
		t.Errorf("request = %s %s", req.Path, req.Body)
	}
}

func TestBadBaseURLIsAClearError(t *testing.T) {
	for _, p := range []provider.Provider{
		provider.NewOpenAI(provider.OpenAIConfig{BaseURL: "localhost:11434/v1"}),
		provider.NewAnthropic(provider.AnthropicConfig{APIKey: "k", BaseURL: "ftp://example.test"}),
	} {
		_, err := p.Complete(ctxT(t), provider.Request{Messages: []provider.Message{{Role: "user", Text: "x"}}}, nil)
		if err == nil || !strings.HasPrefix(err.Error(), p.Name()+": bad base URL") {
			t.Errorf("%s: err = %v", p.Name(), err)
		}
	}
}

func TestErrorBodiesOfOtherServersBecomeOneLineMessages(t *testing.T) {
	cases := []struct {
		name, body, want string
		status           int
	}{
		{"proxy page", "<html>\n  <body>Bad Gateway</body>\n</html>\n", "openai: HTTP 502: <html> <body>Bad Gateway</body> </html>", 502},
		{"ollama", `{"error":"model \"llama9\" not found, try pulling it first"}`, `openai: HTTP 404: model "llama9" not found, try pulling it first`, 404},
		{"fastapi", `{"detail":"Not Found"}`, "openai: HTTP 404: Not Found", 404},
		{"empty", "", "openai: HTTP 500: no error message", 500},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(c.status)
				_, _ = io.WriteString(w, c.body)
			}))
			defer srv.Close()
			_, err := provider.NewOpenAI(provider.OpenAIConfig{BaseURL: srv.URL}).Complete(ctxT(t), provider.Request{}, nil)
			if err == nil || err.Error() != c.want {
				t.Errorf("err = %v, want %q", err, c.want)
			}
		})
	}
}

func TestRedirectToAnotherHostIsRefusedSoTheKeyStaysHome(t *testing.T) {
	var reached atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached.Add(1) }))
	defer other.Close()
	home := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer home.Close()
	for _, f := range fakes {
		t.Run(f.name, func(t *testing.T) {
			_, err := f.client(&fakemodel.Server{BaseURL: home.URL}, "sk-secret").Complete(ctxT(t), provider.Request{}, nil)
			if err == nil || !strings.Contains(err.Error(), "refusing a redirect") {
				t.Errorf("err = %v", err)
			}
		})
	}
	if n := reached.Load(); n > 0 {
		t.Errorf("the other host got %d requests", n)
	}
}
