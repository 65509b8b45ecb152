// Package relaycmd is the relay's command line: the buzz-relay binary and `buzz relay`.
package relaycmd

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/buzz-harness/buzz/internal/cmdflag"
	"github.com/buzz-harness/buzz/internal/opshttp"
	"github.com/buzz-harness/buzz/internal/relay"
)

// Defaults.
const (
	DefaultAddr    = "127.0.0.1:3000"
	DefaultDataDir = "./.buzz-relay"
)

// Command returns the relay command, named buzz-relay; `buzz relay` renames it.
func Command() *cobra.Command {
	var addr, dataDir, publicURL, database, origins, metricsAddr string
	var queryTimeout, countTimeout, writeTimeout, reconnectDelay time.Duration
	var maxQueued, maxBlob, maxSubBytesConn, maxSubBytesKey, maxResult int64
	var maxFilterValues int
	var fl floodFlags
	cmd := &cobra.Command{
		Use:               "buzz-relay",
		Short:             "Run a Buzz-compatible relay: WebSocket, NIP-11 and the HTTP bridge on one port, SQLite storage",
		SilenceUsage:      true,
		SilenceErrors:     true,
		Args:              cobra.NoArgs,
		PersistentPreRunE: cmdflag.PreRun(os.Getenv),
		RunE: func(cmd *cobra.Command, _ []string) error {
			stderr := cmd.ErrOrStderr()
			metricsAddr, err := metricsAddress(metricsAddr, os.Getenv)
			if err != nil {
				return err
			}
			// Listen first so a busy port fails fast without touching the data dir.
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("cannot listen on %s: %w", addr, err)
			}
			var metricsLn net.Listener
			if metricsAddr != "" {
				if metricsLn, err = net.Listen("tcp", opshttp.ListenAddr(metricsAddr)); err != nil {
					ln.Close()
					return fmt.Errorf("--metrics-addr: %w", err)
				}
				defer metricsLn.Close()
			}
			log := slog.New(slog.NewTextHandler(stderr, nil))
			r, err := relay.Open(relay.Config{
				DataDir: dataDir, Database: database, PublicURL: publicURL,
				AllowedOrigins: cmdflag.List(origins), QueryTimeout: queryTimeout, WriteTimeout: writeTimeout,
				MaxQueuedBytes: maxQueued, MaxBlobBytes: maxBlob, ReconnectDelay: reconnectDelay, Logger: log,
				MaxDMOpensPerMinute: noBound(fl.dmOpens), MaxWritesPerSecond: noBound(fl.writes),
				MaxConnsPerIP: noBound(fl.connsPerIP), AuthTimeout: noBound(fl.authTimeout), MaxFutureSkew: noBound(fl.futureSkew),
				CountTimeout: countTimeout, MaxFilterValues: maxFilterValues,
				MaxSubBytesPerConn: maxSubBytesConn, MaxSubBytesPerKey: maxSubBytesKey, MaxResultBytes: maxResult,
			})
			if err != nil {
				ln.Close()
				return err
			}
			fmt.Fprintf(stderr, "%s listening on ws://%s (data %s, relay pubkey %s)\n", cmd.CommandPath(), ln.Addr(), dataDir, r.PublicKey())
			if metricsLn != nil {
				defer opshttp.Serve(metricsLn, OpsHandler(r), cmd.CommandPath()+" metrics", stderr)()
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if err := relay.Serve(ctx, ln, r); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			log.Info("relay stopped")
			return nil
		},
	}
	f := cmdflag.On(cmd.Flags())
	f.String(&addr, "addr", "BUZZ_BIND_ADDR", DefaultAddr, "listen address (WebSocket, NIP-11 and HTTP bridge)")
	f.String(&dataDir, "data-dir", "BUZZ_RELAY_DATA_DIR", DefaultDataDir, "data directory for relay.db and relay.key")
	f.String(&publicURL, "public-url", "RELAY_URL", "", "public ws(s):// URL checked by NIP-42/NIP-98 (default: the listen address and loopback names; the Host header is never trusted)")
	f.String(&database, "database", "BUZZ_DATABASE_URL", "", "postgres:// URL: store events in PostgreSQL, shared by every node given it (default: SQLite in --data-dir)")
	f.String(&origins, "allowed-origins", "BUZZ_ALLOWED_ORIGINS", "", "browser origins (scheme://host[:port], comma-separated) allowed to connect; requests without an Origin are always allowed")
	f.Duration(&queryTimeout, "query-timeout", "BUZZ_QUERY_TIMEOUT", relay.DefaultQueryTimeout, "deadline for every store query (REQ, COUNT, bridge)")
	f.Duration(&countTimeout, "count-timeout", "BUZZ_COUNT_TIMEOUT", relay.DefaultCountTimeout, "deadline for a COUNT (WS or bridge); keep it below --query-timeout")
	f.Int(&maxFilterValues, "max-filter-values", "BUZZ_MAX_FILTER_VALUES", relay.DefaultMaxFilterValues, "most values in one list of a filter (ids, authors, kinds, one tag)")
	f.Int64(&maxSubBytesConn, "max-sub-bytes-per-conn", "BUZZ_MAX_SUB_BYTES_PER_CONN", relay.DefaultMaxSubBytesPerConn, "filter bytes one connection's live subscriptions may hold")
	f.Int64(&maxSubBytesKey, "max-sub-bytes-per-key", "BUZZ_MAX_SUB_BYTES_PER_KEY", relay.DefaultMaxSubBytesPerKey, "filter bytes one pubkey's live subscriptions may hold on all its connections")
	f.Duration(&writeTimeout, "write-timeout", "BUZZ_WRITE_TIMEOUT", relay.DefaultWriteTimeout, "how long one frame may take to reach a client before it is dropped as stalled")
	f.Int64(&maxQueued, "max-queued-bytes", "BUZZ_MAX_QUEUED_BYTES", relay.DefaultMaxQueuedBytes, "bytes of live events waiting for one client before it is disconnected (a REQ's history waits for room under the same cap, counted apart)")
	f.Int64(&maxResult, "max-result-bytes", "BUZZ_MAX_RESULT_BYTES", relay.DefaultMaxResultBytes, "stored results (REQ history) held relay-wide between their read and their write to clients")
	f.Int64(&maxBlob, "max-blob-bytes", "BUZZ_MAX_BLOB_BYTES", relay.DefaultMaxBlobBytes, "largest file PUT /upload accepts (Blossom blobs: in --data-dir/blobs, or PostgreSQL with --database)")
	f.String(&metricsAddr, "metrics-addr", "BUZZ_METRICS_ADDR", "", "serve Prometheus /metrics and the /healthz, /readyz probes on this address (a bare :port is loopback; BUZZ_METRICS_PORT=<port> is :<port>; default: off)")
	f.Duration(&reconnectDelay, "db-reconnect-delay", "BUZZ_RELAY_RECONNECT_DELAY", time.Second, "pause before a node reconnects its lost PostgreSQL change feed")
	fl.define(f)
	return cmd
}

// floodFlags are the relay's flood bounds (docs/security.md); 0 turns one off.
type floodFlags struct {
	dmOpens, writes, connsPerIP int
	authTimeout, futureSkew     time.Duration
}

func (fl *floodFlags) define(f cmdflag.Set) {
	f.Int(&fl.dmOpens, "max-dm-opens-per-min", "BUZZ_MAX_DM_OPENS_PER_MIN", relay.DefaultMaxDMOpensPerMinute, "DM commands (kinds 41010/41011) one pubkey may send a minute (0 = no bound)")
	f.Int(&fl.writes, "max-writes-per-sec", "BUZZ_MAX_WRITES_PER_SEC", relay.DefaultMaxWritesPerSecond, "events one pubkey may publish a second, in bursts of up to 10x (0 = no bound)")
	f.Int(&fl.connsPerIP, "max-conns-per-ip", "BUZZ_MAX_CONNS_PER_IP", relay.DefaultMaxConnsPerIP, "WebSocket connections open at once from one IP address; on loopback that is every local client together (0 = no bound)")
	f.Duration(&fl.authTimeout, "auth-timeout", "BUZZ_AUTH_TIMEOUT", relay.DefaultAuthTimeout, "close a WebSocket that has not authenticated (NIP-42) within this (0 = never)")
	f.Duration(&fl.futureSkew, "max-future-skew", "BUZZ_MAX_FUTURE_SKEW", relay.DefaultMaxFutureSkew, "refuse events whose created_at is further ahead of the relay's clock than this (0 = no bound)")
}

// noBound maps a flag's 0 ("no bound") to relay.Config's negative (its 0 is "the default").
func noBound[T int | time.Duration](v T) T {
	if v == 0 {
		return -1
	}
	return v
}

// metricsAddress is where metrics are served: --metrics-addr / BUZZ_METRICS_ADDR, else
// upstream's BUZZ_METRICS_PORT as a loopback :port ("" = off).
func metricsAddress(flag string, getenv func(string) string) (string, error) {
	if flag != "" {
		if !opshttp.CheckAddr(flag) {
			return "", fmt.Errorf("--metrics-addr / BUZZ_METRICS_ADDR: %q is not host:port or :port", flag)
		}
		return flag, nil
	}
	port := strings.TrimSpace(getenv("BUZZ_METRICS_PORT"))
	if port == "" {
		return "", nil
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return "", fmt.Errorf("BUZZ_METRICS_PORT=%q is not a port number", port)
	}
	return ":" + port, nil
}

// OpsHandler serves r's operations endpoints on the metrics address: /metrics and the probes.
func OpsHandler(r *relay.Relay) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", r.MetricsHandler())
	mux.Handle("GET /healthz", r)
	mux.Handle("GET /readyz", r)
	return mux
}
