package relay

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/relay/store"
)

const (
	writeTimeout = 10 * time.Second
	pingPeriod   = 30 * time.Second
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

	mu     sync.Mutex
	authed string
	state  authState
	subs   map[string][]store.Filter
}

func (r *Relay) serveWS(w http.ResponseWriter, req *http.Request) {
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
		subs:      map[string][]store.Filter{},
	}
	r.connsMu.Lock()
	if r.closed {
		r.connsMu.Unlock()
		ws.Close(websocket.StatusGoingAway, "relay shutting down")
		cancel()
		return
	}
	r.conns[c] = struct{}{}
	r.connsMu.Unlock()
	defer func() {
		r.connsMu.Lock()
		delete(r.conns, c)
		r.connsMu.Unlock()
		cancel()
		ws.CloseNow()
	}()

	go c.writeLoop()
	go c.pingLoop()
	c.send([]any{"AUTH", c.challenge})
	c.readLoop()
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
// processor still applies frames strictly in order.
func (c *conn) readLoop() {
	queue := make(chan *job, 64)
	processed := make(chan struct{})
	go func() {
		defer close(processed)
		for j := range queue {
			if j.verified != nil {
				<-j.verified
			}
			c.process(j)
		}
	}()
	defer func() {
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
			c.send([]any{"NOTICE", "invalid: frame exceeds 524288 bytes"})
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
			return
		}
	}
}

func (c *conn) writeLoop() {
	defer c.cancel()
	for {
		select {
		case <-c.ctx.Done():
			return
		case m := <-c.out:
			if m.closeCode != 0 {
				c.ws.Close(m.closeCode, m.reason)
				return
			}
			ctx, cancel := context.WithTimeout(c.ctx, writeTimeout)
			err := c.ws.Write(ctx, websocket.MessageText, m.data)
			cancel()
			if err != nil {
				return
			}
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

// sendBacklog queues a stored event, waiting for room: a REQ's history is the client's own
// request, so it gets back-pressure rather than the slow-client disconnect of live fan-out.
func (c *conn) sendBacklog(b []byte) {
	select {
	case c.out <- outMsg{data: b}:
	case <-c.ctx.Done():
	}
}

func (c *conn) sendRaw(b []byte) {
	select {
	case c.out <- outMsg{data: b}:
	case <-c.ctx.Done():
	default:
		c.r.log.Warn("dropping slow websocket client", "host", c.host)
		c.cancel()
		c.ws.CloseNow()
	}
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
		res := c.r.submitChecked(c.ctx, f.Event, j.checkErr, c.pubkey(), false)
		c.send([]any{"OK", f.Event.ID, res.OK, res.Msg})
	case "REQ":
		c.handleReq(f)
	case "COUNT":
		c.handleCount(f)
	case "CLOSE":
		c.mu.Lock()
		delete(c.subs, f.SubID)
		c.mu.Unlock()
	}
}

// expectedRelayURLs are the relay tag values AUTH accepts: ws(s)://<Host> and the configured
// public URL.
func (c *conn) expectedRelayURLs() []string {
	scheme := "ws://"
	if strings.HasPrefix(c.r.cfg.PublicURL, "wss://") {
		scheme = "wss://"
	}
	urls := []string{scheme + c.host}
	if c.r.cfg.PublicURL != "" {
		urls = append(urls, protocol.WSURL(c.r.cfg.PublicURL))
	}
	return urls
}

func (c *conn) handleAuth(ev *nostr.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch c.state {
	case authOK:
		c.send([]any{"OK", ev.ID, false, "auth-required: already authenticated"})
		return
	case authFailed:
		c.send([]any{"OK", ev.ID, false, "auth-required: authentication already failed on this connection"})
		return
	}
	var err error
	for _, u := range c.expectedRelayURLs() {
		if err = protocol.VerifyAuthEvent(ev, c.challenge, u, c.r.now()); err == nil {
			break
		}
	}
	if err != nil {
		c.state = authFailed
		c.r.log.Debug("auth failed", "host", c.host, "err", err)
		c.send([]any{"OK", ev.ID, false, "auth-required: verification failed (" + err.Error() + ")"})
		return
	}
	c.state, c.authed = authOK, ev.PubKey
	c.send([]any{"OK", ev.ID, true, ""})
}

// checkFilters applies the read rules a REQ or COUNT must pass before anything is queried.
func (r *Relay) checkFilters(pubkey string, filters []store.Filter) string {
	for _, f := range filters {
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
				return "restricted: p-gated kinds require a #p filter of exactly your pubkey"
			}
			return ""
		}
	}
	return ""
}

func (c *conn) handleReq(f frame) {
	pk := c.pubkey()
	if pk == "" {
		c.send([]any{"NOTICE", "auth-required: authenticate before subscribing"})
		c.send([]any{"CLOSED", f.SubID, "auth-required: not authenticated"})
		return
	}
	// A REQ replaces any subscription with its id, also when it is refused below: the old
	// filters must not keep delivering under an id the client now believes closed.
	c.mu.Lock()
	delete(c.subs, f.SubID)
	c.mu.Unlock()
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
			if c.r.acl.private(h) && !c.r.acl.canRead(pk, h) {
				c.send([]any{"CLOSED", f.SubID, "restricted: not a channel member"})
				return
			}
		}
	}
	if search > 0 && search < len(f.Filters) {
		c.send([]any{"CLOSED", f.SubID, "error: cannot mix search and non-search filters"})
		return
	}
	if search == 0 {
		// Register before querying so nothing published meanwhile is missed (duplicates are
		// possible and harmless).
		c.mu.Lock()
		if _, exists := c.subs[f.SubID]; !exists && len(c.subs) >= maxSubscriptions {
			c.mu.Unlock()
			c.send([]any{"CLOSED", f.SubID, "error: too many subscriptions"})
			return
		}
		c.subs[f.SubID] = f.Filters
		c.mu.Unlock()
	}
	subJSON, _ := json.Marshal(f.SubID)
	seen := map[string]bool{}
	for _, flt := range f.Filters {
		limit := effectiveLimit(flt)
		if limit == 0 {
			continue
		}
		evs, err := c.r.st.Query(c.ctx, c.r.acl.access(pk), flt, limit)
		if err != nil {
			c.r.log.Error("query", "err", err)
			c.send([]any{"CLOSED", f.SubID, "error: query failed"})
			c.mu.Lock()
			delete(c.subs, f.SubID)
			c.mu.Unlock()
			return
		}
		for i := range evs {
			if seen[evs[i].ID] {
				continue
			}
			seen[evs[i].ID] = true
			c.sendBacklog(eventFrame(subJSON, &evs[i]))
		}
	}
	c.send([]any{"EOSE", f.SubID})
}

func (c *conn) handleCount(f frame) {
	pk := c.pubkey()
	if pk == "" {
		c.send([]any{"CLOSED", f.SubID, "auth-required: not authenticated"})
		return
	}
	if msg := c.r.checkFilters(pk, f.Filters); msg != "" {
		c.send([]any{"CLOSED", f.SubID, msg})
		return
	}
	n, err := c.r.st.Count(c.ctx, c.r.acl.access(pk), f.Filters)
	if err != nil {
		c.send([]any{"CLOSED", f.SubID, "error: count failed"})
		return
	}
	c.send([]any{"COUNT", f.SubID, map[string]int64{"count": n}})
}

func eventFrame(subJSON []byte, ev *nostr.Event) []byte {
	evJSON, _ := json.Marshal(ev)
	return eventFrameRaw(subJSON, evJSON)
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

// broadcast delivers a stored or ephemeral event to every live subscription it matches, after
// checking, per subscriber and at send time, that the subscriber may see it.
func (r *Relay) broadcast(ev *nostr.Event, channelID string) {
	var evJSON []byte
	r.connsMu.RLock()
	conns := make([]*conn, 0, len(r.conns))
	for c := range r.conns {
		conns = append(conns, c)
	}
	r.connsMu.RUnlock()
	for _, c := range conns {
		c.mu.Lock()
		pk := c.authed
		var hits []string
		for id, filters := range c.subs {
			for _, f := range filters {
				if f.Matches(ev) {
					hits = append(hits, id)
					break
				}
			}
		}
		c.mu.Unlock()
		if len(hits) == 0 || !r.canSee(pk, ev, channelID) {
			continue
		}
		if evJSON == nil {
			evJSON, _ = json.Marshal(ev)
		}
		for _, id := range hits {
			subJSON, _ := json.Marshal(id)
			c.sendRaw(eventFrameRaw(subJSON, evJSON))
		}
	}
}

// revoke ends pubkey's live subscriptions scoped to a private channel it just lost.
func (r *Relay) revoke(pubkey, channelID string) {
	r.connsMu.RLock()
	conns := make([]*conn, 0, len(r.conns))
	for c := range r.conns {
		conns = append(conns, c)
	}
	r.connsMu.RUnlock()
	for _, c := range conns {
		c.mu.Lock()
		if c.authed != pubkey {
			c.mu.Unlock()
			continue
		}
		var closed []string
		for id, filters := range c.subs {
			for _, f := range filters {
				if f.Tags != nil && contains(f.Tags["h"], channelID) {
					closed = append(closed, id)
					delete(c.subs, id)
					break
				}
			}
		}
		c.mu.Unlock()
		for _, id := range closed {
			c.send([]any{"CLOSED", id, "restricted: channel access revoked"})
		}
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
