package relay

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/relay/store"
	"github.com/buzz-harness/buzz/internal/relay/store/postgres"
)

// MaxFrameBytes is the largest WebSocket frame (and HTTP body) the relay accepts.
const MaxFrameBytes = 512 * 1024

const (
	maxFilters       = 10
	maxSubscriptions = 1024
	maxSubIDLen      = 256
	defaultLimit     = 500
	maxLimit         = 2000
	sendBuffer       = 1000
)

// Default limits (docs/security.md lists them all).
const (
	DefaultQueryTimeout   = 10 * time.Second
	DefaultMaxQueuedBytes = 8 << 20
	DefaultWriteTimeout   = 10 * time.Second

	// Flood bounds (#28): generous, since one loopback key (a harness, a test) may publish fast.
	DefaultMaxDMOpensPerMinute = 60
	DefaultMaxWritesPerSecond  = 200 // in bursts of up to 10× this
	DefaultMaxConnsPerIP       = 256
	DefaultAuthTimeout         = 5 * time.Second
	DefaultMaxFutureSkew       = 15 * time.Minute
)

// Config configures a Relay.
type Config struct {
	// DataDir holds relay.db and relay.key. It is created 0700 if missing; an existing one
	// that group or others may access is refused (the database holds private channels).
	DataDir string
	// Database is a postgres:// URL for the store, shared by every node given the same one
	// (and the same relay.key); "" keeps the SQLite relay.db in DataDir.
	Database string
	// ReconnectDelay is the pause before a node reconnects its lost change feed from the
	// shared database; 0 = one second. Only with Database.
	ReconnectDelay time.Duration
	// PublicURL (RELAY_URL) is the relay's public ws(s):// URL. When set, NIP-42 relay tags and
	// NIP-98 u tags must name it; when empty, only the listen address and loopback names with
	// the listen port are accepted. The request's Host header is never trusted.
	PublicURL string
	// AllowedOrigins are the browser origins (scheme://host[:port]) allowed to open a WebSocket
	// or call the bridge. Requests that carry no Origin (CLI, harness) are always allowed; any
	// other Origin is refused. Default none.
	AllowedOrigins []string
	// ListenAddr is the address the relay is served on (host:port); Serve fills it from its
	// listener when empty. It names the relay in NIP-42/NIP-98 checks when PublicURL is empty.
	ListenAddr string
	// QueryTimeout bounds every store query (REQ, COUNT, bridge); 0 = DefaultQueryTimeout.
	QueryTimeout time.Duration
	// CountTimeout bounds every COUNT (WS and bridge); 0 = DefaultCountTimeout. It should be
	// shorter than QueryTimeout, which is also how long a plain read may wait for a reader.
	CountTimeout time.Duration
	// MaxQueuedBytes caps the bytes waiting to be written to one WebSocket client, live events
	// and a REQ's history each: a client that lets live events pile up beyond it is
	// disconnected, history waits for room. 0 = DefaultMaxQueuedBytes.
	MaxQueuedBytes int64
	// WriteTimeout is how long one frame may take to reach a client before it is dropped as
	// stalled; 0 = DefaultWriteTimeout.
	WriteTimeout time.Duration
	// ReminderPoll is how often due NIP-ER reminders are looked for; 0 = DefaultReminderPoll.
	ReminderPoll time.Duration
	// MaxFilterValues caps each list of a filter (ids, authors, kinds, one tag's values) in a
	// REQ, COUNT or bridge query; 0 = DefaultMaxFilterValues.
	MaxFilterValues int
	// MaxSubBytesPerConn caps the filter bytes (as sent) of one connection's live
	// subscriptions, MaxSubBytesPerKey those of one pubkey's on all its connections;
	// 0 = DefaultMaxSubBytesPerConn, DefaultMaxSubBytesPerKey.
	MaxSubBytesPerConn int64
	MaxSubBytesPerKey  int64
	// MaxResultBytes bounds the stored results (REQ history) held relay-wide between their read
	// and their write to the socket; 0 = DefaultMaxResultBytes, and never below a few pages.
	MaxResultBytes int64
	// MaxBlobBytes is the largest blob PUT /upload accepts; 0 = DefaultMaxBlobBytes.
	MaxBlobBytes int64
	// Flood bounds (docs/security.md); for each, 0 = its Default…, negative = no bound.
	// MaxDMOpensPerMinute is the DM commands (41010/41011) one pubkey may send a minute;
	// MaxWritesPerSecond the events one pubkey may publish a second (bursts of 10×);
	// MaxConnsPerIP the WebSocket connections open from one IP address at once; AuthTimeout how
	// long a socket may stay without NIP-42 AUTH before it is closed; MaxFutureSkew how far past
	// now an event's created_at may be.
	MaxDMOpensPerMinute int
	MaxWritesPerSecond  int
	MaxConnsPerIP       int
	AuthTimeout         time.Duration
	MaxFutureSkew       time.Duration
	Logger              *slog.Logger     // nil = discard
	Now                 func() time.Time // nil = time.Now

	wrapStore func(store.Store) store.Store // tests: instrument the store
}

// Relay is the whole relay as an http.Handler.
type Relay struct {
	cfg   Config
	log   *slog.Logger
	now   func() time.Time
	st    store.Store
	blobs store.Blobs // blobs.go; nil if the store keeps none
	sk    string
	pk    string
	acl   *acl
	mux   *http.ServeMux
	info  []byte
	admin channelLocks // serializes each channel's admin actions (check, write, cache update)

	stampMu sync.Mutex
	stamps  map[stampKey]int64

	presence  presenceBook // latest kind 20001 per pubkey (presence.go)
	observers observerBook // kind-24200 owners (observer.go)
	telemetry *rateBook    // kind-24200 telemetry per agent (rules.go observerTelemetryRate)

	connsMu  sync.RWMutex
	conns    map[*conn]struct{}
	closed   bool
	handlers sync.WaitGroup // WebSocket connections and bridge requests being served

	gate     *queryGate
	results  *resultBudget // stored results in flight (results.go)
	subBytes subBudget     // filter bytes of each pubkey's live subscriptions (subs.go)
	origins  map[string]bool

	listenMu   sync.RWMutex
	listenAddr string

	peakQueued atomic.Int64 // highest bytes ever queued on one connection (tests, limits)

	dmOpens *rateLimit // DM commands per pubkey (MaxDMOpensPerMinute)
	writes  *rateLimit // events per pubkey (MaxWritesPerSecond)
	ipConns ipCounter  // open WebSocket connections per IP (MaxConnsPerIP)
	metrics *metrics   // metrics.go
	ping    pinger     // the store, unwrapped (/readyz)
	pinged  pingCache

	turnMetrics *rateBook // kind 44200 per agent (rules.go turnMetricRate)

	shared        shared // nil unless several nodes may share the store
	stopFollow    func()
	stopReminders func()
}

// Open opens the store, loads or creates the relay key and runs migrations.
func Open(cfg Config) (*Relay, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("relay: DataDir is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.QueryTimeout = cmp.Or(cfg.QueryTimeout, DefaultQueryTimeout)
	cfg.CountTimeout = cmp.Or(cfg.CountTimeout, DefaultCountTimeout)
	cfg.MaxQueuedBytes = cmp.Or(cfg.MaxQueuedBytes, DefaultMaxQueuedBytes)
	cfg.WriteTimeout = cmp.Or(cfg.WriteTimeout, DefaultWriteTimeout)
	cfg.MaxBlobBytes = cmp.Or(cfg.MaxBlobBytes, DefaultMaxBlobBytes)
	cfg.MaxDMOpensPerMinute = bound(cfg.MaxDMOpensPerMinute, DefaultMaxDMOpensPerMinute)
	cfg.MaxWritesPerSecond = bound(cfg.MaxWritesPerSecond, DefaultMaxWritesPerSecond)
	cfg.MaxConnsPerIP = bound(cfg.MaxConnsPerIP, DefaultMaxConnsPerIP)
	cfg.AuthTimeout = bound(cfg.AuthTimeout, DefaultAuthTimeout)
	cfg.MaxFutureSkew = bound(cfg.MaxFutureSkew, DefaultMaxFutureSkew)
	cfg.MaxResultBytes = max(cmp.Or(cfg.MaxResultBytes, DefaultMaxResultBytes), 2*pageTicket)
	cfg.MaxFilterValues = cmp.Or(cfg.MaxFilterValues, DefaultMaxFilterValues)
	cfg.MaxSubBytesPerConn = cmp.Or(cfg.MaxSubBytesPerConn, DefaultMaxSubBytesPerConn)
	cfg.MaxSubBytesPerKey = cmp.Or(cfg.MaxSubBytesPerKey, DefaultMaxSubBytesPerKey)
	if cfg.MaxFilterValues < 0 || cfg.MaxSubBytesPerConn < 0 || cfg.MaxSubBytesPerKey < 0 {
		return nil, errors.New("relay: filter and subscription limits must be positive")
	}
	if cfg.MaxBlobBytes < 0 {
		return nil, fmt.Errorf("relay: max blob bytes must be positive, got %d", cfg.MaxBlobBytes)
	}
	origins, err := parseOrigins(cfg.AllowedOrigins)
	if err != nil {
		return nil, err
	}
	if cfg.PublicURL != "" {
		if _, err := relayURLs(cfg.PublicURL, ""); err != nil {
			return nil, err
		}
	}
	if err := privateDir(cfg.DataDir); err != nil {
		return nil, err
	}
	sk, err := loadOrCreateKey(filepath.Join(cfg.DataDir, "relay.key"))
	if err != nil {
		return nil, err
	}
	pk, _ := nostr.GetPublicKey(sk)
	var st store.Store
	m := newMetrics()
	st, err = openStore(cfg, m.acquire)
	if err != nil {
		return nil, fmt.Errorf("relay: open store: %w", err)
	}
	sh, _ := st.(shared)
	rs, _ := st.(store.Reminders)
	blobs, _ := st.(store.Blobs)
	ping, _ := st.(pinger)
	if cfg.wrapStore != nil {
		st = cfg.wrapStore(st)
	}
	chans, err := st.Channels(context.Background())
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("relay: load channels: %w", err)
	}
	r := &Relay{
		cfg:        cfg,
		log:        cfg.Logger,
		now:        cfg.Now,
		st:         st,
		blobs:      blobs,
		sk:         sk,
		pk:         pk,
		acl:        newACL(chans),
		stamps:     map[stampKey]int64{},
		conns:      map[*conn]struct{}{},
		gate:       newQueryGate(),
		results:    newResultBudget(cfg.MaxResultBytes),
		origins:    origins,
		listenAddr: cfg.ListenAddr,
		shared:     sh,
		dmOpens:    newRateLimit(float64(cfg.MaxDMOpensPerMinute)/60, float64(cfg.MaxDMOpensPerMinute), cfg.Now),
		writes:     newRateLimit(float64(cfg.MaxWritesPerSecond), 10*float64(cfg.MaxWritesPerSecond), cfg.Now),
		ipConns:    ipCounter{max: cfg.MaxConnsPerIP, n: map[string]int{}},
		ping:       ping,
		metrics:    m,

		turnMetrics: newRateBook(turnMetricLimit, turnMetricWindow),
		telemetry:   newRateBook(ObserverTelemetryPerSecond, time.Second),
	}
	m.watch(r)
	if sh != nil {
		if err := r.startFollowing(); err != nil {
			st.Close()
			return nil, err
		}
	}
	if rs != nil {
		r.stopReminders = r.startReminders(rs)
	}
	r.info = r.nip11()
	r.mux = http.NewServeMux()
	r.mux.HandleFunc("/", r.handleRoot)
	r.mux.HandleFunc("/info", r.handleInfo)
	r.mux.HandleFunc("/health", r.handleLive) // ours before the probes; kept for scripts that use it
	r.mux.HandleFunc("/healthz", r.handleLive)
	r.mux.HandleFunc("/readyz", r.handleReady)
	r.mux.HandleFunc("/events", r.bridge(r.bridgeEvents))
	r.mux.HandleFunc("/query", r.bridge(r.bridgeQuery))
	r.mux.HandleFunc("/count", r.bridge(r.bridgeCount))
	r.mux.HandleFunc("/upload", r.handleUpload)
	r.mux.HandleFunc("/media/upload", r.handleUpload) // upstream's older path, still tried by its CLI
	return r, nil
}

// openStore picks the backend: PostgreSQL when Database is set, else SQLite in DataDir. A
// PostgreSQL pool reports its connection waits to acquire.
func openStore(cfg Config, acquire prometheus.Observer) (store.Store, error) {
	if cfg.Database == "" {
		return store.Open(filepath.Join(cfg.DataDir, "relay.db"))
	}
	if !strings.HasPrefix(cfg.Database, "postgres://") && !strings.HasPrefix(cfg.Database, "postgresql://") {
		return nil, errors.New("database must be a postgres:// URL")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return postgres.Open(ctx, cfg.Database, postgres.ObserveAcquire(func(d time.Duration) { acquire.Observe(d.Seconds()) }))
}

// loadOrCreateKey reads the relay's hex secret key, creating it (0600) on first start so
// relay-signed events keep verifying across restarts.
func loadOrCreateKey(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		sk, perr := protocol.ParseSecretKey(string(b))
		if perr != nil {
			return "", fmt.Errorf("relay: %s: %w", path, perr)
		}
		return sk, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("relay: read key: %w", err)
	}
	sk := nostr.GeneratePrivateKey()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("relay: create key: %w", err)
	}
	if _, err := f.WriteString(sk + "\n"); err != nil {
		f.Close()
		return "", fmt.Errorf("relay: write key: %w", err)
	}
	return sk, f.Close()
}

// PublicKey is the relay's signing pubkey (hex); 39000-series events verify against it.
func (r *Relay) PublicKey() string { return r.pk }

// ServeHTTP serves WebSocket, NIP-11, /info, the probes (/health, /healthz, /readyz) and the HTTP bridge.
func (r *Relay) ServeHTTP(w http.ResponseWriter, req *http.Request) { r.mux.ServeHTTP(w, req) }

// Close drops every WebSocket client, waits until every connection and bridge request being
// served has ended, and closes the store. Requests that arrive meanwhile are turned away.
func (r *Relay) Close() error {
	r.connsMu.Lock()
	if r.closed {
		r.connsMu.Unlock()
		return nil
	}
	r.closed = true
	conns := make([]*conn, 0, len(r.conns))
	for c := range r.conns {
		conns = append(conns, c)
	}
	r.connsMu.Unlock()
	for _, c := range conns {
		c.shutdown()
	}
	r.handlers.Wait()
	if r.stopReminders != nil {
		r.stopReminders()
	}
	if r.stopFollow != nil {
		r.stopFollow()
	}
	return r.st.Close()
}

// enter admits one bridge request, unless the relay is closing; the caller calls
// r.handlers.Done when it is done.
func (r *Relay) enter() bool {
	r.connsMu.Lock()
	defer r.connsMu.Unlock()
	if r.closed {
		return false
	}
	r.handlers.Add(1)
	return true
}

// privateDir creates dir 0700, or checks that an existing one is closed to group and others:
// relay.db holds private channels and relay.key the relay's signing key.
func privateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("relay: data dir: %w", err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("relay: data dir: %w", err)
	}
	if mode := fi.Mode().Perm(); mode&0o077 != 0 {
		return fmt.Errorf("relay: data dir %s is open to group or others (mode %04o); run: chmod 700 %s", dir, mode, dir)
	}
	return nil
}

func (r *Relay) handleRoot(w http.ResponseWriter, req *http.Request) {
	if sha, ok := blobPath(req.URL.Path); ok {
		r.serveBlob(w, req, sha)
		return
	}
	if req.URL.Path != "/" {
		writeError(w, http.StatusNotFound, "not found")
		return
	}
	if strings.EqualFold(req.Header.Get("Upgrade"), "websocket") {
		if !r.originAllowed(req) {
			writeError(w, http.StatusForbidden, protocol.ReasonForbidden.Msg("origin not allowed"))
			return
		}
		r.serveWS(w, req)
		return
	}
	if strings.Contains(req.Header.Get("Accept"), "application/nostr+json") {
		r.handleInfo(w, req)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	io.WriteString(w, "Buzz relay: connect with a Nostr client over WebSocket.\n")
}

func (r *Relay) handleInfo(w http.ResponseWriter, req *http.Request) {
	w.Header().Set("Content-Type", "application/nostr+json")
	w.Header().Set("Access-Control-Allow-Origin", "*")
	w.Write(r.info)
}

func (r *Relay) nip11() []byte {
	doc := map[string]any{
		"name":                 "Buzz Relay",
		"description":          "Buzz-compatible relay (Go)",
		"pubkey":               r.pk,
		"self":                 r.pk,
		"software":             "https://github.com/buzz-harness/buzz",
		"version":              "0.1.0",
		"supported_nips":       []int{1, 2, 10, 11, 16, 17, 23, 25, 29, 33, 38, 42, 45, 50},
		"supported_extensions": []string{"nip-er"},
		"limitation": map[string]any{
			"max_message_length": MaxFrameBytes,
			"max_subscriptions":  maxSubscriptions,
			"max_filters":        maxFilters,
			"max_limit":          maxLimit,
			"max_subid_length":   maxSubIDLen,
			"max_event_tags":     maxEventTags,
			"auth_required":      true,
			"restricted_writes":  true,
			"payment_required":   false,
			"due_delivery_mode":  "push", // NIP-ER: due reminders are re-sent to their author
		},
	}
	b, _ := json.Marshal(doc)
	return b
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

// Serve serves r on ln until ctx is done, then shuts down: stops accepting, drops WebSocket
// clients and closes the relay.
func Serve(ctx context.Context, ln net.Listener, r *Relay) error {
	r.listenMu.Lock()
	if r.listenAddr == "" {
		r.listenAddr = ln.Addr().String()
	}
	r.listenMu.Unlock()
	srv := &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		r.Close()
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Drain bridge requests first (Shutdown stops the listener and waits for them), then close
	// the relay: that ends the WebSocket connections, which Shutdown does not track, and the
	// store. The other order fails requests that were already being served.
	err := srv.Shutdown(sctx)
	if err != nil {
		// A request still running (a client not reading its answer, say) would keep
		// r.Close waiting: cut its connection.
		srv.Close()
	}
	r.Close()
	<-errc
	return err
}
