// Command buzz-relay runs the Buzz-compatible relay.
//
//	buzz-relay [--addr 127.0.0.1:3000] [--data-dir ./.buzz-relay] [--public-url ws://host:port]
//
// Flags fall back to BUZZ_BIND_ADDR, BUZZ_RELAY_DATA_DIR and RELAY_URL.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/buzz-harness/buzz/internal/relay"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func run(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("buzz-relay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", envOr("BUZZ_BIND_ADDR", "127.0.0.1:3000"), "listen address (env BUZZ_BIND_ADDR)")
	dataDir := fs.String("data-dir", envOr("BUZZ_RELAY_DATA_DIR", "./.buzz-relay"), "data directory for relay.db and relay.key (env BUZZ_RELAY_DATA_DIR)")
	publicURL := fs.String("public-url", os.Getenv("RELAY_URL"), "public ws(s):// URL for NIP-42/NIP-98 checks (env RELAY_URL)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 1
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "buzz-relay: unexpected argument %q\n", fs.Arg(0))
		return 1
	}
	// Listen first so a busy port fails fast without touching the data dir.
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(stderr, "buzz-relay: cannot listen on %s: %v\n", *addr, err)
		return 1
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	r, err := relay.Open(relay.Config{DataDir: *dataDir, PublicURL: *publicURL, Logger: log})
	if err != nil {
		ln.Close()
		fmt.Fprintf(stderr, "buzz-relay: %v\n", err)
		return 1
	}
	fmt.Fprintf(stderr, "buzz-relay listening on ws://%s (data %s, relay pubkey %s)\n", ln.Addr(), *dataDir, r.PublicKey())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := relay.Serve(ctx, ln, r); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(stderr, "buzz-relay: %v\n", err)
		return 1
	}
	log.Info("buzz-relay stopped")
	return 0
}
