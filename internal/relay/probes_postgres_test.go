package relay_test

import (
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/buzz-harness/buzz/internal/relay"
	"github.com/buzz-harness/buzz/internal/relay/relaytest"
	"github.com/buzz-harness/buzz/internal/relay/store/postgres/pgtest"
)

// pgLink is a TCP hop between a relay node and PostgreSQL that a test can cut, as a network
// partition or a stopped database server would, and mend again on the same address.
type pgLink struct {
	t      *testing.T
	target string
	addr   string

	mu    sync.Mutex
	ln    net.Listener
	conns []net.Conn
}

func newPGLink(t *testing.T, target string) *pgLink {
	l := &pgLink{t: t, target: target, addr: "127.0.0.1:0"}
	l.mend()
	t.Cleanup(l.cut)
	return l
}

// mend listens again (on the address of the first listen) and forwards what it accepts.
func (l *pgLink) mend() {
	l.t.Helper()
	var ln net.Listener
	eventually(l.t, "the link's port to be free again", func() bool {
		var err error
		ln, err = net.Listen("tcp", l.addr)
		return err == nil
	})
	l.mu.Lock()
	l.ln, l.addr = ln, ln.Addr().String()
	l.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", l.target)
			if err != nil {
				c.Close()
				continue
			}
			l.mu.Lock()
			l.conns = append(l.conns, c, up)
			l.mu.Unlock()
			go func() { io.Copy(up, c); up.Close() }()
			go func() { io.Copy(c, up); c.Close() }()
		}
	}()
}

// cut stops listening and drops every forwarded connection.
func (l *pgLink) cut() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ln != nil {
		l.ln.Close()
		l.ln = nil
	}
	for _, c := range l.conns {
		c.Close()
	}
	l.conns = nil
}

func TestReadinessFailsWhileThePostgreSQLDatabaseIsUnreachableAndRecovers(t *testing.T) {
	u, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	link := newPGLink(t, u.Host)
	u.Host = link.addr
	s := relaytest.StartWith(t, func(c *relay.Config) { c.Database = u.String(); c.ReconnectDelay = 50 * time.Millisecond })
	if code, body := probe(t, s.HTTPURL+"/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz with the database up: %d %s", code, body)
	}

	link.cut()
	eventually(t, "/readyz to fail while the database is unreachable", func() bool {
		code, body := probe(t, s.HTTPURL+"/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "database unreachable")
	})
	if code, body := probe(t, s.HTTPURL+"/readyz"); strings.Contains(body, link.addr) || strings.Contains(body, "127.0.0.1") {
		t.Fatalf("/readyz names the database's address to anyone who asks: %d %s", code, body)
	}
	if code, _ := probe(t, s.HTTPURL+"/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz while the database is unreachable: %d, want 200", code)
	}
	m := scrapeRelay(t, s.Relay)
	if m.get("buzz_db_up") != 0 {
		t.Fatalf("buzz_db_up = %v while the database is unreachable", m.get("buzz_db_up"))
	}

	link.mend()
	eventually(t, "/readyz to pass once the database is back", func() bool {
		code, _ := probe(t, s.HTTPURL+"/readyz")
		return code == http.StatusOK
	})
	if m := scrapeRelay(t, s.Relay); m.get("buzz_db_pool_acquire_duration_seconds_count") == 0 {
		t.Fatal("no pool acquisition timed on PostgreSQL")
	}
}
