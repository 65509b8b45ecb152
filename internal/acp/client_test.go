package acp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/buzz-harness/buzz/internal/leakcheck"
)

func TestInitializeSendsVersion1AndConservativeCapabilities(t *testing.T) {
	c, ra, done := rawPair(t, ClientConfig{ClientVersion: "1.2.3"})
	defer done()
	errc := make(chan error, 1)
	go func() { _, err := c.Initialize(testCtx(t)); errc <- err }()
	m := ra.readMsg()
	if str(m["method"]) != "initialize" || string(m["id"]) != "0" {
		t.Fatalf("first request %s id %s", m["method"], m["id"])
	}
	want := `{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":false,"writeTextFile":false},"terminal":false},"clientInfo":{"name":"buzz-acp","version":"1.2.3"}}`
	if string(m["params"]) != want {
		t.Fatalf("params\n got %s\nwant %s", m["params"], want)
	}
	ra.send(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}`)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

func TestInitializeParsesCapabilitiesLeniently(t *testing.T) {
	cases := []struct {
		name, result string
		check        func(t *testing.T, r *InitializeResult)
	}{{
		name: "claude-like with unknown fields and odd auth methods",
		result: `{"protocolVersion":1,"agentInfo":{"name":"@agentclientprotocol/claude-agent-acp","title":"Claude Agent","version":"0.101.0"},
			"agentCapabilities":{"loadSession":true,"promptCapabilities":{"image":true,"embeddedContext":true},
			"sessionCapabilities":{"resume":{},"systemPrompt":{"mode":{"override":{}}},"fork":null},"_meta":{"claudeCode":{"promptQueueing":true}}},
			"authMethods":[{"id":"a","name":"A"},{"type":"env_var","vars":[{"name":"K"}]},7],"_meta":{"steering":{"supported":true}},"brandNew":[1]}`,
		check: func(t *testing.T, r *InitializeResult) {
			if r.AgentName != "@agentclientprotocol/claude-agent-acp" || r.AgentVersion != "0.101.0" || r.ProtocolVersion != 1 || !r.LoadSession {
				t.Fatalf("%+v", r)
			}
			if !r.HasSessionCapability("resume") || !r.HasSessionCapability("systemPrompt") || r.HasSessionCapability("fork") || r.HasSessionCapability("list") {
				t.Fatalf("session capabilities %v", r.SessionCapabilities)
			}
			if string(r.SessionCapabilities["systemPrompt"]) != `{"mode":{"override":{}}}` || string(r.PromptCapabilities["image"]) != "true" {
				t.Fatalf("raw capability maps lost data: %v %v", r.SessionCapabilities, r.PromptCapabilities)
			}
			if len(r.AuthMethods) != 3 || string(r.Meta["steering"]) != `{"supported":true}` {
				t.Fatalf("auth %s meta %v", r.AuthMethods, r.Meta)
			}
		},
	}, {
		name:   "old agent with serverInfo, string version, auth methods not a list",
		result: `{"protocolVersion":"1","serverInfo":{"name":"goose","version":"1.2"},"agentCapabilities":{"loadSession":"yes"},"authMethods":{"x":1}}`,
		check: func(t *testing.T, r *InitializeResult) {
			if r.AgentName != "goose" || r.LoadSession || r.AuthMethods != nil || r.HasSessionCapability("resume") {
				t.Fatalf("%+v", r)
			}
		},
	}, {
		name:   "MCP transports: http taken, sse not",
		result: `{"agentCapabilities":{"mcpCapabilities":{"http":true,"sse":false}}}`,
		check: func(t *testing.T, r *InitializeResult) {
			if !r.McpCapability("http") || r.McpCapability("sse") || r.McpCapability("stdio") {
				t.Fatalf("mcp capabilities of %s", r.AgentCapabilities)
			}
		},
	}, {
		name:   "bare minimum",
		result: `{}`,
		check: func(t *testing.T, r *InitializeResult) {
			if r.AgentName != "" || r.ProtocolVersion != 0 || r.McpCapability("http") {
				t.Fatalf("%+v", r)
			}
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := parseInitializeResult(json.RawMessage(tc.result))
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, r)
		})
	}
	if _, err := parseInitializeResult(json.RawMessage(`[]`)); err == nil {
		t.Fatal("a non-object initialize result was accepted")
	}
}

func TestNewSessionSendsAbsoluteCwdMcpServersAsStdioEntriesAndOmitsEmptyMeta(t *testing.T) {
	c, ra, done := rawPair(t, ClientConfig{})
	defer done()
	wd, _ := os.Getwd()
	cases := []struct {
		p    SessionParams
		want string
	}{
		{SessionParams{Cwd: "sub"}, fmt.Sprintf(`{"cwd":%q,"mcpServers":[]}`, filepath.Join(wd, "sub"))},
		{SessionParams{Cwd: "/w", Meta: map[string]any{}}, `{"cwd":"/w","mcpServers":[]}`},
		{SessionParams{Cwd: "/w", SystemPrompt: &SystemPrompt{Mode: "append", Content: []ContentBlock{TextBlock("be brief")}}, Meta: map[string]any{"channelId": "c1"}},
			`{"cwd":"/w","mcpServers":[],"systemPrompt":{"mode":"append","content":[{"type":"text","text":"be brief"}]},"_meta":{"channelId":"c1"}}`},
		// A stdio MCP server: args and env are always present, env as {name,value} pairs.
		{SessionParams{Cwd: "/w", McpServers: []McpServer{
			{Name: "buzz-mcp", Command: "/bin/buzz-mcp", Env: []EnvVariable{{Name: "BUZZ_RELAY_URL", Value: "ws://r"}}},
			{Name: "files", Command: "files", Args: []string{"-v"}},
		}}, `{"cwd":"/w","mcpServers":[{"name":"buzz-mcp","command":"/bin/buzz-mcp","args":[],"env":[{"name":"BUZZ_RELAY_URL","value":"ws://r"}]},{"name":"files","command":"files","args":["-v"],"env":[]}]}`},
		// An HTTP MCP server: ACP's {type:"http", name, url, headers}.
		{SessionParams{Cwd: "/w", McpServers: []McpServer{
			{Name: "buzz-mcp", URL: "http://127.0.0.1:1/buzz-mcp", Headers: []EnvVariable{{Name: "Authorization", Value: "Bearer s"}}},
		}}, `{"cwd":"/w","mcpServers":[{"type":"http","name":"buzz-mcp","url":"http://127.0.0.1:1/buzz-mcp","headers":[{"name":"Authorization","value":"Bearer s"}]}]}`},
	}
	for i, tc := range cases {
		got := make(chan string, 1)
		go func() {
			id, _, err := c.NewSessionState(testCtx(t), tc.p)
			got <- fmt.Sprint(id, err)
		}()
		m := ra.readMsg()
		if str(m["method"]) != "session/new" || string(m["params"]) != tc.want {
			t.Fatalf("case %d: %s params\n got %s\nwant %s", i, m["method"], m["params"], tc.want)
		}
		ra.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"sessionId":"s%d","modes":{"x":1}}}`, m["id"], i))
		if g := <-got; g != fmt.Sprintf("s%d<nil>", i) {
			t.Fatalf("case %d: %s", i, g)
		}
	}
}

func TestNewSessionFailsWithoutSessionID(t *testing.T) {
	c, _, done := wirePair(ClientConfig{}, funcHandler{req: func(context.Context, string, json.RawMessage) (any, error) {
		return map[string]any{"sessionId": 5}, nil
	}})
	defer done()
	if _, _, err := c.NewSessionState(testCtx(t), SessionParams{Cwd: "/"}); err == nil || !strings.Contains(err.Error(), "no sessionId") {
		t.Fatalf("got %v", err)
	}
}

func TestLoadSessionMarksUpdatesReplayedBeforeItsAnswer(t *testing.T) {
	updates := newUpdateLog()
	c, ra, done := rawPair(t, ClientConfig{OnUpdate: updates.add})
	defer done()
	ctx := testCtx(t)
	errc := make(chan error, 1)
	go func() {
		_, err := c.LoadSessionState(ctx, SessionParams{Cwd: "/w", SessionID: "S"})
		errc <- err
	}()
	m := ra.readMsg()
	if str(m["method"]) != "session/load" || string(m["params"]) != `{"sessionId":"S","cwd":"/w","mcpServers":[]}` {
		t.Fatalf("load request %s %s", m["method"], m["params"])
	}
	upd := func(sid, text string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":%q,"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":%q}}}}`, sid, text)
	}
	ra.send(upd("S", "old 1"))
	ra.send(upd("T", "other session"))
	ra.send(upd("S", "old 2"))
	ra.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":null}`, m["id"]))
	ra.send(upd("S", "live"))
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	// The barrier: everything replayed is delivered by the time LoadSessionState returns.
	if n := len(updates.snapshot()); n < 3 {
		t.Fatalf("only %d updates delivered when LoadSessionState returned", n)
	}
	var got []string
	for _, u := range updates.waitFor(t, ctx, 4) {
		got = append(got, fmt.Sprintf("%s/%s/%v", u.SessionID, u.Text, u.Replay))
	}
	want := "S/old 1/true T/other session/false S/old 2/true S/live/false"
	if strings.Join(got, " ") != want {
		t.Fatalf("got  %s\nwant %s", strings.Join(got, " "), want)
	}
}

func TestResumeSessionSendsSessionIDAndDoesNotMarkReplay(t *testing.T) {
	updates := newUpdateLog()
	c, ra, done := rawPair(t, ClientConfig{OnUpdate: updates.add})
	defer done()
	errc := make(chan error, 1)
	go func() {
		_, err := c.ResumeSessionState(testCtx(t), SessionParams{Cwd: "/w", SessionID: "S", SystemPrompt: &SystemPrompt{Mode: "append", Content: []ContentBlock{TextBlock("p")}}})
		errc <- err
	}()
	m := ra.readMsg()
	if str(m["method"]) != "session/resume" || string(m["params"]) != `{"sessionId":"S","cwd":"/w","mcpServers":[],"systemPrompt":{"mode":"append","content":[{"type":"text","text":"p"}]}}` {
		t.Fatalf("resume request %s %s", m["method"], m["params"])
	}
	ra.send(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"available_commands_update"}}}`)
	ra.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{}}`, m["id"]))
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if u := updates.snapshot(); len(u) != 1 || u[0].Replay {
		t.Fatalf("updates %+v", u)
	}
	if _, err := c.ResumeSessionState(testCtx(t), SessionParams{Cwd: "/w"}); err == nil {
		t.Fatal("resume without a session id was sent")
	}
}

func TestPromptSendsTextBlocksAndLowercasesStopReason(t *testing.T) {
	c, ra, done := rawPair(t, ClientConfig{})
	defer done()
	type out struct {
		r   *PromptResult
		err error
	}
	got := make(chan out, 1)
	go func() {
		r, err := c.Prompt(testCtx(t), "S", []ContentBlock{TextBlock("[Context]"), TextBlock("[Buzz event: x]")}, PromptOptions{})
		got <- out{r, err}
	}()
	m := ra.readMsg()
	if str(m["method"]) != "session/prompt" || string(m["params"]) != `{"sessionId":"S","prompt":[{"type":"text","text":"[Context]"},{"type":"text","text":"[Buzz event: x]"}]}` {
		t.Fatalf("prompt request %s %s", m["method"], m["params"])
	}
	ra.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"stopReason":"End_Turn","usage":{"totalTokens":5},"_meta":{"quota":{}}}}`, m["id"]))
	o := <-got
	if o.err != nil || o.r.StopReason != "end_turn" || string(o.r.Usage) != `{"totalTokens":5}` {
		t.Fatalf("%+v %v", o.r, o.err)
	}
}

func TestPermissionIsChosenByKindNeverByPosition(t *testing.T) {
	opts := []PermissionOption{
		{OptionID: "r1", Name: "Allow", Kind: KindRejectOnce}, // a misleading label on purpose
		{OptionID: "aa", Name: "Reject", Kind: KindAllowAlways},
		{OptionID: "a1", Name: "Yes", Kind: KindAllowOnce},
		{OptionID: "ra", Name: "Never", Kind: KindRejectAlways},
	}
	cases := []struct {
		policy PermissionPolicy
		opts   []PermissionOption
		want   string
	}{
		{PermissionAllow, opts, "a1"},
		{PermissionAllow, opts[:2], "aa"},
		{PermissionAllow, opts[3:], "ra"}, // nothing to allow: the only answer left
		{PermissionDeny, opts, "r1"},
		{PermissionDeny, opts[1:], "ra"},
		{PermissionDeny, opts[1:3], ""},
		{PermissionAllow, nil, ""},
	}
	for i, tc := range cases {
		if got := pickOption(tc.opts, tc.policy); got != tc.want {
			t.Errorf("case %d (%s): picked %q, want %q", i, tc.policy, got, tc.want)
		}
	}
	// On the wire: default policy answers "selected" with the allow_once id; no fit = cancelled.
	for _, tc := range []struct {
		cfg  ClientConfig
		opts []PermissionOption
		want string
	}{
		{ClientConfig{}, opts, `{"outcome":{"outcome":"selected","optionId":"a1"}}`},
		{ClientConfig{Permissions: PermissionDeny}, opts, `{"outcome":{"outcome":"selected","optionId":"r1"}}`},
		{ClientConfig{Permissions: PermissionDeny}, opts[1:3], `{"outcome":{"outcome":"cancelled"}}`},
	} {
		_, a, done := wirePair(tc.cfg, nil)
		var res json.RawMessage
		if err := a.Call(testCtx(t), "session/request_permission", PermissionRequest{SessionID: "S", ToolCall: json.RawMessage(`{"toolCallId":"t"}`), Options: tc.opts}, &res); err != nil {
			t.Fatal(err)
		}
		done()
		if string(res) != tc.want {
			t.Errorf("%s: answered %s, want %s", tc.cfg.Permissions, res, tc.want)
		}
	}
}

// promptAgent is an in-memory agent whose session/prompt behaviour is a function.
func promptAgent(agent **Conn, cancels chan<- string, prompt func(ctx context.Context, a *Conn, cancelled <-chan struct{}) (any, error)) Handler {
	var mu sync.Mutex
	cancelCh := map[string]chan struct{}{}
	get := func(sid string) chan struct{} {
		mu.Lock()
		defer mu.Unlock()
		if cancelCh[sid] == nil {
			cancelCh[sid] = make(chan struct{})
		}
		return cancelCh[sid]
	}
	return funcHandler{
		req: func(ctx context.Context, method string, params json.RawMessage) (any, error) {
			if method != "session/prompt" {
				return nil, MethodNotFound(method)
			}
			return prompt(ctx, *agent, get(str(object(params)["sessionId"])))
		},
		notif: func(method string, params json.RawMessage) {
			if method == "session/cancel" {
				sid := str(object(params)["sessionId"])
				if cancels != nil {
					cancels <- sid
				}
				close(get(sid))
			}
		},
	}
}

func TestPromptCancelAnswersPendingPermissionCancelledBeforeSendingCancel(t *testing.T) {
	lines := &lineLog{}
	pending := make(chan struct{})
	var agent *Conn
	permAnswer := make(chan string, 1)
	c, a, done := wirePair(ClientConfig{
		OnLine: lines.add,
		PermissionFunc: func(ctx context.Context, req PermissionRequest) (string, error) {
			close(pending) // a human (or observer) is deciding…
			<-ctx.Done()
			return "", ctx.Err()
		},
	}, promptAgent(&agent, nil, func(ctx context.Context, a *Conn, cancelled <-chan struct{}) (any, error) {
		var res json.RawMessage
		err := a.Call(ctx, "session/request_permission", PermissionRequest{SessionID: "S", Options: []PermissionOption{{OptionID: "y", Kind: KindAllowOnce}}}, &res)
		permAnswer <- fmt.Sprint(string(res), err)
		<-cancelled
		return PromptResponse{StopReason: "cancelled"}, nil
	}))
	agent = a
	defer done()
	ctx, cancel := context.WithCancel(testCtx(t))
	go func() { <-pending; cancel() }()
	res, err := c.Prompt(ctx, "S", []ContentBlock{TextBlock("hi")}, PromptOptions{CancelGrace: 10 * time.Second})
	if err != nil || res.StopReason != "cancelled" {
		t.Fatalf("%+v %v", res, err)
	}
	if got := <-permAnswer; got != `{"outcome":{"outcome":"cancelled"}}<nil>` {
		t.Fatalf("permission answered %s", got)
	}
	var order []string
	for _, l := range lines.snapshot() {
		if l.Dir != DirSend {
			continue
		}
		m := decodeObj(t, l.Data)
		if m["method"] != nil {
			order = append(order, str(m["method"]))
		} else {
			order = append(order, "answer "+string(m["result"]))
		}
	}
	want := `session/prompt; answer {"outcome":{"outcome":"cancelled"}}; session/cancel`
	if strings.Join(order, "; ") != want {
		t.Fatalf("sent\n %s\nwant\n %s", strings.Join(order, "; "), want)
	}
}

func TestPromptAnswersPermissionCancelledWhileCancelIsUnderway(t *testing.T) {
	var agent *Conn
	permAnswer := make(chan string, 1)
	c, a, done := wirePair(ClientConfig{}, promptAgent(&agent, nil, func(ctx context.Context, a *Conn, cancelled <-chan struct{}) (any, error) {
		<-cancelled
		// Asking after the cancel arrived must not be auto-allowed.
		var res json.RawMessage
		err := a.Call(ctx, "session/request_permission", PermissionRequest{SessionID: "S", Options: []PermissionOption{{OptionID: "y", Kind: KindAllowOnce}}}, &res)
		permAnswer <- fmt.Sprint(string(res), err)
		return PromptResponse{StopReason: "cancelled"}, nil
	}))
	agent = a
	defer done()
	ctx, cancel := context.WithCancel(testCtx(t))
	cancel()
	if res, err := c.Prompt(ctx, "S", nil, PromptOptions{}); err != nil || res.StopReason != "cancelled" {
		t.Fatalf("%+v %v", res, err)
	}
	if got := <-permAnswer; got != `{"outcome":{"outcome":"cancelled"}}<nil>` {
		t.Fatalf("permission answered %s", got)
	}
}

func TestPromptIdleTimeoutIsResetByAgentOutput(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var agent *Conn
		cancels := make(chan string, 1)
		c, a, done := wirePair(ClientConfig{}, promptAgent(&agent, cancels, func(ctx context.Context, a *Conn, cancelled <-chan struct{}) (any, error) {
			for i := range 3 { // output at 5s, 10s, 15s, then silence
				time.Sleep(5 * time.Second)
				_ = SendUpdate(a, "S", TextChunk(UpdateAgentThoughtChunk, fmt.Sprint(i)))
			}
			<-cancelled
			return PromptResponse{StopReason: "cancelled"}, nil
		}))
		agent = a
		defer done()
		start := time.Now()
		_, err := c.Prompt(context.Background(), "S", nil, PromptOptions{IdleTimeout: 8 * time.Second, HardTimeout: time.Hour})
		if !errors.Is(err, ErrIdleTimeout) {
			t.Fatalf("got %v, want ErrIdleTimeout", err)
		}
		if el := time.Since(start); el != 23*time.Second {
			t.Fatalf("idle expiry after %s, want 23s (last output at 15s + 8s)", el)
		}
		if sid := <-cancels; sid != "S" {
			t.Fatalf("cancel sent for %q", sid)
		}
	})
}

func TestPromptHardTimeoutFiresEvenWhileAgentIsChatty(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var agent *Conn
		cancels := make(chan string, 1)
		c, a, done := wirePair(ClientConfig{}, promptAgent(&agent, cancels, func(ctx context.Context, a *Conn, cancelled <-chan struct{}) (any, error) {
			for {
				select {
				case <-cancelled:
					return PromptResponse{StopReason: "cancelled"}, nil
				case <-time.After(time.Second):
					_ = SendUpdate(a, "S", TextChunk(UpdateAgentMessageChunk, "."))
				}
			}
		}))
		agent = a
		defer done()
		start := time.Now()
		_, err := c.Prompt(context.Background(), "S", nil, PromptOptions{IdleTimeout: 5 * time.Second, HardTimeout: 30 * time.Second})
		if !errors.Is(err, ErrHardTimeout) {
			t.Fatalf("got %v, want ErrHardTimeout", err)
		}
		if el := time.Since(start); el != 30*time.Second {
			t.Fatalf("hard expiry after %s, want 30s", el)
		}
		<-cancels
	})
}

func TestPromptCancelTimesOutWhenAgentIgnoresCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var agent *Conn
		cancels := make(chan string, 1)
		c, a, done := wirePair(ClientConfig{}, promptAgent(&agent, cancels, func(ctx context.Context, a *Conn, cancelled <-chan struct{}) (any, error) {
			<-ctx.Done() // only the connection closing ends this
			return nil, ctx.Err()
		}))
		agent = a
		defer done()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start := time.Now()
		_, err := c.Prompt(ctx, "S", nil, PromptOptions{CancelGrace: 3 * time.Second})
		if !errors.Is(err, ErrCancelTimeout) {
			t.Fatalf("got %v, want ErrCancelTimeout", err)
		}
		if el := time.Since(start); el != 4*time.Second {
			t.Fatalf("gave up after %s, want 1s + 3s grace", el)
		}
		<-cancels
	})
}

// An agent that answers neither the prompt nor its cancel: Prompt gives up after the grace,
// and by then has stopped waiting for the call's answer.
func TestPromptGivenUpOnReturnsOnlyOnceItsCallHasStopped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, ra, done := rawPair(t, ClientConfig{})
		defer done()
		go io.Copy(io.Discard, ra.in) // the agent reads everything and answers nothing
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := c.Prompt(ctx, "S", nil, PromptOptions{CancelGrace: time.Second}); !errors.Is(err, ErrCancelTimeout) {
			t.Fatalf("got %v, want ErrCancelTimeout", err)
		}
		if left := leakcheck.Running("github.com/buzz-harness/buzz/internal/acp.(*Client).Prompt"); len(left) > 0 {
			t.Fatalf("Prompt returned while its call still ran:\n%s", strings.Join(left, "\n\n"))
		}
	})
}

func TestIdleTimeoutStillReportedWhenCancelIsIgnored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var agent *Conn
		c, a, done := wirePair(ClientConfig{}, promptAgent(&agent, nil, func(ctx context.Context, a *Conn, cancelled <-chan struct{}) (any, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}))
		agent = a
		defer done()
		start := time.Now()
		_, err := c.Prompt(context.Background(), "S", nil, PromptOptions{IdleTimeout: 10 * time.Second, CancelGrace: 2 * time.Second})
		if !errors.Is(err, ErrIdleTimeout) || !strings.Contains(err.Error(), "did not answer") {
			t.Fatalf("got %v", err)
		}
		if el := time.Since(start); el != 12*time.Second {
			t.Fatalf("returned after %s, want 10s + 2s grace", el)
		}
	})
}

func TestRequestsTimeOutAfterDefault60Seconds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _, done := wirePair(ClientConfig{}, funcHandler{req: func(ctx context.Context, _ string, _ json.RawMessage) (any, error) {
			<-ctx.Done() // never answers initialize
			return nil, ctx.Err()
		}})
		defer done()
		start := time.Now()
		_, err := c.Initialize(context.Background())
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v", err)
		}
		if el := time.Since(start); el != DefaultRequestTimeout {
			t.Fatalf("timed out after %s", el)
		}
	})
}

func TestPromptReturnsErrAgentExitedWhenAgentDisappears(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var agent *Conn
		c, a, done := wirePair(ClientConfig{}, promptAgent(&agent, nil, func(ctx context.Context, a *Conn, cancelled <-chan struct{}) (any, error) {
			a.Close()
			return nil, errors.New("unreachable")
		}))
		agent = a
		defer done()
		_, err := c.Prompt(context.Background(), "S", nil, PromptOptions{IdleTimeout: time.Minute})
		if !errors.Is(err, ErrAgentExited) {
			t.Fatalf("got %v", err)
		}
	})
}

func TestUnknownUpdateKindsAndNotificationsPassThrough(t *testing.T) {
	updates := newUpdateLog()
	c, ra, done := rawPair(t, ClientConfig{OnUpdate: updates.add})
	defer done()
	odd := `{"sessionId":"S","update":{"sessionUpdate":"_vendor/thing","x":{"deep":[1,2]}},"_meta":{"k":1}}`
	ra.send(`{"jsonrpc":"2.0","method":"_auth/status_update","params":{"authStatus":{"kind":"none"}}}`)
	ra.send(`{"jsonrpc":"2.0","method":"session/update","params":` + odd + `}`)
	ra.send(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"tool_call_update","toolCallId":"t1","title":"Read","status":"completed","content":[{"type":"content"}]}}}`)
	ra.send(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"image","data":"AA=="}}}}`)
	got := updates.waitFor(t, testCtx(t), 3)
	if got[0].Kind != "_vendor/thing" || string(got[0].Raw) != odd {
		t.Fatalf("unknown kind not kept verbatim: %+v", got[0])
	}
	if got[1].ToolCallID != "t1" || got[1].Title != "Read" || got[1].Status != "completed" || got[1].Text != "" {
		t.Fatalf("tool call update %+v", got[1])
	}
	if got[2].Kind != UpdateAgentMessageChunk || got[2].Text != "" {
		t.Fatalf("image chunk %+v", got[2])
	}
	_ = c
}

func FuzzParseSessionUpdate(f *testing.F) {
	f.Add([]byte(`{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}`))
	f.Add([]byte(`{"sessionId":1,"update":[]}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		u := ParseSessionUpdate(data)
		if string(u.Raw) != string(data) {
			t.Fatal("raw params not preserved")
		}
	})
}

func FuzzParseInitializeResult(f *testing.F) {
	f.Add([]byte(`{"protocolVersion":1,"agentInfo":{"name":"a","version":"1"},"agentCapabilities":{"loadSession":true,"sessionCapabilities":{"resume":{}}},"authMethods":[]}`))
	f.Add([]byte(`{"agentCapabilities":7}`))
	f.Add([]byte(`"x"`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := parseInitializeResult(data)
		if err == nil && string(r.Raw) != string(data) {
			t.Fatal("raw result not preserved")
		}
	})
}
