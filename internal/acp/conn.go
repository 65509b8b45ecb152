// Package acp implements the Agent Client Protocol (JSON-RPC 2.0, one JSON object per line over
// stdio) for both sides: a symmetric Conn, a harness-side Client that drives an agent process, and
// small helpers for writing an agent.
//
// It is hand-written rather than built on an SDK because the harness needs the raw wire lines as
// the record (stamped before parsing), no line-length cap, unknown fields and update kinds kept
// verbatim, and `_meta`/unstable fields the SDKs lag behind on.
package acp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Direction says which way a wire line travelled, seen from this end of the connection.
type Direction string

const (
	DirSend Direction = "send" // we wrote it
	DirRecv Direction = "recv" // we read it
)

// Line is one raw wire line. Data excludes the trailing newline and must not be modified.
type Line struct {
	Dir  Direction
	Time time.Time
	Data []byte
}

// JSON-RPC and ACP error codes.
const (
	CodeParseError       = -32700
	CodeInvalidRequest   = -32600
	CodeMethodNotFound   = -32601
	CodeInvalidParams    = -32602
	CodeInternal         = -32603
	CodeAuthRequired     = -32000
	CodeResourceNotFound = -32002
)

// RPCError is a JSON-RPC error object, returned by Call when the peer answered with an error and
// returned by handlers to answer with one.
type RPCError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *RPCError) Error() string {
	if len(e.Data) > 0 {
		return fmt.Sprintf("acp: rpc error %d: %s (data: %s)", e.Code, e.Message, e.Data)
	}
	return fmt.Sprintf("acp: rpc error %d: %s", e.Code, e.Message)
}

// NewRPCError builds an error with an optional data payload (marshalled; dropped if it fails).
func NewRPCError(code int, message string, data any) *RPCError {
	e := &RPCError{Code: code, Message: message}
	if data != nil {
		if b, err := json.Marshal(data); err == nil {
			e.Data = b
		}
	}
	return e
}

// MethodNotFound is the standard answer to a request for a method this side does not implement.
func MethodNotFound(method string) *RPCError {
	return NewRPCError(CodeMethodNotFound, "Method not found", map[string]string{"method": method})
}

// Handler serves the peer's requests and notifications.
type Handler interface {
	// HandleRequest runs on its own goroutine (requests are served concurrently). Return an
	// *RPCError for protocol errors; any other error becomes -32603. A nil result is sent as {}.
	// ctx is cancelled when the connection closes.
	HandleRequest(ctx context.Context, method string, params json.RawMessage) (any, error)
	// HandleNotification is called in wire order from a single goroutine. It must not wait for
	// the answer of a Call on the same Conn (calls wait until earlier notifications were handled).
	HandleNotification(method string, params json.RawMessage)
}

// ErrConnClosed is returned by Call/Notify once the connection has ended.
var ErrConnClosed = errors.New("acp: connection closed")

// writeTimeout bounds writes that carry no caller context (notifications, responses) so a peer
// that stopped reading cannot wedge us forever.
const writeTimeout = 30 * time.Second

// taggingHandler is implemented by the Client: it sees messages on the reader goroutine, in wire
// order, so it can classify notifications (e.g. replay during session/load) exactly.
type taggingHandler interface {
	Handler
	tagNotification(method string, params json.RawMessage) any
	handleTaggedNotification(method string, params json.RawMessage, tag any)
	responseRead(id int64)
}

type response struct {
	result json.RawMessage
	err    *RPCError
	marker chan struct{} // closed once every notification read before this response was handled
}

type queued struct {
	method string
	params json.RawMessage
	tag    any
	marker chan struct{} // barrier item: no notification, just close it
}

// Conn is a symmetric JSON-RPC 2.0 peer over a newline-delimited stream.
type Conn struct {
	r      io.Reader
	w      io.Writer
	h      Handler
	th     taggingHandler
	onLine func(Line)

	ctx     context.Context // cancelled on Close or end of input; given to request handlers
	cancel  context.CancelFunc
	closing chan struct{}  // closed by Close: no more writes
	serving sync.WaitGroup // request handlers still running or answering

	writes     chan writeReq // to the writer goroutine; unbuffered, so a send waits its turn
	writerDone chan struct{} // closed when the writer goroutine has returned
	nextID     atomic.Int64
	lastRec    atomic.Pointer[time.Time] // when the last line was received (keeps the monotonic clock)

	mu      sync.Mutex
	pending map[int64]chan response
	closed  bool

	qmu       sync.Mutex
	q         []queued
	qsig      chan struct{}
	qreadDone bool
	notifDone chan struct{}

	done      chan struct{}
	err       error
	closeOnce sync.Once
	badLines  atomic.Int64
}

// NewConn starts reading r at once. onLine (optional) sees every raw line in both directions:
// received lines before they are parsed, sent lines just before they are written.
func NewConn(r io.Reader, w io.Writer, h Handler, onLine func(Line)) *Conn {
	ctx, cancel := context.WithCancel(context.Background())
	c := &Conn{
		r: r, w: w, h: h, onLine: onLine,
		ctx: ctx, cancel: cancel, closing: make(chan struct{}),
		writes:     make(chan writeReq),
		writerDone: make(chan struct{}),
		pending:    map[int64]chan response{},
		qsig:       make(chan struct{}, 1),
		notifDone:  make(chan struct{}),
		done:       make(chan struct{}),
	}
	if th, ok := h.(taggingHandler); ok {
		c.th = th
	}
	go c.readLoop()
	go c.notifyLoop()
	go func() {
		defer close(c.writerDone)
		c.writeLoop()
	}()
	return c
}

// Done is closed when the input ended (peer exit, Close, read error).
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err is why the connection ended (io.EOF for a clean end of input); nil while it is running.
func (c *Conn) Err() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}

// Wait blocks until the input has ended and every request being served has been answered (an
// agent calls it before exiting so in-flight answers still go out after the client's EOF).
func (c *Conn) Wait() {
	<-c.done
	c.serving.Wait()
}

// LastActivity is when the last line was received (zero if none yet).
func (c *Conn) LastActivity() time.Time {
	if t := c.lastRec.Load(); t != nil {
		return *t
	}
	return time.Time{}
}

// BadLines counts received lines that were not valid JSON-RPC messages (they are still recorded).
func (c *Conn) BadLines() int64 { return c.badLines.Load() }

// Close stops the connection: closes the writer and the reader if they are io.Closers, and
// returns once the writer goroutine has (a write blocked on a peer that stopped reading ends when
// its writer is closed; one that is not an io.Closer must not block forever). Call it once done
// with the Conn, also after the input ended: the writer waits for lines until then.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		c.mu.Unlock()
		close(c.closing)
		c.cancel()
		if wc, ok := c.w.(io.Closer); ok {
			_ = wc.Close()
		}
		if rc, ok := c.r.(io.Closer); ok {
			_ = rc.Close()
		}
		<-c.writerDone
	})
	return nil
}

func (c *Conn) closedErr() error {
	select {
	case <-c.done:
		if c.err != nil && !errors.Is(c.err, io.EOF) {
			return fmt.Errorf("%w: %v", ErrConnClosed, c.err)
		}
	default:
	}
	return ErrConnClosed
}

func (c *Conn) readLoop() {
	br := bufio.NewReaderSize(c.r, 64<<10)
	var err error
	for {
		// ReadBytes grows as needed: no line-length cap (tool output and images can be huge).
		var line []byte
		line, err = br.ReadBytes('\n')
		if len(line) > 0 {
			c.handleLine(line)
		}
		if err != nil {
			break
		}
	}
	c.mu.Lock()
	c.closed = true // no new calls; callers already waiting watch c.done
	c.mu.Unlock()
	c.err = err
	c.cancel()
	close(c.done)
	c.qmu.Lock()
	c.qreadDone = true
	c.qmu.Unlock()
	c.signalQueue()
}

func trimEOL(b []byte) []byte {
	b = bytes.TrimSuffix(b, []byte("\n"))
	return bytes.TrimSuffix(b, []byte("\r"))
}

func (c *Conn) handleLine(raw []byte) {
	data := trimEOL(raw)
	now := time.Now()
	c.lastRec.Store(&now)
	if c.onLine != nil {
		c.onLine(Line{Dir: DirRecv, Time: now, Data: data})
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return
	}
	m, err := decodeMessage(data)
	if err != nil {
		c.badLines.Add(1)
		return
	}
	switch m.kind {
	case kindResponse:
		if c.th != nil {
			c.th.responseRead(m.respID)
		}
		c.mu.Lock()
		ch := c.pending[m.respID]
		delete(c.pending, m.respID)
		c.mu.Unlock()
		if ch == nil {
			return // late answer to a call that gave up, or an id we never used
		}
		marker := make(chan struct{})
		c.enqueue(queued{marker: marker})
		ch <- response{result: m.result, err: m.err, marker: marker}
	case kindRequest:
		c.serving.Add(1)
		go c.serve(m)
	case kindNotification:
		var tag any
		if c.th != nil {
			tag = c.th.tagNotification(m.method, m.params)
		}
		c.enqueue(queued{method: m.method, params: m.params, tag: tag})
	}
}

func (c *Conn) enqueue(q queued) {
	c.qmu.Lock()
	c.q = append(c.q, q)
	c.qmu.Unlock()
	c.signalQueue()
}

func (c *Conn) signalQueue() {
	select {
	case c.qsig <- struct{}{}:
	default:
	}
}

// notifyLoop delivers notifications in order on one goroutine. The queue is unbounded so a slow
// handler never stalls the reader (and so never the answers to our calls).
func (c *Conn) notifyLoop() {
	defer close(c.notifDone)
	for {
		c.qmu.Lock()
		for len(c.q) == 0 {
			if c.qreadDone {
				c.qmu.Unlock()
				return
			}
			c.qmu.Unlock()
			<-c.qsig
			c.qmu.Lock()
		}
		item := c.q[0]
		c.q[0] = queued{}
		c.q = c.q[1:]
		c.qmu.Unlock()
		switch {
		case item.marker != nil:
			close(item.marker)
		case c.th != nil:
			c.th.handleTaggedNotification(item.method, item.params, item.tag)
		case c.h != nil:
			c.h.HandleNotification(item.method, item.params)
		}
	}
}

// writtenHook lets a request handler learn when its answer has been written (the Client needs
// "permission answered" to precede "session/cancel" on the wire).
type writtenHook struct{ fn func() }

type writtenKey struct{}

func onAnswerWritten(ctx context.Context, fn func()) bool {
	h, ok := ctx.Value(writtenKey{}).(*writtenHook)
	if ok {
		h.fn = fn
	}
	return ok
}

func (c *Conn) serve(m *message) {
	defer c.serving.Done()
	hook := &writtenHook{}
	defer func() {
		if hook.fn != nil {
			hook.fn()
		}
	}()
	var res any
	var err error
	if c.h == nil {
		err = MethodNotFound(m.method)
	} else {
		res, err = c.h.HandleRequest(context.WithValue(c.ctx, writtenKey{}, hook), m.method, m.params)
	}
	out := outResponse{JSONRPC: "2.0", ID: m.id}
	if err != nil {
		var re *RPCError
		if !errors.As(err, &re) {
			re = &RPCError{Code: CodeInternal, Message: err.Error()}
		}
		out.Error = re
	} else {
		b, merr := json.Marshal(res)
		switch {
		case merr != nil:
			out.Error = &RPCError{Code: CodeInternal, Message: "marshal result: " + merr.Error()}
		case res == nil:
			out.Result = json.RawMessage("{}")
		default:
			out.Result = b
		}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	_ = c.writeLine(ctx, b)
}

// writeReq is one line for the writer goroutine; done is buffered so the writer never waits for
// a caller that gave up.
type writeReq struct {
	data []byte
	done chan error
}

// maxKeptWriteBuf is the largest line buffer the writer keeps for the next line; a bigger one
// (an image, a huge tool output) is dropped after use rather than held for the Conn's life.
const maxKeptWriteBuf = 1 << 20

// writeLoop is the only goroutine that writes to w: one line at a time, each recorded just
// before it is written, in the order they were handed over. It ends on Close.
func (c *Conn) writeLoop() {
	var buf []byte
	for {
		var req writeReq
		select {
		case req = <-c.writes:
		case <-c.closing:
			return
		}
		if c.onLine != nil {
			c.onLine(Line{Dir: DirSend, Time: time.Now(), Data: req.data})
		}
		buf = append(append(buf[:0], req.data...), '\n')
		_, err := c.w.Write(buf)
		if cap(buf) > maxKeptWriteBuf {
			buf = nil
		}
		req.done <- err
	}
}

// writeLine hands one line to the writer goroutine and waits for it to be written. A caller
// whose context ends is released, while a line already handed over still goes out whole.
func (c *Conn) writeLine(ctx context.Context, data []byte) error {
	req := writeReq{data: data, done: make(chan error, 1)}
	select {
	case c.writes <- req:
	case <-ctx.Done():
		return ctx.Err()
	case <-c.closing:
		return c.closedErr()
	}
	select {
	case err := <-req.done:
		if err != nil {
			return fmt.Errorf("acp: write: %w", err)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

type outRequest struct {
	JSONRPC string `json:"jsonrpc"`
	ID      *int64 `json:"id,omitempty"`
	Method  string `json:"method"`
	Params  any    `json:"params,omitempty"`
}

type outResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *RPCError       `json:"error,omitempty"`
}

func (c *Conn) reserveID() int64 { return c.nextID.Add(1) - 1 }

// Call sends a request and waits for its answer, decoding the result into result (if non-nil).
// Ids count from 0 in our own id space. A peer error comes back as *RPCError. When Call returns,
// every notification the peer sent before its answer has been handled.
func (c *Conn) Call(ctx context.Context, method string, params, result any) error {
	return c.call(ctx, c.reserveID(), method, params, result)
}

func (c *Conn) call(ctx context.Context, id int64, method string, params, result any) error {
	b, err := json.Marshal(outRequest{JSONRPC: "2.0", ID: &id, Method: method, Params: params})
	if err != nil {
		return fmt.Errorf("acp: marshal %s params: %w", method, err)
	}
	ch := make(chan response, 1)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return c.closedErr()
	}
	c.pending[id] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
	}()
	if err := c.writeLine(ctx, b); err != nil {
		return fmt.Errorf("acp: %s: %w", method, err)
	}
	var r response
	select {
	case r = <-ch:
	case <-ctx.Done():
		return fmt.Errorf("acp: %s: %w", method, ctx.Err())
	case <-c.done:
		select {
		case r = <-ch: // the answer was the last thing read
		default:
			return fmt.Errorf("acp: %s: %w", method, c.closedErr())
		}
	}
	select {
	case <-r.marker:
	case <-ctx.Done():
		return fmt.Errorf("acp: %s: %w", method, ctx.Err())
	}
	if r.err != nil {
		return r.err
	}
	if result != nil && len(r.result) > 0 {
		if err := json.Unmarshal(r.result, result); err != nil {
			return fmt.Errorf("acp: decode %s result: %w", method, err)
		}
	}
	return nil
}

// Notify sends a notification (no answer expected).
func (c *Conn) Notify(method string, params any) error {
	b, err := json.Marshal(outRequest{JSONRPC: "2.0", Method: method, Params: params})
	if err != nil {
		return fmt.Errorf("acp: marshal %s params: %w", method, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	if err := c.writeLine(ctx, b); err != nil {
		return fmt.Errorf("acp: %s: %w", method, err)
	}
	return nil
}

type msgKind int

const (
	kindRequest msgKind = iota + 1
	kindNotification
	kindResponse
)

type message struct {
	kind   msgKind
	id     json.RawMessage // request id, echoed verbatim
	respID int64           // response id in our id space
	method string
	params json.RawMessage
	result json.RawMessage
	err    *RPCError
}

// decodeMessage classifies one line. Requests carry method+id, notifications method only, and
// responses an id without a method (so a peer request can never be mistaken for an answer).
func decodeMessage(data []byte) (*message, error) {
	var env struct {
		ID     json.RawMessage `json:"id"`
		Method *string         `json:"method"`
		Params json.RawMessage `json:"params"`
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(data, &env); err != nil {
		return nil, fmt.Errorf("acp: not a JSON object: %w", err)
	}
	hasID := len(env.ID) > 0 && string(env.ID) != "null"
	if env.Method != nil {
		if *env.Method == "" {
			return nil, errors.New("acp: empty method")
		}
		m := &message{method: *env.Method, params: env.Params}
		if hasID {
			m.kind, m.id = kindRequest, env.ID
		} else {
			m.kind = kindNotification
		}
		return m, nil
	}
	if !hasID {
		return nil, errors.New("acp: message has neither method nor id")
	}
	id, err := parseID(env.ID)
	if err != nil {
		return nil, err
	}
	m := &message{kind: kindResponse, respID: id, result: env.Result}
	if len(env.Error) > 0 && string(env.Error) != "null" {
		var re RPCError
		if err := json.Unmarshal(env.Error, &re); err != nil {
			// Keep a malformed error visible rather than treating it as success.
			re = RPCError{Code: CodeInternal, Message: "malformed error object: " + string(env.Error)}
		}
		m.err = &re
	}
	return m, nil
}

// parseID accepts a number or a numeric string (some peers stringify ids).
func parseID(raw json.RawMessage) (int64, error) {
	s := string(raw)
	if len(s) > 1 && s[0] == '"' {
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, fmt.Errorf("acp: bad id %s", raw)
		}
	}
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("acp: response id %s is not one of ours", raw)
	}
	return id, nil
}
