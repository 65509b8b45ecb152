package relay

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/relay/store"
)

const (
	pingPeriod = 30 * time.Second
	// drainLimit bounds how much of an oversized frame is read and discarded so the NOTICE
	// reaches the client before the close; beyond it the socket is simply dropped.
	drainLimit = 8 << 20
)

type authState int

const (
	authNone authState = iota
	authOK
	authFailed
)

// outMsg is one queued write; a non-zero close code closes the socket after the writes
// queued before it.
type outMsg struct {
	data      []byte
	budget    int64 // result-budget bytes given back once written (results.go)
	closeCode websocket.StatusCode
	reason    string
}

// conn is one WebSocket client.
type conn struct {
	r         *Relay
	ws        *websocket.Conn
	host      string
	challenge string
	out       chan outMsg
	ctx       context.Context
	cancel    context.CancelFunc

	// queued counts the bytes in out; writes past MaxQueuedBytes wait (history) or drop the
	// client (live). drained wakes a waiting history send after each write.
	queued  atomic.Int64
	drained chan struct{}
	dropped atomic.Bool // dropSlow has dropped it
	// history counts the result-budget bytes of this connection's queued history frames.
	history atomic.Int64

	// fanout carries broadcast events to the writer, which matches them against subs and writes
	// the hits; live counts their bytes, held to MaxQueuedBytes apart from queued (a REQ's
	// history fills that one to the cap by design).
	fanout chan *liveEvent
	live   atomic.Int64

	mu     sync.Mutex // guards authed, state and changes to subs
	authed string
	state  authState
	subs   atomic.Pointer[map[string]*liveSub] // copy-on-write (subs.go)
}

func (r *Relay) serveWS(w http.ResponseWriter, req *http.Request) {
	// Connections per address are bounded before any work is done for one (Config.MaxConnsPerIP).
	ip := remoteIP(req)
	if !r.ipConns.enter(ip) {
		http.Error(w, protocol.ReasonRateLimited.Msgf("more than %d connections from %s", r.cfg.MaxConnsPerIP, ip), http.StatusTooManyRequests)
		return
	}
	defer r.ipConns.leave(ip)
	ws, err := websocket.Accept(w, req, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return // Accept already answered the HTTP request
	}
	ws.SetReadLimit(-1) // we enforce MaxFrameBytes ourselves so the client gets a NOTICE
	var raw [32]byte
	rand.Read(raw[:])
	ctx, cancel := context.WithCancel(context.Background())
	c := &conn{
		r:         r,
		ws:        ws,
		host:      req.Host,
		challenge: hex.EncodeToString(raw[:]),
		out:       make(chan outMsg, sendBuffer),
		ctx:       ctx,
		cancel:    cancel,
		drained:   make(chan struct{}, 1),
		fanout:    make(chan *liveEvent, sendBuffer),
	}
	r.connsMu.Lock()
	if r.closed {
		r.connsMu.Unlock()
		ws.Close(websocket.StatusGoingAway, "relay shutting down")
		cancel()
		return
	}
	r.conns[c] = struct{}{}
	r.handlers.Add(1)
	r.connsMu.Unlock()
	// The connection's goroutines end before the handler does, and the handler before
	// Relay.Close closes the store.
	var loops sync.WaitGroup
	defer func() {
		cancel()
		ws.CloseNow()
		loops.Wait()
		r.connsMu.Lock()
		delete(r.conns, c)
		r.connsMu.Unlock()
		c.mu.Lock()
		c.dropSubs(func(*liveSub) bool { return true }) // give back the pubkey's filter bytes
		c.mu.Unlock()
		c.dropQueued()
		r.handlers.Done()
	}()

	loops.Go(c.writeLoop)
	loops.Go(c.pingLoop)
	c.send([]any{"AUTH", c.challenge})
	if d := r.cfg.AuthTimeout; d > 0 {
		defer time.AfterFunc(d, c.closeUnauthenticated).Stop()
	}
	c.readLoop()
}

// closeUnauthenticated closes a socket that has not proved a key by Config.AuthTimeout (as
// Buzz does): an idle anonymous socket costs memory and a connection slot and can do nothing.
func (c *conn) closeUnauthenticated() {
	if c.pubkey() != "" {
		return
	}
	c.send([]any{"NOTICE", protocol.ReasonAuthRequired.Msgf("no AUTH within %s; closing", c.r.cfg.AuthTimeout)})
	c.closeAfterWrites(websocket.StatusPolicyViolation, "auth timeout")
}

// remoteIP is the client's address without its port (RemoteAddr whole if it has none).
func remoteIP(req *http.Request) string {
	if host, _, err := net.SplitHostPort(req.RemoteAddr); err == nil {
		return host
	}
	return req.RemoteAddr
}

// job is one received frame on its way through the connection's ordered pipeline.
type job struct {
	f        frame
	err      error         // parse error
	verified chan struct{} // closed once checkErr is set (EVENT only)
	checkErr error
}

// readLoop reads frames and queues them in arrival order. An EVENT's id and signature are
// verified in parallel as soon as it is read (the expensive part of ingest), while the
// processor still applies frames strictly in order. Most events do not wait for their commit
// before the next frame is processed (okQueue); the OKs still go out in order.
func (c *conn) readLoop() {
	queue := make(chan *job, 64)
	processed := make(chan struct{})
	go func() {
		defer close(processed)
		oks := newOKQueue(c)
		defer oks.close()
		for j := range queue {
			if j.verified != nil {
				<-j.verified
			}
			if c.ctx.Err() != nil {
				continue // the client is gone: drain without working for it
			}
			if j.err == nil && j.f.Type == "EVENT" && pipelined(j.f.Event) {
				oks.submit(j)
				continue
			}
			oks.drain()
			c.process(j)
		}
	}()
	defer func() {
		// Cancel first: the frame being processed may be a long read, and it must stop now
		// that its client is gone rather than run to completion.
		c.cancel()
		close(queue)
		<-processed
	}()
	for {
		_, rd, err := c.ws.Reader(c.ctx)
		if err != nil {
			return
		}
		data, err := io.ReadAll(io.LimitReader(rd, MaxFrameBytes+1))
		if err != nil {
			return
		}
		if len(data) > MaxFrameBytes {
			c.send([]any{"NOTICE", protocol.ReasonInvalid.Msg("frame exceeds 524288 bytes")})
			if n, _ := io.Copy(io.Discard, io.LimitReader(rd, drainLimit)); n >= drainLimit {
				return
			}
			c.closeAfterWrites(websocket.StatusMessageTooBig, "frame too large")
			<-c.ctx.Done()
			return
		}
		j := &job{}
		j.f, j.err = parseFrame(data)
		if j.err == nil && j.f.Type == "EVENT" {
			j.verified = make(chan struct{})
			go func() {
				j.checkErr = protocol.CheckEvent(j.f.Event)
				close(j.verified)
			}()
		}
		select {
		case queue <- j:
		case <-c.ctx.Done():
			if j.verified != nil {
				<-j.verified // the processor joins the checks of queued jobs; this one is ours
			}
			return
		}
	}
}

func (c *conn) writeLoop() {
	defer c.cancel()
	// One timer for the connection instead of a deadline context per frame (a timer and a
	// cancel registration each, a hundred times per event fanned out to a hundred clients):
	// a frame still not written when it fires closes the socket, which fails the write.
	stalled := time.AfterFunc(time.Hour, func() { c.ws.CloseNow() })
	stalled.Stop()
	defer stalled.Stop()
	write := func(b []byte) error {
		stalled.Reset(c.r.cfg.WriteTimeout)
		err := c.ws.Write(context.Background(), websocket.MessageText, b)
		stalled.Stop()
		return err
	}
	for {
		var err error
		select {
		case <-c.ctx.Done():
			return
		case le := <-c.fanout:
			err = c.deliver(le, write)
			c.live.Add(-le.size())
		case m := <-c.out:
			if m.closeCode != 0 {
				c.ws.Close(m.closeCode, m.reason)
				return
			}
			err = write(m.data)
			c.queued.Add(-int64(len(m.data)))
			c.wrote(m)
			select {
			case c.drained <- struct{}{}:
			default:
			}
		}
		if err != nil {
			return
		}
	}
}

func (c *conn) pingLoop() {
	t := time.NewTicker(pingPeriod)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(c.ctx, 3*pingPeriod)
			err := c.ws.Ping(ctx)
			cancel()
			if err != nil {
				c.cancel()
				c.ws.CloseNow()
				return
			}
		}
	}
}

// send queues a message; a client too slow to drain its buffer is disconnected.
func (c *conn) send(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	c.sendRaw(b)
}

// reserve accounts n more bytes queued in out (reserveOn).
func (c *conn) reserve(n int) bool { return c.reserveOn(&c.queued, n) }

// reserveOn accounts n more bytes on queued (out's, or live's) unless that would pass the cap
// (a lone frame larger than the cap still goes when nothing else is queued).
func (c *conn) reserveOn(queued *atomic.Int64, n int) bool {
	limit := c.r.cfg.MaxQueuedBytes
	for {
		cur := queued.Load()
		next := cur + int64(n)
		if next > limit && cur > 0 {
			return false
		}
		if queued.CompareAndSwap(cur, next) {
			for {
				peak := c.r.peakQueued.Load()
				if next <= peak || c.r.peakQueued.CompareAndSwap(peak, next) {
					return true
				}
			}
		}
	}
}

// sendBacklog queues a stored event, waiting for room: a REQ's history is the client's own
// request, so it gets back-pressure rather than the slow-client disconnect of live fan-out.
// A client that stops reading is dropped by the writer's timeout, which ends the wait. budget
// is the frame's share of the relay's result budget, given back once it is written or dropped.
func (c *conn) sendBacklog(b []byte, budget int64) {
	for !c.reserve(len(b)) {
		select {
		case <-c.drained:
		case <-c.ctx.Done():
			c.r.results.give(budget)
			return
		}
	}
	c.history.Add(budget)
	select {
	case c.out <- outMsg{data: b, budget: budget}:
	case <-c.ctx.Done():
		c.queued.Add(-int64(len(b)))
		c.wrote(outMsg{budget: budget})
	}
}

func (c *conn) sendRaw(b []byte) {
	if !c.reserve(len(b)) {
		c.dropSlow("queued bytes over the cap")
		return
	}
	select {
	case c.out <- outMsg{data: b}:
	case <-c.ctx.Done():
		c.queued.Add(-int64(len(b)))
	default:
		c.queued.Add(-int64(len(b)))
		c.dropSlow("send queue full")
	}
}

func (c *conn) dropSlow(why string) {
	if c.dropped.CompareAndSwap(false, true) { // later sends fail too: count the client once
		c.r.log.Warn("dropping slow websocket client", "host", c.host, "why", why)
		c.r.metrics.backpressure.Inc()
	}
	c.cancel()
	c.ws.CloseNow()
}

func (c *conn) closeAfterWrites(code websocket.StatusCode, reason string) {
	select {
	case c.out <- outMsg{closeCode: code, reason: reason}:
	case <-c.ctx.Done():
	}
}

// shutdown is Relay.Close's way out: a going-away close, without waiting on the client.
func (c *conn) shutdown() {
	c.cancel()
	c.ws.CloseNow()
}

func (c *conn) pubkey() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.authed
}

func (c *conn) process(j *job) {
	if j.err != nil {
		var fe *frameError
		if errors.As(j.err, &fe) && fe.SubID != "" {
			c.send([]any{"CLOSED", fe.SubID, fe.Msg})
		} else {
			c.send([]any{"NOTICE", j.err.Error()})
		}
		return
	}
	f := j.f
	switch f.Type {
	case "AUTH":
		c.handleAuth(f.Event)
	case "EVENT":
		res := c.r.submitChecked(c.ctx, f.Event, j.checkErr, fromWebSocket(c.pubkey()))
		c.send([]any{"OK", f.Event.ID, res.OK, res.Msg})
	case "REQ":
		c.handleReq(f)
	case "COUNT":
		c.handleCount(f)
	case "CLOSE":
		c.dropSub(f.SubID)
	}
}

func (c *conn) handleAuth(ev *nostr.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch c.state {
	case authOK:
		c.send([]any{"OK", ev.ID, false, protocol.ReasonAuthRequired.Msg("already authenticated")})
		return
	case authFailed:
		c.send([]any{"OK", ev.ID, false, protocol.ReasonAuthRequired.Msg("authentication already failed on this connection")})
		return
	}
	urls, err := c.r.selfURLs()
	for _, u := range urls {
		if err = protocol.VerifyAuthEvent(ev, c.challenge, u, c.r.now()); err == nil {
			break
		}
	}
	if err != nil {
		c.state = authFailed
		c.r.log.Debug("auth failed", "host", c.host, "err", err)
		c.send([]any{"OK", ev.ID, false, protocol.ReasonAuthRequired.Msg("verification failed (" + err.Error() + ")")})
		return
	}
	c.state, c.authed = authOK, ev.PubKey
	c.send([]any{"OK", ev.ID, true, ""})
}

// checkFilters applies the read rules a REQ or COUNT must pass before anything is queried.
func (r *Relay) checkFilters(pubkey string, filters []store.Filter) string {
	for _, f := range filters {
		if msg := checkFilterValues(f, r.cfg.MaxFilterValues); msg != "" {
			return msg
		}
		if msg := pGateViolation(pubkey, f); msg != "" {
			return msg
		}
	}
	return ""
}

// pGateViolation: a filter asking for p-gated kinds must carry #p = exactly the reader.
func pGateViolation(pubkey string, f store.Filter) string {
	for _, k := range f.Kinds {
		if isPGated(k) {
			if p := f.Tags["p"]; len(p) != 1 || p[0] != pubkey {
				return protocol.ReasonRestricted.Msg("p-gated kinds require a #p filter of exactly your pubkey")
			}
			return ""
		}
	}
	return ""
}

func (c *conn) handleReq(f frame) {
	pk := c.pubkey()
	if pk == "" {
		c.send([]any{"NOTICE", protocol.ReasonAuthRequired.Msg("authenticate before subscribing")})
		c.send([]any{"CLOSED", f.SubID, protocol.ReasonAuthRequired.Msg("not authenticated")})
		return
	}
	// A REQ replaces any subscription with its id, also when it is refused below: the old
	// filters must not keep delivering under an id the client now believes closed.
	c.dropSub(f.SubID)
	if msg := c.r.checkFilters(pk, f.Filters); msg != "" {
		c.send([]any{"CLOSED", f.SubID, msg})
		return
	}
	search := 0
	for _, flt := range f.Filters {
		if flt.Search != "" {
			search++
		}
		for _, h := range flt.Tags["h"] {
			if c.r.acl.private(h) && !c.r.acl.canRead(pk, h) && !c.r.hiddenDM(pk, h) {
				c.send([]any{"CLOSED", f.SubID, protocol.ReasonRestricted.Msg("not a channel member")})
				return
			}
		}
	}
	if search > 0 && search < len(f.Filters) {
		c.send([]any{"CLOSED", f.SubID, protocol.ReasonError.Msg("cannot mix search and non-search filters")})
		return
	}
	if search == 0 {
		// Register before querying so nothing published meanwhile is missed (duplicates are
		// possible and harmless).
		c.mu.Lock()
		msg := c.putSub(pk, f.SubID, f.Filters, f.FilterBytes)
		c.mu.Unlock()
		if msg != "" {
			c.send([]any{"CLOSED", f.SubID, msg})
			return
		}
	}
	subJSON, _ := json.Marshal(f.SubID)
	if err := c.sendHistory(pk, subJSON, f.Filters); err != nil {
		if c.ctx.Err() == nil {
			_, msg := c.r.readFailure(err, "query")
			c.send([]any{"CLOSED", f.SubID, msg})
			c.dropSub(f.SubID)
		}
		return
	}
	c.send([]any{"EOSE", f.SubID})
}

func (c *conn) handleCount(f frame) {
	pk := c.pubkey()
	if pk == "" {
		c.send([]any{"CLOSED", f.SubID, protocol.ReasonAuthRequired.Msg("not authenticated")})
		return
	}
	if msg := c.r.checkFilters(pk, f.Filters); msg != "" {
		c.send([]any{"CLOSED", f.SubID, msg})
		return
	}
	qctx, done, err := c.r.startCount(c.ctx, pk)
	if err != nil {
		_, msg := c.r.readFailure(err, "count")
		c.send([]any{"CLOSED", f.SubID, msg})
		return
	}
	n, err := c.r.st.Count(qctx, c.r.acl.access(pk), f.Filters)
	done()
	if err != nil {
		_, msg := c.r.readFailure(err, "count")
		c.send([]any{"CLOSED", f.SubID, msg})
		return
	}
	c.send([]any{"COUNT", f.SubID, map[string]int64{"count": n}})
}

func eventFrameRaw(subJSON, evJSON []byte) []byte {
	var b bytes.Buffer
	b.Grow(len(subJSON) + len(evJSON) + 12)
	b.WriteString(`["EVENT",`)
	b.Write(subJSON)
	b.WriteByte(',')
	b.Write(evJSON)
	b.WriteByte(']')
	return b.Bytes()
}

// broadcast hands a stored or ephemeral event to every connection with live subscriptions; each
// connection's writer matches it against its subscriptions and checks, per subscriber and at
// send time, that the subscriber may see it, so a connection's many filters slow only that
// connection. One that falls a queue (or MaxQueuedBytes) behind is dropped like any client too
// slow to take its events.
func (r *Relay) broadcast(ev *nostr.Event, channelID string) {
	if ev.Kind == protocol.KindPresence {
		r.presence.note(ev, r.now()) // this node's clients' and other nodes' alike
	}
	le := &liveEvent{ev: ev, channelID: channelID, observe: r.metrics.fanout.Observe}
	r.connsMu.RLock()
	conns := make([]*conn, 0, len(r.conns))
	for c := range r.conns {
		if len(c.liveSubs()) > 0 {
			conns = append(conns, c)
		}
	}
	r.connsMu.RUnlock()
	le.pending.Store(int32(len(conns)))
	if len(conns) == 0 {
		le.observe(0)
	}
	n := int(le.size())
	for _, c := range conns {
		if !c.reserveOn(&c.live, n) {
			le.settle(false)
			c.dropSlow("live events queued over the cap")
			continue
		}
		select {
		case c.fanout <- le:
		default:
			c.live.Add(-int64(n))
			le.settle(false)
			c.dropSlow("fan-out queue full")
		}
	}
}

// revoke ends pubkey's live subscriptions scoped to a private channel it just lost.
func (r *Relay) revoke(pubkey, channelID string) {
	for _, c := range r.connections() {
		c.mu.Lock()
		if c.authed != pubkey {
			c.mu.Unlock()
			continue
		}
		closed := c.dropSubs(func(s *liveSub) bool {
			for _, f := range s.filters {
				if f.f.Tags != nil && contains(f.f.Tags["h"], channelID) {
					return true
				}
			}
			return false
		})
		c.mu.Unlock()
		for _, id := range closed {
			c.send([]any{"CLOSED", id, protocol.ReasonRestricted.Msg("channel access revoked")})
		}
	}
}

// connections lists the open WebSocket connections.
func (r *Relay) connections() []*conn {
	r.connsMu.RLock()
	defer r.connsMu.RUnlock()
	conns := make([]*conn, 0, len(r.conns))
	for c := range r.conns {
		conns = append(conns, c)
	}
	return conns
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
