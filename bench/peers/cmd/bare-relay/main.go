// Command bare-relay serves package bare (the verify-only ceiling) for the peer benchmark.
//
//	bare-relay [-addr 127.0.0.1:0]
//
// It prints "listening on ws://ADDR" on stderr once it accepts connections.
package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"

	"github.com/buzz-harness/buzz/bench/peers/bare"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	flag.Parse()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bare-relay: %v\n", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "bare-relay listening on ws://%s\n", ln.Addr())
	if err := http.Serve(ln, bare.New()); err != nil {
		fmt.Fprintf(os.Stderr, "bare-relay: %v\n", err)
		os.Exit(1)
	}
}
