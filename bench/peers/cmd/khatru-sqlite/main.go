// Command khatru-sqlite is the khatru peer for the benchmark: khatru v0.18.0 storing events in
// SQLite through fiatjaf/eventstore's sqlite3 backend (mattn/go-sqlite3, cgo), set to WAL with
// synchronous=NORMAL like the Buzz relay's store.
//
//	khatru-sqlite [-addr 127.0.0.1:0] -db PATH
//
// For a like-for-like comparison it behaves as the Buzz relay does on the wire: it sends a
// NIP-42 challenge on connect and refuses EVENT and REQ until the connection has authenticated.
// It prints "listening on ws://ADDR" on stderr once it accepts connections.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"

	"github.com/fiatjaf/eventstore/sqlite3"
	"github.com/fiatjaf/khatru"
	"github.com/nbd-wtf/go-nostr"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	path := flag.String("db", "", "SQLite database file (required)")
	flag.Parse()
	if *path == "" {
		fmt.Fprintln(os.Stderr, "khatru-sqlite: -db is required")
		os.Exit(2)
	}
	db := &sqlite3.SQLite3Backend{DatabaseURL: "file:" + *path + "?_journal_mode=WAL&_synchronous=NORMAL&_busy_timeout=10000"}
	if err := db.Init(); err != nil {
		fmt.Fprintf(os.Stderr, "khatru-sqlite: open %s: %v\n", *path, err)
		os.Exit(1)
	}
	defer db.Close()

	rl := khatru.NewRelay()
	rl.Log = log.New(io.Discard, "", 0)
	rl.StoreEvent = append(rl.StoreEvent, db.SaveEvent)
	rl.QueryEvents = append(rl.QueryEvents, db.QueryEvents)
	rl.CountEvents = append(rl.CountEvents, db.CountEvents)
	rl.DeleteEvent = append(rl.DeleteEvent, db.DeleteEvent)
	rl.ReplaceEvent = append(rl.ReplaceEvent, db.ReplaceEvent)
	rl.OnConnect = append(rl.OnConnect, khatru.RequestAuth)
	rl.RejectEvent = append(rl.RejectEvent, func(ctx context.Context, _ *nostr.Event) (bool, string) {
		if khatru.GetAuthed(ctx) == "" {
			return true, "auth-required: authenticate first"
		}
		return false, ""
	})
	rl.RejectFilter = append(rl.RejectFilter, func(ctx context.Context, _ nostr.Filter) (bool, string) {
		if khatru.GetAuthed(ctx) == "" {
			return true, "auth-required: authenticate first"
		}
		return false, ""
	})

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "khatru-sqlite: %v\n", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "khatru-sqlite listening on ws://%s\n", ln.Addr())
	if err := http.Serve(ln, rl); err != nil {
		fmt.Fprintf(os.Stderr, "khatru-sqlite: %v\n", err)
		os.Exit(1)
	}
}
