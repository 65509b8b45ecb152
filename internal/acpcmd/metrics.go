package acpcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// metricsListenAddr is where --metrics-addr listens: a bare ":9103" (or "9103") is loopback, so
// metrics reach the network only when an address says so.
func metricsListenAddr(addr string) string {
	if !strings.Contains(addr, ":") {
		addr = ":" + addr
	}
	if strings.HasPrefix(addr, ":") {
		return "127.0.0.1" + addr
	}
	return addr
}

// serveMetrics serves handler at /metrics on ln and prints its URL; stop shuts it down and
// returns once it has stopped serving.
func serveMetrics(ln net.Listener, handler http.Handler, stderr io.Writer) (stop func()) {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", handler)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintln(stderr, "buzz-acp metrics:", err)
		}
	}()
	fmt.Fprintf(stderr, "buzz-acp metrics: http://%s/metrics\n", ln.Addr())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	}
}
