// Package opshttp serves the operations endpoints of buzz's binaries (Prometheus metrics, the
// relay's probes) on an address of their own, apart from the traffic they are about.
package opshttp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ListenAddr is where a --metrics-addr listens: a bare ":9102" (or "9102") is loopback, so
// metrics reach the network only when an address says so.
func ListenAddr(addr string) string {
	if !strings.Contains(addr, ":") {
		addr = ":" + addr
	}
	if strings.HasPrefix(addr, ":") {
		return "127.0.0.1" + addr
	}
	return addr
}

// CheckAddr reports whether addr is host:port, :port or a bare port.
func CheckAddr(addr string) bool {
	_, port, err := net.SplitHostPort(ListenAddr(addr))
	n, perr := strconv.Atoi(port)
	return err == nil && perr == nil && n >= 0 && n <= 65535
}

// Serve serves handler on ln and prints "<name>: http://<addr>/metrics" on stderr; stop shuts
// it down and returns once it has stopped serving.
func Serve(ln net.Listener, handler http.Handler, name string, stderr io.Writer) (stop func()) {
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintln(stderr, name+":", err)
		}
	}()
	fmt.Fprintf(stderr, "%s: http://%s/metrics\n", name, ln.Addr())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	}
}
