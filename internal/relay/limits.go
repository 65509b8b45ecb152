package relay

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/relay/store"
)

// Read limits (docs/security.md). A search's cost grows with its terms and a COUNT's with the
// events it matches (every match is read, none is skipped by a limit), so these heavy reads run
// only a few at once relay-wide, one per pubkey at a time, and a COUNT has a deadline shorter
// than a plain read's: plain reads always find a free reader connection soon.
const (
	maxSearchBytes   = 256
	maxSearchTerms   = 16
	maxClientQueries = 2 // store reads one pubkey runs at once (WS and bridge together)
	maxClientHeavy   = 1 // searches and counts one pubkey runs at once
	maxHeavyReads    = 2 // searches and counts running relay-wide; the store has 4 readers
)

// DefaultCountTimeout bounds a COUNT (WS or bridge); it is shorter than DefaultQueryTimeout, the
// time a plain read may wait for a reader.
const DefaultCountTimeout = 3 * time.Second

// checkSearch bounds a filter's search text.
func checkSearch(s string) error {
	if len(s) > maxSearchBytes {
		return fmt.Errorf(`filter "search" is longer than %d bytes`, maxSearchBytes)
	}
	if n := len(store.SearchTerms(s)); n > maxSearchTerms {
		return fmt.Errorf(`filter "search" has %d words (max %d)`, n, maxSearchTerms)
	}
	return nil
}

// errBusy: the read waited for a free slot until its deadline.
var errBusy = errors.New("busy")

// queryGate bounds concurrent store reads per client, and heavy reads (searches and counts) per
// client and relay-wide. Waiting, not refusing, keeps a client's short bursts working; the
// read's deadline bounds the wait.
type queryGate struct {
	heavy   chan struct{}
	mu      sync.Mutex
	clients map[string]*clientSlots

	active atomic.Int64 // reads holding their slots now
}

type clientSlots struct {
	sem   chan struct{}
	heavy chan struct{}
	users int
}

func newQueryGate() *queryGate {
	return &queryGate{heavy: make(chan struct{}, maxHeavyReads), clients: map[string]*clientSlots{}}
}

func (g *queryGate) enter(ctx context.Context, client string, heavy bool) (func(), error) {
	if ctx.Err() != nil {
		return nil, errBusy // select would pick at random between a free slot and the end
	}
	g.mu.Lock()
	cs := g.clients[client]
	if cs == nil {
		cs = &clientSlots{sem: make(chan struct{}, maxClientQueries), heavy: make(chan struct{}, maxClientHeavy)}
		g.clients[client] = cs
	}
	cs.users++
	g.mu.Unlock()
	var held []chan struct{} // slots taken, in order
	leave := func() {
		for i := len(held) - 1; i >= 0; i-- {
			<-held[i]
		}
		g.mu.Lock()
		if cs.users--; cs.users == 0 {
			delete(g.clients, client)
		}
		g.mu.Unlock()
	}
	slots := []chan struct{}{cs.sem}
	if heavy {
		slots = append(slots, cs.heavy, g.heavy)
	}
	for _, slot := range slots {
		select {
		case slot <- struct{}{}:
			held = append(held, slot)
		case <-ctx.Done():
			leave()
			return nil, errBusy
		}
	}
	g.active.Add(1)
	return func() {
		g.active.Add(-1)
		leave()
	}, nil
}

// startRead admits one client read (a REQ's history, a bridge query) under the limits: a
// deadline, the client's concurrency slots and, for searches, the heavy-read slots. ctx is the
// client's connection or request, so the read ends when the client leaves.
func (r *Relay) startRead(ctx context.Context, client string, filters []store.Filter) (context.Context, func(), error) {
	search := false
	for _, f := range filters {
		search = search || f.Search != ""
	}
	return r.admitRead(ctx, client, search, r.cfg.QueryTimeout)
}

// startCount admits one COUNT: a heavy read, with the shorter count deadline.
func (r *Relay) startCount(ctx context.Context, client string) (context.Context, func(), error) {
	return r.admitRead(ctx, client, true, r.cfg.CountTimeout)
}

func (r *Relay) admitRead(ctx context.Context, client string, heavy bool, timeout time.Duration) (context.Context, func(), error) {
	qctx, cancel := context.WithTimeout(ctx, timeout)
	release, err := r.gate.enter(qctx, client, heavy)
	if err != nil {
		cancel()
		return nil, nil, err
	}
	return qctx, func() { release(); cancel() }, nil
}

// readFailure maps a failed read to the client's answer.
func (r *Relay) readFailure(err error, what string) (int, string) {
	switch {
	case errors.Is(err, errBusy):
		return http.StatusTooManyRequests, protocol.ReasonRateLimited.Msg("too many queries running; retry in 1s")
	case errors.Is(err, context.DeadlineExceeded):
		limit := r.cfg.QueryTimeout
		if what == "count" {
			limit = r.cfg.CountTimeout
		}
		return http.StatusServiceUnavailable, protocol.ReasonError.Msgf("%s took longer than %s", what, limit)
	case errors.Is(err, store.ErrClosed):
		return http.StatusServiceUnavailable, protocol.ReasonError.Msg("relay is shutting down")
	case errors.Is(err, context.Canceled):
		return http.StatusServiceUnavailable, protocol.ReasonError.Msg("request cancelled")
	}
	r.log.Error(what, "err", err)
	return http.StatusInternalServerError, protocol.ReasonError.Msg(what + " failed")
}

// canonicalOrigin is scheme://host[:port], lowercase, default ports dropped.
func canonicalOrigin(raw string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Scheme == "" || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return "", fmt.Errorf("origin %q must be scheme://host[:port]", raw)
	}
	scheme, host, port := strings.ToLower(u.Scheme), strings.ToLower(u.Hostname()), u.Port()
	if port == defaultPort(scheme) {
		port = ""
	}
	if port == "" {
		if strings.Contains(host, ":") {
			host = "[" + host + "]"
		}
		return scheme + "://" + host, nil
	}
	return scheme + "://" + net.JoinHostPort(host, port), nil
}

func defaultPort(scheme string) string {
	switch scheme {
	case "http", "ws":
		return "80"
	case "https", "wss":
		return "443"
	}
	return ""
}

func parseOrigins(list []string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, o := range list {
		if strings.TrimSpace(o) == "" {
			continue
		}
		c, err := canonicalOrigin(o)
		if err != nil {
			return nil, fmt.Errorf("relay: allowed origins: %w", err)
		}
		out[c] = true
	}
	return out, nil
}

// originAllowed: no Origin (not a browser) is allowed; a browser's Origin must be listed.
// Without this any web page the user opens could read the loopback relay through them.
func (r *Relay) originAllowed(req *http.Request) bool {
	o := req.Header.Get("Origin")
	if o == "" {
		return true
	}
	c, err := canonicalOrigin(o)
	return err == nil && r.origins[c]
}

// relayURLs lists the base URLs (scheme://host:port, in the given scheme family) that name
// this relay: the public URL when set, else the listen address and the loopback names with
// the listen port. The request's Host header plays no part.
func relayURLs(publicURL, listenAddr string) ([]string, error) {
	if publicURL != "" {
		u, err := url.Parse(protocol.WSURL(publicURL))
		if err != nil || u.Hostname() == "" {
			return nil, fmt.Errorf("relay: public URL %q is not a ws(s):// URL", publicURL)
		}
		base := u.Scheme + "://" + u.Host
		out := []string{base}
		// "ws://h" and "ws://h:80" are one address.
		if p := u.Port(); p == "" {
			out = append(out, u.Scheme+"://"+net.JoinHostPort(u.Hostname(), defaultPort(u.Scheme)))
		} else if p == defaultPort(u.Scheme) {
			out = append(out, u.Scheme+"://"+u.Hostname())
		}
		return out, nil
	}
	host, port, err := net.SplitHostPort(listenAddr)
	if err != nil {
		return nil, errors.New("relay: listen address unknown; set Config.ListenAddr or PublicURL")
	}
	// protocol.NormalizeURL treats localhost, 127.0.0.1 and ::1 as one host.
	out := []string{"ws://" + net.JoinHostPort("127.0.0.1", port)}
	if ip := net.ParseIP(host); host != "" && host != "localhost" && (ip == nil || (!ip.IsLoopback() && !ip.IsUnspecified())) {
		out = append(out, "ws://"+net.JoinHostPort(host, port))
	}
	return out, nil
}

// selfURLs are this relay's WebSocket base URLs (see relayURLs).
func (r *Relay) selfURLs() ([]string, error) {
	r.listenMu.RLock()
	addr := r.listenAddr
	r.listenMu.RUnlock()
	return relayURLs(r.cfg.PublicURL, addr)
}
