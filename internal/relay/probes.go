package relay

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"
)

// Probes: /healthz (live: the process serves HTTP) and /readyz (ready: it can take writes), on
// the relay's own address and on --metrics-addr. A node that is not ready answers 503 with why,
// so a load balancer stops sending it clients until its database is back.

// readyTimeout bounds the store ping of /readyz and buzz_db_up.
const readyTimeout = time.Second

// pinger is a store that can tell whether its database answers (both backends are).
type pinger interface {
	Ping(ctx context.Context) error
}

// pingReuse is how long a ping's answer is reused: /readyz may be public, and a burst of
// probes (or scrapes) must not become a burst of database round trips.
const pingReuse = 500 * time.Millisecond

// pingCache holds the last ping's answer; its mutex also makes concurrent probes wait for one
// ping rather than each sending its own.
type pingCache struct {
	mu  sync.Mutex
	at  time.Time
	err error
}

// storeReachable pings the store, or reuses an answer under pingReuse old.
func (r *Relay) storeReachable() error {
	if r.ping == nil {
		return nil
	}
	c := &r.pinged
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.at.IsZero() && time.Since(c.at) < pingReuse {
		return c.err
	}
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	c.err, c.at = r.ping.Ping(ctx), time.Now()
	return c.err
}

// Ready reports why the relay cannot take writes now, or nil: it is shutting down, its store
// does not answer within readyTimeout, or (on a shared database) its change feed is down.
func (r *Relay) Ready() error {
	r.connsMu.RLock()
	closed := r.closed
	r.connsMu.RUnlock()
	if closed {
		return errors.New("relay is shutting down")
	}
	if err := r.storeReachable(); err != nil {
		// The probe may be public: the cause (a host, a port) goes to the log only.
		r.log.Debug("readiness: store ping failed", "err", err)
		return errors.New("database unreachable")
	}
	if r.shared != nil && !r.shared.Live() {
		return errors.New("change feed from the shared database is down")
	}
	return nil
}

func (r *Relay) handleLive(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (r *Relay) handleReady(w http.ResponseWriter, _ *http.Request) {
	if err := r.Ready(); err != nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}
