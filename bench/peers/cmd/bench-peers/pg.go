package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"
)

// startPair starts two nodes of buzz-relay on a fresh schema of p.pg, sharing the relay key as
// every node of one relay must, and returns their URLs and one stop for both.
func startPair(p peer, dir string) (urlA, urlB string, stop func(), err error) {
	dsn, drop, err := freshSchema(p.pg)
	if err != nil {
		return "", "", nil, err
	}
	dirA, dirB := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for _, d := range []string{dirA, dirB} {
		if err := os.Mkdir(d, 0o700); err != nil {
			drop()
			return "", "", nil, err
		}
	}
	urlA, stopA, err := start(p, append(p.args(dirA), "--database", dsn), dirA)
	if err != nil {
		drop()
		return "", "", nil, fmt.Errorf("node A: %w", err)
	}
	key, err := os.ReadFile(filepath.Join(dirA, "relay.key"))
	if err == nil {
		err = os.WriteFile(filepath.Join(dirB, "relay.key"), key, 0o600)
	}
	if err != nil {
		stopA()
		drop()
		return "", "", nil, fmt.Errorf("sharing the relay key: %w", err)
	}
	urlB, stopB, err := start(p, append(p.args(dirB), "--database", dsn), dirB)
	if err != nil {
		stopA()
		drop()
		return "", "", nil, fmt.Errorf("node B: %w", err)
	}
	return urlA, urlB, func() { stopB(); stopA(); drop() }, nil
}

// freshSchema creates an empty schema and returns dsn pointing its search_path there, and a
// drop for afterwards: every run starts from an empty store, as the other peers do.
func freshSchema(dsn string) (string, func(), error) {
	b := make([]byte, 6)
	rand.Read(b)
	schema := "bench_" + hex.EncodeToString(b)
	exec := func(sql string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, sql)
		return err
	}
	if err := exec("CREATE SCHEMA " + schema); err != nil {
		return "", nil, fmt.Errorf("-pg: %w", err)
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return "", nil, fmt.Errorf("-pg: %w", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), func() { _ = exec("DROP SCHEMA " + schema + " CASCADE") }, nil
}
