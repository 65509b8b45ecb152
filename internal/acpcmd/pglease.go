package acpcmd

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
)

// A PostgreSQL lease (--lease postgres://…) lets a standby on another machine wait for the agent
// and take over when the holder dies. It is a session-level advisory lock per agent and relay,
// held by one connection: the server drops it when that connection ends, which for a killed
// process is at once and for a dead machine is when the server's TCP keepalive gives up (set
// below to about 11 seconds).
const (
	pgLeasePoll      = time.Second     // how often a standby tries again
	pgLeasePing      = 2 * time.Second // how often the holder checks its connection
	pgLeasePingLimit = 5 * time.Second // a ping slower than this counts as a lost lease
)

// pgLease is a held PostgreSQL lease.
type pgLease struct {
	conn *pgx.Conn
	stop chan struct{} // closed by release
	done chan struct{} // closed once the watcher has returned
}

// pgLeaseKey is the advisory lock key for one agent on one relay: the same agent and relay,
// however the URL is spelled, give the same key.
func pgLeaseKey(pubkey, relayURL string) int64 {
	sum := sha256.Sum256([]byte("buzz-acp lease|" + pubkey + "|" + normalizeRelay(relayURL)))
	return int64(binary.BigEndian.Uint64(sum[:8]))
}

// takePGLease connects to dsn and waits until it holds the lease for pubkey on every relay,
// logging once that it is a standby and who holds the lease. It returns when the lease is held
// or ctx ends. Held, it is watched until release: if it is lost, onLost is called once, on the
// watcher's goroutine, with why.
func takePGLease(ctx context.Context, dsn, pubkey string, relays []string, log *slog.Logger, onLost func(error)) (*pgLease, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("--lease: %w", err)
	}
	host, _ := os.Hostname()
	// The standby names the holder from this.
	cfg.RuntimeParams["application_name"] = fmt.Sprintf("buzz-acp pid %d on %s", os.Getpid(), host)
	// A dead holder machine leaves no FIN: the server's keepalive must find its connection dead.
	cfg.RuntimeParams["tcp_keepalives_idle"] = "5"
	cfg.RuntimeParams["tcp_keepalives_interval"] = "2"
	cfg.RuntimeParams["tcp_keepalives_count"] = "3"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("--lease: connect: %w", err)
	}
	keys := make([]int64, len(relays))
	for i, r := range relays {
		keys[i] = pgLeaseKey(pubkey, r)
	}
	waiting := false
	for {
		held, err := tryLocks(ctx, conn, keys)
		if err != nil {
			_ = conn.Close(context.Background())
			return nil, fmt.Errorf("--lease: %w", err)
		}
		if held < 0 {
			if waiting {
				log.Info("lease taken over; this buzz-acp is now active", "agent", pubkey)
			}
			l := &pgLease{conn: conn, stop: make(chan struct{}), done: make(chan struct{})}
			go func() {
				defer close(l.done)
				l.watch(onLost)
			}()
			return l, nil
		}
		if !waiting {
			waiting = true
			log.Info("standby: another buzz-acp holds the lease; waiting to take over",
				"agent", pubkey, "relay", normalizeRelay(relays[held]), "holder", leaseHolder(ctx, conn, keys[held]))
		}
		select {
		case <-ctx.Done():
			_ = conn.Close(context.Background())
			return nil, ctx.Err()
		case <-time.After(pgLeasePoll):
		}
	}
}

// tryLocks takes every key or none: it returns -1 when all are held, else the index of a key
// another session holds (the ones taken before it are released).
func tryLocks(ctx context.Context, conn *pgx.Conn, keys []int64) (int, error) {
	for i, k := range keys {
		var ok bool
		if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", k).Scan(&ok); err != nil {
			return 0, err
		}
		if !ok {
			for _, taken := range keys[:i] {
				if _, err := conn.Exec(ctx, "SELECT pg_advisory_unlock($1)", taken); err != nil {
					return 0, err
				}
			}
			return i, nil
		}
	}
	return -1, nil
}

// leaseHolder names the session holding key, from its application_name ("" if not visible).
func leaseHolder(ctx context.Context, conn *pgx.Conn, key int64) string {
	var name string
	// A bigint advisory key is stored as classid (high 32 bits) and objid (low 32 bits).
	_ = conn.QueryRow(ctx, `SELECT coalesce(a.application_name, '') FROM pg_locks l
		JOIN pg_stat_activity a ON a.pid = l.pid
		WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
		  AND l.classid = $1::bigint::oid AND l.objid = $2::bigint::oid LIMIT 1`,
		int64(uint64(key)>>32), int64(uint64(key)&0xffffffff)).Scan(&name)
	return name
}

// watch pings the lease's connection until release; a failed or slow ping reports the lease lost
// (another buzz-acp may take it over now, so this one must stop answering).
func (l *pgLease) watch(onLost func(error)) {
	t := time.NewTicker(pgLeasePing)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), pgLeasePingLimit)
		err := l.conn.Ping(ctx)
		cancel()
		if err != nil {
			onLost(fmt.Errorf("lease lost: the connection holding it failed: %w", err))
			return
		}
	}
}

// release gives the lease back (closing the connection drops the locks); it returns once the
// watcher has stopped.
func (l *pgLease) release() {
	close(l.stop)
	<-l.done
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = l.conn.Close(ctx)
}
