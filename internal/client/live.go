package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/protocol/ownerauth"
	"github.com/coder/websocket"
	"github.com/nbd-wtf/go-nostr"
)

// Live defaults (upstream buzz-acp relay.rs values).
const (
	defaultPingInterval     = 30 * time.Second
	defaultHandshakeTimeout = 20 * time.Second
	pongTimeout             = 10 * time.Second
	writeTimeout            = 10 * time.Second
	dialTimeout             = 30 * time.Second
	resubscribeSkew         = 5 // seconds subtracted from last seen created_at on re-subscribe
	dedupGeneration         = 6000
	eventBuffer             = 256
	readLimit               = 32 << 20
	// A connection whose writer falls this far behind (frames or bytes waiting) is treated as
	// dead: it is dropped and the reconnect re-sends the desired state, so nothing is lost.
	maxQueuedFrames = 4096
	maxQueuedBytes  = 8 << 20
)

// ErrLiveStopped is returned by waits on a Live whose Run has returned.
var ErrLiveStopped = errors.New("relay session stopped")

// LiveConfig configures a Live session.
type LiveConfig struct {
	// RelayURL is ws, wss, http or https, dialled as ws(s). It may list several relays
	// (comma-separated, e.g. nodes of one cluster): the session uses the first that works and,
	// when a connection is lost, moves on to the next (round robin).
	RelayURL  string
	SecretKey string // hex
	Logger    *slog.Logger
	// Backoff returns the wait before reconnect attempt n (1-based).
	// nil = 1, 2, 4, 8, 16, 32, then 60 s, each ±20%.
	Backoff func(attempt int) time.Duration
	// PingInterval between client pings; 0 = 30 s. A pong must arrive within 10 s.
	PingInterval time.Duration
	// HandshakeTimeout bounds waiting for the AUTH challenge and its OK; 0 = 20 s.
	HandshakeTimeout time.Duration
	// AuthTag (BUZZ_AUTH_TAG JSON, "" = none) is the signer's NIP-OA attestation: it goes into
	// every NIP-42 AUTH and onto every event Publish signs. One that does not parse is left out
	// (with a warning); callers validate it first.
	AuthTag string
	// OnReady, if set, is called (on the connection's writer; it must not block) each time a
	// connection is authenticated and its subscriptions are sent: the first and every reconnect.
	OnReady func()
}

// Incoming is one thing the relay told a subscription: an event, end of stored events, or a
// CLOSED with its reason.
type Incoming struct {
	SubID  string
	Event  *nostr.Event
	EOSE   bool
	Closed string // CLOSED reason
	// Resume, with a CLOSED that ended the subscription for good, is the since a new
	// subscription would continue from (Live.Resume just before it was forgotten; nil: from the
	// start), so a caller re-subscribing what it still may read loses nothing.
	Resume   *nostr.Timestamp
	Received time.Time // when the EVENT frame was taken off the socket (for latency figures)
	// Older, with an EOSE, are the subscription's filters whose stored events filled their
	// limit: older events may be left out. Each is the query for the rest, newest first: Until
	// and BeforeID at the oldest event delivered, Since where the REQ asked from.
	Older []Filter
}

// RejectedError is a relay's OK=false answer to a published event.
type RejectedError struct {
	EventID string
	Message string
}

func (e *RejectedError) Error() string {
	return fmt.Sprintf("relay rejected event %s: %s", e.EventID, e.Message)
}

// Live is a WebSocket session for long-running subscribers: NIP-42 auth, desired-state
// subscriptions re-sent after every reconnect, reconnect with backoff, event-id dedup.
// Subscribe/Unsubscribe/Publish may be called from any goroutine, before or during Run; they
// queue frames for the connection's writer and never wait on the network (Publish waits only for
// the relay's OK).
type Live struct {
	cfg     LiveConfig
	urls    []string // WebSocket URLs, in the order given
	pk      string
	log     *slog.Logger
	backoff func(int) time.Duration
	events  chan Incoming
	done    chan struct{}
	authTag nostr.Tag // cfg.AuthTag parsed; nil = none

	mu      sync.Mutex
	cur     int // index into urls of the relay being (or last) dialled
	subs    map[string]*liveSub
	out     *sendQueue    // the current connection's outbound queue; nil while disconnected
	ready   chan struct{} // closed once the current connection's subscriptions are written
	pending map[string]chan okResult
	queries map[string]*liveQuery // one-shot queries awaiting their EOSE (livequery.go)
	queryN  uint64                // the last query's number, for its subscription id

	seen *IDSet // touched only by Run's goroutine

	// dial opens the WebSocket; tests replace it to run over an in-memory pipe.
	dial func(ctx context.Context, url string) (*websocket.Conn, error)
	// maxFrames and maxBytes bound a connection's send queue (tests lower them).
	maxFrames, maxBytes int
}

// sendQueue holds one connection's frames for its writer goroutine, so Subscribe, Unsubscribe
// and Publish never wait on the network: a relay that stops reading stalls only the writer.
// Frames are queued under Live.mu in call order, which keeps REQ/CLOSE order per id.
type sendQueue struct {
	frames [][]byte // guarded by Live.mu
	bytes  int      // guarded by Live.mu
	dead   bool     // guarded by Live.mu: overflowed or lost; later frames are dropped
	wake   chan struct{}
	kill   context.CancelCauseFunc // ends the connection's session
}

type liveSub struct {
	filters  []nostr.Filter
	lastSeen nostr.Timestamp // newest created_at delivered on this sub, after its backlog
	// Stored events come newest first, so until EOSE the newest delivered one says nothing about
	// the older ones still to come: a reconnect then must ask from the old floor again. backlogs
	// counts the REQs sent for the filter whose EOSE has not come: a re-sent REQ's history is
	// complete only at its own EOSE, not at the one of the REQ it replaced.
	backlogs   int
	backlogMax nostr.Timestamp
	// liveAt is when the backlog of its last REQ ended (EOSE); zero from each REQ sent
	// (reqFilters, also on every reconnect) until then. It holds only while a connection is up
	// (LiveSince). From then on every matching event the relay takes comes in on it.
	liveAt time.Time
	// stored counts, per filter, the stored events of the REQs whose EOSE is awaited (summed
	// when they overlap: it may over-count, never under-count), to tell a truncated history.
	stored []storedCount
}

// storedCount is one filter's stored events so far: how many, the oldest, and the since asked.
type storedCount struct {
	n      int
	oldest *nostr.Event
	since  *nostr.Timestamp
}

type okResult struct {
	accepted bool
	message  string
	err      error
}

// NewLive returns a session that does nothing until Run is called.
func NewLive(cfg LiveConfig) *Live {
	pk, _ := nostr.GetPublicKey(cfg.SecretKey)
	l := &Live{
		cfg:     cfg,
		urls:    WSURLs(cfg.RelayURL),
		pk:      pk,
		log:     cfg.Logger,
		backoff: cfg.Backoff,
		events:  make(chan Incoming, eventBuffer),
		done:    make(chan struct{}),
		subs:    map[string]*liveSub{},
		ready:   make(chan struct{}),
		pending: map[string]chan okResult{},
		queries: map[string]*liveQuery{},
		seen:    NewIDSet(dedupGeneration),

		dial:      dialWebSocket,
		maxFrames: maxQueuedFrames,
		maxBytes:  maxQueuedBytes,
	}
	if cfg.AuthTag != "" {
		if tag, err := ownerauth.Parse(cfg.AuthTag); err == nil {
			l.authTag = tag.NostrTag()
		} else if cfg.Logger != nil {
			cfg.Logger.Warn("auth tag left out of AUTH and events", "err", err)
		}
	}
	if l.log == nil {
		l.log = slog.New(slog.DiscardHandler)
	}
	if l.backoff == nil {
		l.backoff = DefaultReconnectBackoff
	}
	return l
}

// PublicKey returns the session's hex public key.
func (l *Live) PublicKey() string { return l.pk }

// URL returns the WebSocket URL the session dials (and names in its AUTH relay tag): with
// several relays, the one currently connected or being tried.
func (l *Live) URL() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.urls[l.cur]
}

// SplitRelayURLs splits a comma-separated relay URL list, dropping blanks. A single URL gives a
// one-element list; "" gives none.
func SplitRelayURLs(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// WSURLs is SplitRelayURLs turned into WebSocket URLs; never empty (an empty list gives the
// WebSocket form of "", which fails to dial with a clear error).
func WSURLs(s string) []string {
	parts := SplitRelayURLs(s)
	if len(parts) == 0 {
		parts = []string{s}
	}
	out := make([]string, len(parts))
	for i, p := range parts {
		out[i] = protocol.WSURL(p)
	}
	return out
}

// DefaultReconnectBackoff is the ladder 1, 2, 4, 8, 16, 32 s then 60 s forever, each ±20%.
func DefaultReconnectBackoff(attempt int) time.Duration {
	return jitter20(reconnectStep(attempt), rand.Float64())
}

func reconnectStep(attempt int) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	if attempt > 6 {
		return 60 * time.Second
	}
	return time.Duration(1<<(attempt-1)) * time.Second
}

// jitter20 scales d by a factor in [0.8, 1.2) chosen by r in [0, 1).
func jitter20(d time.Duration, r float64) time.Duration {
	return time.Duration(float64(d) * (0.8 + 0.4*r))
}

// Events delivers subscription traffic, deduplicated by event id across reconnects. It is closed
// when Run returns. A slow reader stalls the socket (and, past the pong deadline, reconnects).
func (l *Live) Events() <-chan Incoming { return l.events }

// Subscribe sets the desired subscription id to filters (one REQ; the relay applies each
// filter's limit to its own history) and, if connected, queues its REQ; it is re-sent on every
// reconnect. On a re-send, each since becomes max(since, newest delivered created_at − 5 s) so
// nothing published while disconnected is missed. Replacing an id's filters takes their sinces
// as given: the floor learned from delivered events starts over, as they say nothing about what
// the new filters add (use Resume to continue from it). It never waits on the network.
func (l *Live) Subscribe(id string, filters ...nostr.Filter) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.subs[id]
	if s == nil {
		s = &liveSub{}
		l.subs[id] = s
	}
	s.filters, s.lastSeen, s.backlogMax = slices.Clone(filters), 0, 0
	if l.out != nil {
		l.queueLocked(l.out, reqMessage(id, s.reqFilters(false)))
	}
}

// Resume returns the earliest since a re-send of id would ask from now (nil: from the start);
// ok is false when id is not subscribed. A caller replacing id's filters passes at most this
// since for what the old ones covered, so nothing between the two is missed.
func (l *Live) Resume(id string) (since *nostr.Timestamp, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.subs[id]
	if s == nil {
		return nil, false
	}
	return s.earliest(), true
}

// earliest is the earliest since a re-send would ask from (nil: from the start).
func (s *liveSub) earliest() (since *nostr.Timestamp) {
	for i, f := range s.filters {
		fl := s.floor(f)
		if fl == nil {
			return nil
		}
		if i == 0 || *fl < *since {
			since = fl
		}
	}
	return since
}

// LiveSince reports since when id has been live without a break: its stored events are in and
// the connection that brought them is still up, so every matching event the relay took since
// then has been delivered or is on its way. ok is false while it is not live (its REQ awaits
// an EOSE, or no connection is up).
func (l *Live) LiveSince(id string) (at time.Time, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.subs[id]; s != nil && l.out != nil && !s.liveAt.IsZero() {
		return s.liveAt, true
	}
	return time.Time{}, false
}

// Unsubscribe queues CLOSE for id (if connected) and forgets it. It never waits on the network.
func (l *Live) Unsubscribe(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.subs[id]; !ok {
		return
	}
	delete(l.subs, id)
	if l.out != nil {
		l.queueLocked(l.out, []any{"CLOSE", id})
	}
}

// Subscriptions returns the ids currently desired.
func (l *Live) Subscriptions() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]string, 0, len(l.subs))
	for id := range l.subs {
		out = append(out, id)
	}
	return out
}

// reqFilters are the filters of a REQ about to be sent: on a fresh connection (whose earlier
// REQs' EOSEs will never come) or in addition to REQs still in flight on this one.
func (s *liveSub) reqFilters(fresh bool) []nostr.Filter {
	if fresh {
		s.backlogs, s.backlogMax = 0, 0
	}
	s.liveAt = time.Time{}
	if s.backlogs == 0 || len(s.stored) != len(s.filters) {
		s.stored = make([]storedCount, len(s.filters))
	}
	s.backlogs++
	out := make([]nostr.Filter, len(s.filters))
	for i, f := range s.filters {
		f.Since = s.floor(f)
		out[i] = f
		if s.stored[i].since == nil || f.Since == nil || *f.Since < *s.stored[i].since {
			s.stored[i].since = f.Since
		}
	}
	return out
}

// countStored notes a stored event of the awaited backlog against the filters it matches.
func (s *liveSub) countStored(ev *nostr.Event) {
	for i, f := range s.filters {
		if i < len(s.stored) && f.MatchesIgnoringTimestampConstraints(ev) {
			c := &s.stored[i]
			c.n++
			if c.oldest == nil || ev.CreatedAt < c.oldest.CreatedAt || ev.CreatedAt == c.oldest.CreatedAt && ev.ID > c.oldest.ID {
				c.oldest = ev
			}
		}
	}
}

// truncated lists the queries for what the finished backlog's full filters left out.
func (s *liveSub) truncated() []Filter {
	var out []Filter
	for i, c := range s.stored {
		f := s.filters[i]
		if f.Limit <= 0 || c.n < f.Limit || c.oldest == nil {
			continue
		}
		until := c.oldest.CreatedAt
		f.Since, f.Until = c.since, &until
		out = append(out, Filter{Filter: f, BeforeID: c.oldest.ID})
	}
	s.stored = nil
	return out
}

// floor is where a re-send of filter f asks from.
func (s *liveSub) floor(f nostr.Filter) *nostr.Timestamp {
	if s.lastSeen > 0 {
		since := s.lastSeen - resubscribeSkew
		if f.Since == nil || *f.Since < since {
			return &since
		}
	}
	return f.Since
}

func reqMessage(id string, filters []nostr.Filter) []any {
	msg := make([]any, 0, 2+len(filters))
	msg = append(msg, "REQ", id)
	for _, f := range filters {
		msg = append(msg, f)
	}
	return msg
}

// Connected returns a channel that is closed once a session is authenticated and its
// subscriptions are sent. After a disconnect a new (open) channel is returned.
func (l *Live) Connected() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ready
}

// WaitConnected blocks until a session is authenticated and its subscriptions are sent.
func (l *Live) WaitConnected(ctx context.Context) error {
	select {
	case <-l.Connected():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-l.done:
		return ErrLiveStopped
	}
}

// Publish queues ev for the socket (for ephemeral kinds such as 20002 typing, which the HTTP
// bridge refuses) and waits for the relay's OK. Unsigned events are signed first.
func (l *Live) Publish(ctx context.Context, ev *nostr.Event) error {
	if ev.Sig == "" {
		addAuthTag(ev, l.authTag)
	}
	if err := SignIfUnsigned(ev, l.cfg.SecretKey, time.Now()); err != nil {
		return err
	}
	if err := l.WaitConnected(ctx); err != nil {
		return err
	}
	return l.publishNow(ctx, ev)
}

var errNotConnected = errors.New("relay connection lost before publish")

// publishNow sends a signed ev on the current connection and waits for its OK; with no
// connection it fails at once (errNotConnected).
func (l *Live) publishNow(ctx context.Context, ev *nostr.Event) error {
	ch := make(chan okResult, 1)
	l.mu.Lock()
	if l.out == nil || !l.queueLocked(l.out, []any{"EVENT", ev}) {
		l.mu.Unlock()
		return errNotConnected
	}
	l.pending[ev.ID] = ch
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		if l.pending[ev.ID] == ch {
			delete(l.pending, ev.ID)
		}
		l.mu.Unlock()
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			return r.err
		}
		if !r.accepted {
			return &RejectedError{EventID: ev.ID, Message: r.message}
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Run connects, authenticates, subscribes and reads until ctx is done, reconnecting with
// backoff after any failure. It returns ctx's error. Call it once.
func (l *Live) Run(ctx context.Context) error {
	defer close(l.events)
	defer close(l.done)
	attempt := 0
	roundStart := 0 // the relay a round of tries began at: backoff only once every relay failed
	for {
		url := l.URL()
		wasReady, err := l.session(ctx, url)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		l.mu.Lock()
		if wasReady {
			attempt, roundStart = 0, l.cur
		}
		l.cur = (l.cur + 1) % len(l.urls)
		next, wrapped := l.urls[l.cur], l.cur == roundStart
		l.mu.Unlock()
		if !wrapped {
			l.log.Warn("relay session ended; trying the next relay", "url", url, "err", err, "next", next)
			continue
		}
		attempt++
		wait := l.backoff(attempt)
		l.log.Warn("relay session ended; reconnecting", "url", url, "err", err, "next", next, "attempt", attempt, "wait", wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// errReconnect marks a relay message that calls for a fresh connection.
type errReconnect struct{ reason string }

func (e errReconnect) Error() string { return e.reason }

func dialWebSocket(ctx context.Context, url string) (*websocket.Conn, error) {
	conn, _, err := websocket.Dial(ctx, url, nil)
	return conn, err
}

// session runs one connection to its end. wasReady reports whether it got past auth.
func (l *Live) session(ctx context.Context, url string) (wasReady bool, err error) {
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	dctx, dcancel := context.WithTimeout(sctx, dialTimeout)
	conn, err := l.dial(dctx, url)
	dcancel()
	if err != nil {
		return false, fmt.Errorf("dial %s: %w", url, err)
	}
	defer conn.CloseNow()
	conn.SetReadLimit(readLimit)

	backlog, err := l.handshake(sctx, conn, url)
	if err != nil {
		return false, err
	}

	// From here on only the writer writes (besides pings). The desired state goes first; changes
	// made after this snapshot queue behind it.
	q := &sendQueue{wake: make(chan struct{}, 1), kill: cancel}
	l.mu.Lock()
	initial := make([][]byte, 0, len(l.subs))
	for id, s := range l.subs {
		if raw, err := json.Marshal(reqMessage(id, s.reqFilters(true))); err == nil {
			initial = append(initial, raw)
		}
	}
	l.out = q
	ready := l.ready
	l.mu.Unlock()

	defer l.lost(q)
	// The writer and the pinger end with the session, and it returns only once they have.
	var wg sync.WaitGroup
	defer func() {
		cancel(nil)
		wg.Wait()
	}()
	wg.Go(func() { l.writer(sctx, conn, q, initial, ready, url) })
	wg.Go(func() { l.pinger(sctx, conn) })

	for _, raw := range backlog {
		if err := l.handle(sctx, raw); err != nil {
			return true, err
		}
	}
	for {
		_, raw, err := conn.Read(sctx)
		if err != nil {
			if cause := context.Cause(sctx); cause != nil && cause != context.Canceled && ctx.Err() == nil {
				err = cause
			}
			return true, fmt.Errorf("read: %w", err)
		}
		if err := l.handle(sctx, raw); err != nil {
			return true, err
		}
	}
}

// writer writes the connection's subscriptions, marks the session ready, then writes queued
// frames in order until the session ends. A failed write ends the session: the reconnect
// re-sends the desired state.
func (l *Live) writer(ctx context.Context, conn *websocket.Conn, q *sendQueue, initial [][]byte, ready chan struct{}, url string) {
	write := func(raw []byte) bool {
		wctx, cancel := context.WithTimeout(ctx, writeTimeout)
		err := conn.Write(wctx, websocket.MessageText, raw)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				l.log.Warn("relay write failed; dropping connection", "err", err)
			}
			q.kill(fmt.Errorf("relay write failed: %w", err))
			return false
		}
		return true
	}
	for _, raw := range initial {
		if !write(raw) {
			return
		}
	}
	l.mu.Lock()
	if l.out == q {
		close(ready)
	}
	l.mu.Unlock()
	l.log.Info("relay session ready", "url", url)
	if l.cfg.OnReady != nil {
		l.cfg.OnReady()
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-q.wake:
		}
		l.mu.Lock()
		frames := q.frames
		q.frames, q.bytes = nil, 0
		l.mu.Unlock()
		for _, raw := range frames {
			if !write(raw) {
				return
			}
		}
	}
}

// queueLocked hands msg to q's writer; l.mu must be held. A queue that is full marks its
// connection dead (the session ends and reconnects, re-sending the desired state) rather than
// letting callers wait on a relay that does not read. It reports whether msg was queued.
func (l *Live) queueLocked(q *sendQueue, msg []any) bool {
	if q.dead {
		return false
	}
	raw, err := json.Marshal(msg)
	if err != nil {
		l.log.Warn("cannot encode relay message", "type", msg[0], "err", err)
		return false
	}
	if len(q.frames) >= l.maxFrames || q.bytes+len(raw) > l.maxBytes {
		q.dead = true
		l.log.Warn("relay is not reading; dropping connection", "queued_frames", len(q.frames), "queued_bytes", q.bytes)
		q.kill(errors.New("send queue full: relay is not reading"))
		return false
	}
	q.frames = append(q.frames, raw)
	q.bytes += len(raw)
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return true
}

// lost resets connection state after a session ends and fails publishes waiting for an OK.
func (l *Live) lost(q *sendQueue) {
	l.mu.Lock()
	defer l.mu.Unlock()
	q.dead = true
	l.out = nil
	l.failQueriesLocked()
	select {
	case <-l.ready: // this session got ready: the next one needs an open channel
		l.ready = make(chan struct{})
	default: // never got ready: waiters keep the channel the next session closes
	}
	for id, ch := range l.pending {
		ch <- okResult{err: errors.New("relay connection lost before OK")}
		delete(l.pending, id)
	}
}

// handshake waits for the AUTH challenge, answers it and waits for the OK. Other frames that
// arrive meanwhile are returned for normal processing afterwards.
func (l *Live) handshake(ctx context.Context, conn *websocket.Conn, url string) ([][]byte, error) {
	timeout := l.cfg.HandshakeTimeout
	if timeout <= 0 {
		timeout = defaultHandshakeTimeout
	}
	hctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	var backlog [][]byte
	var authID string
	for {
		_, raw, err := conn.Read(hctx)
		if err != nil {
			if authID == "" {
				return nil, fmt.Errorf("waiting for AUTH challenge: %w", err)
			}
			return nil, fmt.Errorf("waiting for AUTH OK: %w", err)
		}
		msg, err := parseRelayMessage(raw)
		if err != nil {
			l.log.Debug("ignoring malformed relay frame", "err", err)
			continue
		}
		switch {
		case msg.label == "AUTH" && authID == "":
			ev, err := protocol.NewAuthEvent(l.cfg.SecretKey, url, msg.challenge, time.Now(), l.authExtra()...)
			if err != nil {
				return nil, fmt.Errorf("sign AUTH: %w", err)
			}
			authID = ev.ID
			if err := writeJSON(hctx, conn, []any{"AUTH", ev}); err != nil {
				return nil, fmt.Errorf("send AUTH: %w", err)
			}
		case msg.label == "OK" && authID != "" && msg.id == authID:
			if !msg.accepted {
				return nil, fmt.Errorf("relay refused AUTH: %s", msg.message)
			}
			return backlog, nil
		default:
			backlog = append(backlog, raw)
		}
	}
}

func (l *Live) pinger(ctx context.Context, conn *websocket.Conn) {
	every := l.cfg.PingInterval
	if every <= 0 {
		every = defaultPingInterval
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, pongTimeout)
		err := conn.Ping(pctx)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				l.log.Warn("relay ping failed; dropping connection", "err", err)
			}
			conn.CloseNow()
			return
		}
	}
}

// handle processes one relay frame. A non-nil error ends the session (reconnect path).
func (l *Live) handle(ctx context.Context, raw []byte) error {
	msg, err := parseRelayMessage(raw)
	if err != nil {
		l.log.Debug("ignoring malformed relay frame", "err", err)
		return nil
	}
	if strings.HasPrefix(msg.subID, querySubPfx) && l.queryFrame(msg) {
		return nil
	}
	switch msg.label {
	case "EVENT":
		return l.handleEvent(ctx, msg)
	case "EOSE":
		if !l.wanted(msg.subID) {
			return nil
		}
		in := Incoming{SubID: msg.subID, EOSE: true}
		l.mu.Lock()
		if s := l.subs[msg.subID]; s != nil && s.backlogs > 0 {
			if s.backlogs--; s.backlogs == 0 {
				s.lastSeen = max(s.lastSeen, s.backlogMax)
				in.Older = s.truncated()
				s.liveAt = time.Now()
			}
		}
		l.mu.Unlock()
		return l.deliver(ctx, in)
	case "CLOSED":
		return l.handleClosed(ctx, msg)
	case "OK":
		l.mu.Lock()
		ch := l.pending[msg.id]
		delete(l.pending, msg.id)
		l.mu.Unlock()
		if ch != nil {
			ch <- okResult{accepted: msg.accepted, message: msg.message}
		} else if !msg.accepted {
			l.log.Warn("relay refused an event", "id", msg.id, "message", msg.message)
		}
	case "AUTH":
		// The relay may re-challenge mid-session; answer on the same socket.
		ev, err := protocol.NewAuthEvent(l.cfg.SecretKey, l.URL(), msg.challenge, time.Now(), l.authExtra()...)
		if err != nil {
			return fmt.Errorf("sign AUTH: %w", err)
		}
		l.mu.Lock()
		if l.out != nil {
			l.queueLocked(l.out, []any{"AUTH", ev})
		}
		l.mu.Unlock()
	case "NOTICE":
		l.log.Info("relay notice", "message", msg.message)
	}
	return nil
}

func (l *Live) wanted(subID string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.subs[subID]
	return ok
}

func (l *Live) handleEvent(ctx context.Context, msg relayMessage) error {
	received := time.Now()
	if !l.wanted(msg.subID) {
		return nil // late traffic for a sub we closed
	}
	ev := msg.event
	// A copy of an event already delivered (overlapping subscriptions: the agent's own messages
	// come on its own subscription and on its thread's) was checked when it first came; dropped
	// unchecked, it costs no curve operation. A reminder repeats by design and is checked again.
	if ev.Kind != protocol.KindPrivateReminder && l.seen.Has(ev.ID) {
		l.countBacklog(msg.subID, ev)
		return nil
	}
	if err := protocol.CheckEvent(ev); err != nil {
		l.log.Warn("dropping relay event with bad id or signature", "sub", msg.subID, "err", err)
		return nil
	}
	l.countBacklog(msg.subID, ev) // before dedup: the relay's limit counted it
	// A NIP-ER reminder comes again when it falls due (a due signal): by design the same id.
	if !l.seen.Add(ev.ID) && ev.Kind != protocol.KindPrivateReminder {
		return nil
	}
	if err := l.deliver(ctx, Incoming{SubID: msg.subID, Event: ev, Received: received}); err != nil {
		return err
	}
	// Only delivered events advance the resubscribe floor, so a stalled consumer never
	// makes us skip what it did not get.
	// An event dated ahead of our clock must not move the floor into the future.
	at := min(ev.CreatedAt, nostr.Timestamp(received.Unix()))
	l.mu.Lock()
	if s := l.subs[msg.subID]; s != nil {
		if s.backlogs > 0 {
			s.backlogMax = max(s.backlogMax, at)
		} else {
			s.lastSeen = max(s.lastSeen, at)
		}
	}
	l.mu.Unlock()
	return nil
}

func (l *Live) handleClosed(ctx context.Context, msg relayMessage) error {
	if !l.wanted(msg.subID) {
		return nil // e.g. the relay acknowledging our CLOSE
	}
	// Denied or malformed for this sub only (not a member, access revoked, a filter the relay
	// refuses): asking again would fail the same way, so stop asking. Forgotten before the
	// CLOSED is delivered, so whoever reads it already sees the subscription gone.
	reason := protocol.ReasonOf(msg.message)
	final := reason == protocol.ReasonRestricted || reason == protocol.ReasonInvalid || reason == protocol.ReasonBlocked
	in := Incoming{SubID: msg.subID, Closed: msg.message}
	if final {
		l.log.Warn("relay closed subscription for good", "sub", msg.subID, "reason", msg.message)
		l.mu.Lock()
		if s := l.subs[msg.subID]; s != nil {
			in.Resume = s.earliest()
		}
		delete(l.subs, msg.subID)
		l.mu.Unlock()
	}
	if err := l.deliver(ctx, in); err != nil {
		return err
	}
	if final {
		return nil
	}
	return errReconnect{reason: fmt.Sprintf("subscription %s closed: %s", msg.subID, msg.message)}
}

// countBacklog counts ev among the stored events of subID's REQs whose EOSE is awaited.
func (l *Live) countBacklog(subID string, ev *nostr.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.subs[subID]; s != nil && s.backlogs > 0 {
		s.countStored(ev)
	}
}

func (l *Live) deliver(ctx context.Context, in Incoming) error {
	select {
	case l.events <- in:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func writeJSON(ctx context.Context, conn *websocket.Conn, msg []any) error {
	raw, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	return conn.Write(ctx, websocket.MessageText, raw)
}

// relayMessage is a parsed relay→client frame.
type relayMessage struct {
	label     string
	subID     string
	event     *nostr.Event
	id        string // OK event id
	accepted  bool
	message   string // OK / CLOSED / NOTICE text
	challenge string
}

// parseRelayMessage decodes the relay→client NIP-01/42 frames Live understands.
func parseRelayMessage(raw []byte) (relayMessage, error) {
	var arr []json.RawMessage
	if err := json.Unmarshal(raw, &arr); err != nil {
		return relayMessage{}, fmt.Errorf("frame is not a JSON array: %w", err)
	}
	if len(arr) == 0 {
		return relayMessage{}, errors.New("empty frame")
	}
	var m relayMessage
	if err := json.Unmarshal(arr[0], &m.label); err != nil {
		return m, errors.New("frame label is not a string")
	}
	str := func(i int, dst *string) error {
		if i >= len(arr) {
			return fmt.Errorf("%s frame too short", m.label)
		}
		if err := json.Unmarshal(arr[i], dst); err != nil {
			return fmt.Errorf("%s frame field %d: %w", m.label, i, err)
		}
		return nil
	}
	switch m.label {
	case "EVENT":
		if len(arr) < 3 {
			return m, errors.New("EVENT frame too short")
		}
		if err := str(1, &m.subID); err != nil {
			return m, err
		}
		m.event = &nostr.Event{}
		if err := json.Unmarshal(arr[2], m.event); err != nil {
			return m, fmt.Errorf("EVENT frame event: %w", err)
		}
	case "EOSE":
		return m, str(1, &m.subID)
	case "CLOSED":
		if err := str(1, &m.subID); err != nil {
			return m, err
		}
		if len(arr) > 2 {
			_ = json.Unmarshal(arr[2], &m.message)
		}
	case "OK":
		if len(arr) < 3 {
			return m, errors.New("OK frame too short")
		}
		if err := str(1, &m.id); err != nil {
			return m, err
		}
		if err := json.Unmarshal(arr[2], &m.accepted); err != nil {
			return m, fmt.Errorf("OK frame accepted flag: %w", err)
		}
		if len(arr) > 3 {
			_ = json.Unmarshal(arr[3], &m.message)
		}
	case "AUTH":
		return m, str(1, &m.challenge)
	case "NOTICE":
		return m, str(1, &m.message)
	}
	return m, nil
}

// authExtra is the extra tags of our AUTH events: the auth tag, when there is one.
func (l *Live) authExtra() []nostr.Tag {
	if l.authTag == nil {
		return nil
	}
	return []nostr.Tag{l.authTag}
}
