package relay

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/relay/store"
)

// bridgeHandler serves one authenticated bridge route.
type bridgeHandler func(w http.ResponseWriter, req *http.Request, pubkey string, body []byte)

// bridge wraps a handler with POST-only, the body size limit and NIP-98 verification
// (u/method/payload, ±60 s, replayed auth ids refused).
func (r *Relay) bridge(h bridgeHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			writeError(w, http.StatusMethodNotAllowed, "method not allowed: use POST")
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, MaxFrameBytes))
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				writeError(w, http.StatusRequestEntityTooLarge, "invalid: body exceeds 524288 bytes")
				return
			}
			writeError(w, http.StatusBadRequest, "invalid: could not read body")
			return
		}
		header := req.Header.Get("Authorization")
		if header == "" {
			writeError(w, http.StatusUnauthorized, "missing Nostr auth")
			return
		}
		now := r.now()
		var ev *nostr.Event
		for _, u := range r.expectedHTTPURLs(req) {
			if ev, err = protocol.VerifyHTTPAuth(header, u, req.Method, body, now); err == nil {
				break
			}
		}
		if err != nil {
			writeError(w, http.StatusUnauthorized, err.Error())
			return
		}
		// Keep the id until it could no longer pass the freshness check anyway.
		expires := ev.CreatedAt.Time().Add(2 * protocol.AuthWindow)
		fresh, err := r.st.MarkAuthSeen(req.Context(), ev.ID, now, expires)
		if err != nil {
			storeFailure(w, err, "error: replay check failed")
			return
		}
		if !fresh {
			writeError(w, http.StatusUnauthorized, "NIP-98: replay detected")
			return
		}
		h(w, req, ev.PubKey, body)
	}
}

// expectedHTTPURLs are the u values NIP-98 accepts: http(s)://<Host><path> (https when the
// public URL is wss://) and the public URL's own base.
func (r *Relay) expectedHTTPURLs(req *http.Request) []string {
	scheme := "http://"
	if strings.HasPrefix(r.cfg.PublicURL, "wss://") || strings.HasPrefix(r.cfg.PublicURL, "https://") {
		scheme = "https://"
	}
	urls := []string{scheme + req.Host + req.URL.Path}
	if r.cfg.PublicURL != "" {
		urls = append(urls, protocol.HTTPBase(r.cfg.PublicURL)+req.URL.Path)
	}
	return urls
}

func (r *Relay) bridgeEvents(w http.ResponseWriter, req *http.Request, pubkey string, body []byte) {
	ev, err := parseEvent(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid: "+err.Error())
		return
	}
	res := r.submit(req.Context(), ev, pubkey, true)
	if !res.OK {
		writeError(w, res.Status, res.Msg)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"event_id": ev.ID, "accepted": true, "message": res.Msg})
}

// parseFilterArray reads the bridge's body: a JSON array of 1..10 filters.
func parseFilterArray(body []byte) ([]store.Filter, error) {
	var raws []json.RawMessage
	if err := json.Unmarshal(bytes.TrimSpace(body), &raws); err != nil {
		return nil, errors.New("invalid: body must be a JSON array of filters")
	}
	if len(raws) == 0 || len(raws) > maxFilters {
		return nil, errors.New("invalid: send 1 to 10 filters")
	}
	out := make([]store.Filter, 0, len(raws))
	for _, raw := range raws {
		f, err := parseFilter(raw)
		if err != nil {
			return nil, errors.New("invalid: " + err.Error())
		}
		out = append(out, f)
	}
	return out, nil
}

func (r *Relay) bridgeQuery(w http.ResponseWriter, req *http.Request, pubkey string, body []byte) {
	filters, err := parseFilterArray(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if msg := r.checkFilters(pubkey, filters); msg != "" {
		writeError(w, http.StatusForbidden, msg)
		return
	}
	out := []nostr.Event{}
	seen := map[string]bool{}
	for _, f := range filters {
		evs, err := r.st.Query(req.Context(), r.acl.access(pubkey), f, effectiveLimit(f))
		if err != nil {
			r.log.Error("bridge query", "err", err)
			storeFailure(w, err, "error: query failed")
			return
		}
		for _, ev := range evs {
			if !seen[ev.ID] {
				seen[ev.ID] = true
				out = append(out, ev)
			}
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (r *Relay) bridgeCount(w http.ResponseWriter, req *http.Request, pubkey string, body []byte) {
	filters, err := parseFilterArray(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if msg := r.checkFilters(pubkey, filters); msg != "" {
		writeError(w, http.StatusForbidden, msg)
		return
	}
	n, err := r.st.Count(req.Context(), r.acl.access(pubkey), filters)
	if err != nil {
		storeFailure(w, err, "error: count failed")
		return
	}
	writeJSON(w, http.StatusOK, map[string]int64{"count": n})
}

// storeFailure answers a failed store call: 503 while the relay is shutting down (clients retry
// that), else 500 with msg.
func storeFailure(w http.ResponseWriter, err error, msg string) {
	if errors.Is(err, store.ErrClosed) {
		writeError(w, http.StatusServiceUnavailable, "error: relay is shutting down")
		return
	}
	writeError(w, http.StatusInternalServerError, msg)
}
