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
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/buzz-harness/buzz/internal/cmdflag"
	"github.com/buzz-harness/buzz/internal/relay"
)

// Defaults.
const (
	DefaultAddr    = "127.0.0.1:3000"
	DefaultDataDir = "./.buzz-relay"
)

// Command returns the relay command, named buzz-relay; `buzz relay` renames it.
func Command() *cobra.Command {
	var addr, dataDir, publicURL, database, origins string
	var queryTimeout, countTimeout, writeTimeout, reconnectDelay time.Duration
	var maxQueued, maxBlob, maxSubBytesConn, maxSubBytesKey, maxResult int64
	var maxFilterValues int
	cmd := &cobra.Command{
		Use:               "buzz-relay",
		Short:             "Run a Buzz-compatible relay: WebSocket, NIP-11 and the HTTP bridge on one port, SQLite storage",
		SilenceUsage:      true,
		SilenceErrors:     true,
		Args:              cobra.NoArgs,
		PersistentPreRunE: cmdflag.PreRun(os.Getenv),
		RunE: func(cmd *cobra.Command, _ []string) error {
			stderr := cmd.ErrOrStderr()
			// Listen first so a busy port fails fast without touching the data dir.
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("cannot listen on %s: %w", addr, err)
			}
			log := slog.New(slog.NewTextHandler(stderr, nil))
			r, err := relay.Open(relay.Config{
				DataDir: dataDir, Database: database, PublicURL: publicURL,
				AllowedOrigins: cmdflag.List(origins), QueryTimeout: queryTimeout, WriteTimeout: writeTimeout,
				MaxQueuedBytes: maxQueued, MaxBlobBytes: maxBlob, ReconnectDelay: reconnectDelay, Logger: log,
				CountTimeout: countTimeout, MaxFilterValues: maxFilterValues,
				MaxSubBytesPerConn: maxSubBytesConn, MaxSubBytesPerKey: maxSubBytesKey, MaxResultBytes: maxResult,
			})
			if err != nil {
				ln.Close()
				return err
			}
			fmt.Fprintf(stderr, "%s listening on ws://%s (data %s, relay pubkey %s)\n", cmd.CommandPath(), ln.Addr(), dataDir, r.PublicKey())
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
	f.Int64(&maxQueued, "max-queued-bytes", "BUZZ_MAX_QUEUED_BYTES", relay.DefaultMaxQueuedBytes, "bytes waiting to be written to one client before it is disconnected")
	f.Int64(&maxResult, "max-result-bytes", "BUZZ_MAX_RESULT_BYTES", relay.DefaultMaxResultBytes, "stored results (REQ history) held relay-wide between their read and their write to clients")
	f.Int64(&maxBlob, "max-blob-bytes", "BUZZ_MAX_BLOB_BYTES", relay.DefaultMaxBlobBytes, "largest file PUT /upload accepts (Blossom blobs: in --data-dir/blobs, or PostgreSQL with --database)")
	f.Duration(&reconnectDelay, "db-reconnect-delay", "BUZZ_RELAY_RECONNECT_DELAY", time.Second, "pause before a node reconnects its lost PostgreSQL change feed")
	return cmd
}
