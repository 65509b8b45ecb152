package acp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/buzz-harness/buzz/internal/leakcheck"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestConnRecordsReceivedLineBeforeParsingIt(t *testing.T) {
	var mu sync.Mutex
	var events []string
	logf := func(s string) { mu.Lock(); events = append(events, s); mu.Unlock() }
	handled := make(chan struct{})
	pr, pw := io.Pipe()
	c := NewConn(pr, io.Discard, funcHandler{notif: func(method string, _ json.RawMessage) {
		logf("handled " + method)
		close(handled)
	}}, func(l Line) {
		if l.Dir == DirRecv {
			logf("line " + string(l.Data))
		}
	})
	defer c.Close()
	note := `{"jsonrpc":"2.0","method":"_x/ping","params":{}}`
	go pw.Write([]byte("not json at all\r\n" + note + "\n"))
	<-handled
	mu.Lock()
	got := strings.Join(events, " | ")
	mu.Unlock()
	want := "line not json at all | line " + note + " | handled _x/ping"
	if got != want {
		t.Fatalf("events:\n got %s\nwant %s", got, want)
	}
	if c.BadLines() != 1 {
		t.Fatalf("BadLines = %d, want 1", c.BadLines())
	}
}

func TestConnAcceptsLineLongerThan10MiB(t *testing.T) {
	big := strings.Repeat("y", 11<<20)
	got := make(chan int, 1)
	pr, pw := io.Pipe()
	c := NewConn(pr, io.Discard, funcHandler{notif: func(_ string, params json.RawMessage) {
		got <- len(params) - len(`{"text":""}`)
	}}, nil)
	defer c.Close()
	go pw.Write([]byte(`{"jsonrpc":"2.0","method":"big","params":{"text":"` + big + `"}}` + "\n"))
	select {
	case n := <-got:
		if n != len(big) {
			t.Fatalf("text length %d, want %d", n, len(big))
		}
	case <-testCtx(t).Done():
		t.Fatal("big line never delivered")
	}
}

func TestConnKeepsSeparateIDSpacesPerDirection(t *testing.T) {
	lines := &lineLog{}
	var agent *Conn
	c, a, done := wirePair(ClientConfig{OnLine: lines.add}, funcHandler{req: func(ctx context.Context, method string, _ json.RawMessage) (any, error) {
		// While the client's initialize (its id 0) is pending, ask something with our own id 0.
		var res PermissionResponse
		err := agent.Call(ctx, "session/request_permission", PermissionRequest{SessionID: "s", Options: []PermissionOption{{OptionID: "ok", Kind: KindAllowOnce}}}, &res)
		if err != nil {
			return nil, err
		}
		return map[string]any{"protocolVersion": 1, "agentInfo": map[string]string{"name": "got-" + res.Outcome.OptionID, "version": "1"}}, nil
	}})
	agent = a
	defer done()
	res, err := c.Initialize(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if res.AgentName != "got-ok" {
		t.Fatalf("agent name %q: the agent's own id-0 request was not answered correctly", res.AgentName)
	}
	var seq []string
	for _, l := range lines.snapshot() {
		m := decodeObj(t, l.Data)
		kind := "answer"
		if m["method"] != nil {
			kind = str(m["method"])
		}
		seq = append(seq, fmt.Sprintf("%s id=%s %s", l.Dir, m["id"], kind))
	}
	want := []string{"send id=0 initialize", "recv id=0 session/request_permission", "send id=0 answer", "recv id=0 answer"}
	if strings.Join(seq, "; ") != strings.Join(want, "; ") {
		t.Fatalf("wire:\n got %q\nwant %q", seq, want)
	}
}

func TestConnAnswersUnknownInboundRequestsWithMethodNotFound(t *testing.T) {
	_, a, done := wirePair(ClientConfig{}, nil)
	defer done()
	for _, method := range []string{"_vendor/whatever", "fs/read_text_file", "terminal/create"} {
		err := a.Call(testCtx(t), method, map[string]any{}, nil)
		var re *RPCError
		if !errors.As(err, &re) || re.Code != CodeMethodNotFound {
			t.Fatalf("%s: got %v, want -32601", method, err)
		}
	}
}

func TestConnReturnsPeerErrorAsRPCError(t *testing.T) {
	c, _, done := wirePair(ClientConfig{}, funcHandler{req: func(context.Context, string, json.RawMessage) (any, error) {
		return nil, NewRPCError(CodeResourceNotFound, "Resource not found", map[string]string{"sessionId": "nope"})
	}})
	defer done()
	_, err := c.LoadSessionState(testCtx(t), SessionParams{Cwd: "/", SessionID: "nope"})
	var re *RPCError
	if !errors.As(err, &re) || re.Code != CodeResourceNotFound || string(re.Data) != `{"sessionId":"nope"}` {
		t.Fatalf("got %v", err)
	}
}

func TestConnHandlesNotificationsInOrderBeforeCallReturns(t *testing.T) {
	var got []int
	var agent *Conn
	var mu sync.Mutex
	c, a, done := wirePair(ClientConfig{OnUpdate: func(u SessionUpdate) {
		var n int
		fmt.Sscan(u.Text, &n)
		mu.Lock()
		got = append(got, n)
		mu.Unlock()
	}}, funcHandler{req: func(ctx context.Context, method string, _ json.RawMessage) (any, error) {
		for i := range 200 {
			_ = SendUpdate(agent, "s", TextChunk(UpdateAgentMessageChunk, fmt.Sprint(i)))
		}
		return PromptResponse{StopReason: "end_turn"}, nil
	}})
	agent = a
	defer done()
	if _, err := c.Prompt(testCtx(t), "s", []ContentBlock{TextBlock("go")}, PromptOptions{}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 200 {
		t.Fatalf("only %d of 200 updates delivered when Prompt returned", len(got))
	}
	for i, n := range got {
		if n != i {
			t.Fatalf("update %d carried %d: out of order", i, n)
		}
	}
}

func TestConnServesInboundRequestsConcurrently(t *testing.T) {
	release := make(chan struct{})
	_, a, done := wirePair(ClientConfig{PermissionFunc: func(ctx context.Context, req PermissionRequest) (string, error) {
		if req.SessionID == "first" {
			select { // only the second request can release the first
			case <-release:
			case <-ctx.Done():
			}
		} else {
			close(release)
		}
		return req.Options[0].OptionID, nil
	}}, nil)
	defer done()
	ctx := testCtx(t)
	errs := make(chan error, 2)
	for _, sid := range []string{"first", "second"} {
		go func() {
			var res PermissionResponse
			errs <- a.Call(ctx, "session/request_permission", PermissionRequest{SessionID: sid, Options: []PermissionOption{{OptionID: "x", Kind: KindAllowOnce}}}, &res)
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

func TestConnFailsPendingCallWhenPeerGoes(t *testing.T) {
	arrived := make(chan struct{})
	c, a, done := wirePair(ClientConfig{}, funcHandler{req: func(ctx context.Context, _ string, _ json.RawMessage) (any, error) {
		close(arrived)
		<-ctx.Done()
		return nil, ctx.Err()
	}})
	defer done()
	errc := make(chan error, 1)
	go func() { _, err := c.Initialize(testCtx(t)); errc <- err }()
	<-arrived
	a.Close()
	err := <-errc
	if !errors.Is(err, ErrAgentExited) || !errors.Is(err, ErrConnClosed) {
		t.Fatalf("got %v, want ErrAgentExited", err)
	}
}

// stalledWriter is a Conn writing to a peer that reads nothing: the first line it writes blocks
// in Write. sent receives each line as it is recorded, just before it is written.
func stalledWriter(t *testing.T) (c *Conn, peer *io.PipeReader, sent chan string) {
	t.Helper()
	peer, w := io.Pipe()
	in, _ := io.Pipe()
	sent = make(chan string, 8)
	c = NewConn(in, w, nil, func(l Line) {
		if l.Dir == DirSend {
			sent <- string(l.Data)
		}
	})
	t.Cleanup(func() { c.Close() })
	return c, peer, sent
}

const writeLoopFunc = "github.com/buzz-harness/buzz/internal/acp.(*Conn).writeLoop"

func TestConnCloseReturnsOnlyOnceItsWriterHasStopped(t *testing.T) {
	c, _, sent := stalledWriter(t)
	notified := make(chan error, 1)
	go func() { notified <- c.Notify("_x/stuck", nil) }()
	<-sent // the writer holds the line and is blocked writing it
	if n := len(leakcheck.Running(writeLoopFunc)); n != 1 {
		t.Fatalf("%d writer goroutines before Close, want 1", n)
	}
	c.Close() // closing the pipe ends the blocked write
	if left := leakcheck.Running(writeLoopFunc); len(left) > 0 {
		t.Fatalf("Close returned while its writer still ran:\n%s", strings.Join(left, "\n\n"))
	}
	if err := <-notified; err == nil {
		t.Fatal("Notify of a line the peer never read returned nil")
	}
}

func TestConnCallerWhoseContextEndsIsReleasedWhileItsLineStillGoesOutWhole(t *testing.T) {
	c, peer, sent := stalledWriter(t)
	ctx, cancel := context.WithCancel(context.Background())
	called := make(chan error, 1)
	go func() { called <- c.Call(ctx, "_x/slow", map[string]string{"k": "v"}, nil) }()
	line := <-sent
	cancel()
	if err := <-called; !errors.Is(err, context.Canceled) {
		t.Fatalf("Call whose context ended while its line was being written returned %v, want context.Canceled", err)
	}
	got, err := bufio.NewReader(peer).ReadString('\n')
	if err != nil || got != line+"\n" {
		t.Fatalf("the peer read %q (%v), want the whole line %q", got, err, line+"\n")
	}
}

func TestDecodeMessageClassifiesByIDAndMethod(t *testing.T) {
	cases := []struct {
		line string
		kind msgKind
		bad  bool
	}{
		{`{"jsonrpc":"2.0","id":0,"method":"m"}`, kindRequest, false},
		{`{"jsonrpc":"2.0","id":"abc","method":"m","params":{}}`, kindRequest, false},
		{`{"jsonrpc":"2.0","method":"m"}`, kindNotification, false},
		{`{"jsonrpc":"2.0","id":null,"method":"m"}`, kindNotification, false},
		{`{"jsonrpc":"2.0","id":7,"result":null}`, kindResponse, false},
		{`{"jsonrpc":"2.0","id":"7","error":{"code":-1,"message":"x"}}`, kindResponse, false},
		{`{"jsonrpc":"2.0","id":7,"error":"weird"}`, kindResponse, false},
		{`{"jsonrpc":"2.0","id":"x7","result":{}}`, 0, true},
		{`{"jsonrpc":"2.0"}`, 0, true},
		{`[1,2]`, 0, true},
		{`{"method":""}`, 0, true},
	}
	for _, tc := range cases {
		m, err := decodeMessage([]byte(tc.line))
		if tc.bad {
			if err == nil {
				t.Errorf("%s: accepted as kind %d", tc.line, m.kind)
			}
			continue
		}
		if err != nil || m.kind != tc.kind {
			t.Errorf("%s: got %v/%v, want kind %d", tc.line, m, err, tc.kind)
		}
	}
	m, _ := decodeMessage([]byte(`{"jsonrpc":"2.0","id":7,"error":"weird"}`))
	if m.err == nil || m.err.Code != CodeInternal {
		t.Fatalf("malformed error object not surfaced as an error: %+v", m.err)
	}
}

func FuzzDecodeMessage(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`,
		`{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}`,
		`{"jsonrpc":"2.0","id":"3","error":{"code":-32601,"message":"nope","data":{"method":"x"}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk"}}}`,
		`garbage`, ``, `null`, `{"id":{}}`, `{"id":1e99}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := decodeMessage(data)
		if err != nil {
			return
		}
		switch m.kind {
		case kindRequest:
			if m.method == "" || len(m.id) == 0 {
				t.Fatalf("request without method or id: %+v", m)
			}
		case kindNotification:
			if m.method == "" {
				t.Fatal("notification without method")
			}
		case kindResponse:
			if m.method != "" {
				t.Fatal("response with a method")
			}
		default:
			t.Fatalf("unknown kind %d", m.kind)
		}
	})
}

// FuzzConnLineReader feeds arbitrary bytes to a Conn: it must never panic, record every line
// exactly once and in order, and answer or skip whatever it cannot use.
func FuzzConnLineReader(f *testing.F) {
	f.Add([]byte("{\"jsonrpc\":\"2.0\",\"method\":\"a\"}\n\n{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"b\"}\r\nnot json\n"))
	f.Add([]byte("no newline at end"))
	f.Add([]byte("\n\n\n"))
	f.Add([]byte(`{"jsonrpc":"2.0","id":0,"result":{}}` + "\n" + `{"id":0,"method":"x","params":[1]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var got [][]byte
		c := NewConn(bytes.NewReader(data), io.Discard, funcHandler{}, func(l Line) {
			if l.Dir == DirRecv {
				got = append(got, append([]byte(nil), l.Data...))
			}
		})
		c.Wait()
		c.Close()
		<-c.notifDone
		var want [][]byte
		rest := data
		for len(rest) > 0 {
			i := bytes.IndexByte(rest, '\n')
			var line []byte
			if i < 0 {
				line, rest = rest, nil
			} else {
				line, rest = rest[:i], rest[i+1:]
			}
			want = append(want, bytes.TrimSuffix(line, []byte("\r")))
		}
		if len(got) != len(want) {
			t.Fatalf("recorded %d lines, want %d", len(got), len(want))
		}
		for i := range want {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("line %d: got %q want %q", i, got[i], want[i])
			}
		}
		if !errors.Is(c.Err(), io.EOF) {
			t.Fatalf("Err = %v, want EOF", c.Err())
		}
	})
}
