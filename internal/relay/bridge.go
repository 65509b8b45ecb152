package relay

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/relay/store"
)

// bridgeHandler serves one authenticated bridge route.
type bridgeHandler func(w http.ResponseWriter, req *http.Request, pubkey string, body []byte)

// bridge wraps a handler with the Origin check, POST-only, the body size limit and NIP-98
// verification (u/method/payload, ±60 s, replayed auth ids refused).
func (r *Relay) bridge(h bridgeHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		if !r.enter() {
			writeError(w, http.StatusServiceUnavailable, protocol.ReasonError.Msg("relay is shutting down"))
			return
		}
		defer r.handlers.Done()
		if !r.originAllowed(req) {
			writeError(w, http.StatusForbidden, protocol.ReasonForbidden.Msg("origin not allowed"))
			return
		}
		if req.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			writeError(w, http.StatusMethodNotAllowed, "method not allowed: use POST")
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, MaxFrameBytes))
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				writeError(w, http.StatusRequestEntityTooLarge, protocol.ReasonInvalid.Msg("body exceeds 524288 bytes"))
				return
			}
			writeError(w, http.StatusBadRequest, protocol.ReasonInvalid.Msg("could not read body"))
			return
		}
		header := req.Header.Get("Authorization")
		if header == "" {
			writeError(w, http.StatusUnauthorized, "missing Nostr auth")
			return
		}
		now := r.now()
		var ev *nostr.Event
		urls, err := r.selfURLs()
		for _, u := range urls {
			if ev, err = protocol.VerifyHTTPAuth(header, protocol.HTTPBase(u)+req.URL.Path, req.Method, body, now); err == nil {
				break
			}
		}
		if err != nil {
			writeError(w, http.StatusUnauthorized, err.Error())
			return
		}
		// Without the payload hash a captured header would authorise any body.
		if len(body) > 0 && !protocol.HasTag(ev.Tags, "payload") {
			writeError(w, http.StatusUnauthorized, "NIP-98: a request with a body must carry its payload hash")
			return
		}
		// Keep the id until it could no longer pass the freshness check anyway.
		expires := ev.CreatedAt.Time().Add(2 * protocol.AuthWindow)
		fresh, err := r.st.MarkAuthSeen(req.Context(), ev.ID, now, expires)
		if err != nil {
			storeFailure(w, err, protocol.ReasonError.Msg("replay check failed"))
			return
		}
		if !fresh {
			writeError(w, http.StatusUnauthorized, "NIP-98: replay detected")
			return
		}
		h(w, req, ev.PubKey, body)
	}
}

func (r *Relay) bridgeEvents(w http.ResponseWriter, req *http.Request, pubkey string, body []byte) {
	ev, err := parseEvent(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, protocol.ReasonInvalid.Msg(err.Error()))
		return
	}
	res := r.submit(req.Context(), ev, fromBridge(pubkey))
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
		return nil, errors.New(protocol.ReasonInvalid.Msg("body must be a JSON array of filters"))
	}
	if len(raws) == 0 || len(raws) > maxFilters {
		return nil, errors.New(protocol.ReasonInvalid.Msg("send 1 to 10 filters"))
	}
	out := make([]store.Filter, 0, len(raws))
	for _, raw := range raws {
		f, err := parseFilter(raw)
		if err != nil {
			return nil, errors.New(protocol.ReasonInvalid.Msg(err.Error()))
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
		writeError(w, filterRefusalStatus(msg), msg)
		return
	}
	if err := presenceAuthors(filters); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	qctx, done, err := r.startRead(req.Context(), pubkey, filters)
	if err != nil {
		status, msg := r.readFailure(err, "query")
		writeError(w, status, msg)
		return
	}
	access := r.acl.access(pubkey)
	out := []nostr.Event{}
	seen, answered := map[string]bool{}, map[string]bool{}
	for _, f := range filters {
		if isPresenceQuery(f.Filter) {
			// Presence is not stored; answer from memory, as upstream's bridge does.
			out = append(out, r.presenceEvents(f.Filter, answered)...)
			continue
		}
		evs, err := r.st.Query(qctx, access, f, effectiveLimit(f))
		if err != nil {
			done()
			status, msg := r.readFailure(err, "query")
			writeError(w, status, msg)
			return
		}
		for _, ev := range evs {
			if !seen[ev.ID] {
				seen[ev.ID] = true
				out = append(out, ev)
			}
		}
	}
	done() // a client slow to take the answer must not hold its read slots meanwhile
	writeJSON(w, http.StatusOK, out)
}

func (r *Relay) bridgeCount(w http.ResponseWriter, req *http.Request, pubkey string, body []byte) {
	filters, err := parseFilterArray(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if msg := r.checkFilters(pubkey, filters); msg != "" {
		writeError(w, filterRefusalStatus(msg), msg)
		return
	}
	qctx, done, err := r.startCount(req.Context(), pubkey)
	if err != nil {
		status, msg := r.readFailure(err, "count")
		writeError(w, status, msg)
		return
	}
	n, err := r.st.Count(qctx, r.acl.access(pubkey), filters)
	done()
	if err != nil {
		status, msg := r.readFailure(err, "count")
		writeError(w, status, msg)
		return
	}
	writeJSON(w, http.StatusOK, map[string]int64{"count": n})
}

// storeFailure answers a failed store call: 503 while the relay is shutting down (clients retry
// that), else 500 with msg.
func storeFailure(w http.ResponseWriter, err error, msg string) {
	if errors.Is(err, store.ErrClosed) {
		writeError(w, http.StatusServiceUnavailable, protocol.ReasonError.Msg("relay is shutting down"))
		return
	}
	writeError(w, http.StatusInternalServerError, msg)
}

// filterRefusalStatus is the HTTP status of a checkFilters refusal: a filter past the limits is
// a bad request, a read rule's refusal forbidden.
func filterRefusalStatus(msg string) int {
	if protocol.ReasonOf(msg) == protocol.ReasonInvalid {
		return http.StatusBadRequest
	}
	return http.StatusForbidden
}
