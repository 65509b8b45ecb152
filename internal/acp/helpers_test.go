package acp

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"sync"
	"testing"
)

// funcHandler adapts functions to Handler; nil functions mean "method not found" / ignore.
type funcHandler struct {
	req   func(ctx context.Context, method string, params json.RawMessage) (any, error)
	notif func(method string, params json.RawMessage)
}

func (h funcHandler) HandleRequest(ctx context.Context, method string, params json.RawMessage) (any, error) {
	if h.req == nil {
		return nil, MethodNotFound(method)
	}
	return h.req(ctx, method, params)
}

func (h funcHandler) HandleNotification(method string, params json.RawMessage) {
	if h.notif != nil {
		h.notif(method, params)
	}
}

// wirePair connects a Client to an in-memory agent Conn over io.Pipes. close tears both down.
func wirePair(cfg ClientConfig, agent Handler) (c *Client, a *Conn, closeAll func()) {
	agentIn, clientOut := io.Pipe()
	clientIn, agentOut := io.Pipe()
	a = NewConn(agentIn, agentOut, agent, nil)
	c = NewClient(clientIn, clientOut, cfg)
	return c, a, func() {
		c.Close()
		a.Close()
		<-c.conn.notifDone
		<-a.notifDone
		a.serving.Wait()
	}
}

// rawAgent gives a test the agent end as raw lines, for exact control over wire order.
type rawAgent struct {
	t  testing.TB
	in *bufio.Reader
	w  *io.PipeWriter
	r  *io.PipeReader
}

func rawPair(t testing.TB, cfg ClientConfig) (*Client, *rawAgent, func()) {
	agentIn, clientOut := io.Pipe()
	clientIn, agentOut := io.Pipe()
	c := NewClient(clientIn, clientOut, cfg)
	ra := &rawAgent{t: t, in: bufio.NewReader(agentIn), w: agentOut, r: agentIn}
	return c, ra, func() {
		c.Close()
		agentOut.Close()
		agentIn.Close()
		<-c.conn.notifDone
	}
}

// readMsg reads the next line the client wrote and decodes it as a generic object.
func (ra *rawAgent) readMsg() map[string]json.RawMessage {
	ra.t.Helper()
	line, err := ra.in.ReadBytes('\n')
	if err != nil {
		ra.t.Fatalf("agent read: %v", err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(line, &m); err != nil {
		ra.t.Fatalf("agent got bad line %q: %v", line, err)
	}
	return m
}

func (ra *rawAgent) send(line string) {
	ra.t.Helper()
	if _, err := ra.w.Write([]byte(line + "\n")); err != nil {
		ra.t.Fatalf("agent write: %v", err)
	}
}

// lineLog collects wire lines safely.
type lineLog struct {
	mu    sync.Mutex
	lines []Line
}

func (l *lineLog) add(x Line) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, Line{Dir: x.Dir, Time: x.Time, Data: append([]byte(nil), x.Data...)})
}

func (l *lineLog) snapshot() []Line {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Line(nil), l.lines...)
}

// updateLog collects session updates and lets a test wait for the nth one.
type updateLog struct {
	mu      sync.Mutex
	updates []SessionUpdate
	changed chan struct{}
}

func newUpdateLog() *updateLog { return &updateLog{changed: make(chan struct{}, 1)} }

func (u *updateLog) add(x SessionUpdate) {
	u.mu.Lock()
	u.updates = append(u.updates, x)
	u.mu.Unlock()
	select {
	case u.changed <- struct{}{}:
	default:
	}
}

func (u *updateLog) snapshot() []SessionUpdate {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]SessionUpdate(nil), u.updates...)
}

func (u *updateLog) waitFor(t testing.TB, ctx context.Context, n int) []SessionUpdate {
	t.Helper()
	for {
		if s := u.snapshot(); len(s) >= n {
			return s
		}
		select {
		case <-u.changed:
		case <-ctx.Done():
			t.Fatalf("waiting for %d updates: %v (have %d)", n, ctx.Err(), len(u.snapshot()))
		}
	}
}

func decodeObj(t testing.TB, raw []byte) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("decode %q: %v", raw, err)
	}
	return m
}
