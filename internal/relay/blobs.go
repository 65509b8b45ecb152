package relay

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/relay/store"
)

// Blobs (Blossom BUD-01/02/11): PUT /upload stores a file (upload.go); GET and HEAD
// /media/<sha256>[.ext] (and /<sha256>[.ext], BUD-01's root form) serve it. A blob is served
// only to a pubkey that uploaded it, or that can read an event written by one of its uploaders
// whose imeta (or x) tag names it: a private channel's screenshot is readable exactly by who
// can read the message, and knowing its hash is not enough. docs/security.md has the rules.

// DefaultMaxBlobBytes is the largest blob accepted when Config.MaxBlobBytes is 0.
const DefaultMaxBlobBytes = 16 << 20

const (
	// maxGetAuthLifetime bounds a Blossom get token (kind 24242, t=get): unlike NIP-98 it is a
	// bearer token until it expires, so a long-lived one leaked from a log would go on working.
	maxGetAuthLifetime = time.Hour
	// maxBlobOwners bounds the uploaders whose events are looked through for a reader.
	maxBlobOwners = 1000
)

// blobRoute matches a blob path: /media/<sha256> or /<sha256>, with an optional extension.
var blobRoute = regexp.MustCompile(`^/(?:media/)?([0-9a-f]{64})(?:\.[a-z0-9]{1,8})?$`)

// blobPath returns the hash a request path names, if it is a blob path.
func blobPath(p string) (string, bool) {
	m := blobRoute.FindStringSubmatch(p)
	if m == nil {
		return "", false
	}
	return m[1], true
}

// blobError answers a blob request with status and msg, as the JSON error every relay route
// gives and in BUD-01's X-Reason header.
func blobError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("X-Reason", msg)
	writeError(w, status, msg)
}

// enterBlob admits a blob request as the bridge does (not while closing, Origin allowed) and
// checks that the store holds blobs; the caller calls r.handlers.Done when it returns true.
func (r *Relay) enterBlob(w http.ResponseWriter, req *http.Request) bool {
	if !r.enter() {
		blobError(w, http.StatusServiceUnavailable, protocol.ReasonError.Msg("relay is shutting down"))
		return false
	}
	switch {
	case !r.originAllowed(req):
		blobError(w, http.StatusForbidden, protocol.ReasonForbidden.Msg("origin not allowed"))
	case r.blobs == nil:
		blobError(w, http.StatusNotImplemented, "this relay's store keeps no blobs")
	default:
		return true
	}
	r.handlers.Done()
	return false
}

// serveBlob answers GET and HEAD of a blob path.
func (r *Relay) serveBlob(w http.ResponseWriter, req *http.Request, sha string) {
	if !r.enterBlob(w, req) {
		return
	}
	defer r.handlers.Done()
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		blobError(w, http.StatusMethodNotAllowed, "method not allowed: use GET or HEAD")
		return
	}
	reader, status, err := r.blobReader(req, sha)
	if err != nil {
		blobError(w, status, err.Error())
		return
	}
	ok, err := r.mayReadBlob(req.Context(), reader, sha)
	if err != nil {
		status, msg := r.readFailure(err, "blob lookup")
		blobError(w, status, msg)
		return
	}
	if !ok {
		// The same answer as for a blob that does not exist: a reader who may not see it
		// must not learn that it is here.
		blobError(w, http.StatusNotFound, "blob not found")
		return
	}
	b, content, err := r.blobs.OpenBlob(req.Context(), sha)
	if errors.Is(err, store.ErrBlobNotFound) {
		blobError(w, http.StatusNotFound, "blob not found")
		return
	}
	if err != nil {
		r.log.Error("open blob", "sha256", sha, "err", err)
		storeFailure(w, err, protocol.ReasonError.Msg("could not read blob"))
		return
	}
	defer content.Close()
	h := w.Header()
	h.Set("Content-Type", blobType(b.Type))
	// Uploaded content must never run as this origin's page: no sniffing, no scripts, no
	// same-origin rights even for HTML or SVG.
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	// Access-checked: a shared cache must not hand it to someone else.
	h.Set("Cache-Control", "private, max-age=300")
	h.Set("ETag", `"`+sha+`"`)
	http.ServeContent(w, req, "", time.Time{}, content)
}

// blobReader authenticates a blob read: a Blossom get token (kind 24242, t=get) that names this
// blob or this server and expires within maxGetAuthLifetime, or a NIP-98 event for this URL and
// method (replays refused, as on the bridge). It returns the reader's pubkey.
func (r *Relay) blobReader(req *http.Request, sha string) (string, int, error) {
	header := req.Header.Get("Authorization")
	if header == "" {
		return "", http.StatusUnauthorized, errors.New("authorization required: a Blossom get token (kind 24242) or NIP-98")
	}
	now := r.now()
	if protocol.IsBlobAuth(header) {
		a, err := protocol.VerifyBlobAuth(header, protocol.BlobGet, now)
		switch {
		case err != nil:
			return "", http.StatusUnauthorized, err
		case a.Expires.After(now.Add(maxGetAuthLifetime)):
			return "", http.StatusUnauthorized, errors.New("blossom auth: a get token may live at most one hour")
		case !a.NamesBlob(sha) && !a.NamesServer(r.serverNames()...):
			return "", http.StatusUnauthorized, errors.New("blossom auth: a get token must name this blob (x) or this server (server)")
		case len(a.Servers) > 0 && !a.NamesServer(r.serverNames()...):
			return "", http.StatusUnauthorized, errors.New("blossom auth: the token is for another server")
		}
		return a.Pubkey, 0, nil
	}
	urls, err := r.selfURLs()
	var ev *nostr.Event
	for _, u := range urls {
		if ev, err = protocol.VerifyHTTPAuth(header, protocol.HTTPBase(u)+req.URL.Path, req.Method, nil, now); err == nil {
			break
		}
	}
	if err != nil {
		return "", http.StatusUnauthorized, err
	}
	fresh, err := r.st.MarkAuthSeen(req.Context(), ev.ID, now, ev.CreatedAt.Time().Add(2*protocol.AuthWindow))
	if err != nil {
		return "", http.StatusInternalServerError, errors.New(protocol.ReasonError.Msg("replay check failed"))
	}
	if !fresh {
		return "", http.StatusUnauthorized, errors.New("NIP-98: replay detected")
	}
	return ev.PubKey, 0, nil
}

// mayReadBlob is the blob read rule: an uploader may read it; anyone else only when they can
// read an event, written by an uploader, whose imeta names it (store.IndexedTags indexes those
// hashes as #x). The event lookup is an ordinary read under the reader's Access, so channel
// membership, deletion and the kind rules decide it exactly as they decide that event. An
// event by someone who never uploaded the bytes grants nothing: otherwise anyone who learned a
// private blob's hash could publish it into an open channel and read it from there.
func (r *Relay) mayReadBlob(ctx context.Context, reader, sha string) (bool, error) {
	owners, err := r.blobs.BlobOwners(ctx, sha, maxBlobOwners)
	if err != nil || len(owners) == 0 {
		return false, err
	}
	if slices.Contains(owners, reader) {
		return true, nil
	}
	f := store.Filter{Filter: nostr.Filter{Authors: owners, Tags: nostr.TagMap{"x": {sha}}}}
	qctx, done, err := r.startRead(ctx, reader, []store.Filter{f})
	if err != nil {
		return false, err
	}
	defer done()
	evs, err := r.st.Query(qctx, r.acl.access(reader), f, 1)
	return len(evs) > 0, err
}

// serverNames are the names a Blossom server tag may give this relay: each of its URLs' host,
// with and without the port, and the loopback spellings for a loopback relay.
func (r *Relay) serverNames() []string {
	urls, _ := r.selfURLs()
	var out []string
	for _, raw := range urls {
		u, err := url.Parse(raw)
		if err != nil {
			continue
		}
		hosts := []string{strings.ToLower(u.Hostname())}
		if hosts[0] == "127.0.0.1" {
			hosts = append(hosts, "localhost", "::1")
		}
		for _, h := range hosts {
			out = append(out, h)
			if p := u.Port(); p != "" {
				if strings.Contains(h, ":") {
					h = "[" + h + "]"
				}
				out = append(out, h+":"+p)
			}
		}
	}
	return out
}

// blobURL is where a blob is served, as the descriptor and imeta tags give it: upstream Buzz's
// /media/ path with an extension for the type (BUD-02 wants one), on the relay's first URL.
func (r *Relay) blobURL(sha, typ string) string {
	base := ""
	if urls, err := r.selfURLs(); err == nil && len(urls) > 0 {
		base = protocol.HTTPBase(urls[0])
	}
	return base + "/media/" + sha + blobExt(typ)
}

// blobExts are the extensions of the types people attach most; any other type gets .bin.
var blobExts = map[string]string{
	"image/png": ".png", "image/jpeg": ".jpg", "image/gif": ".gif", "image/webp": ".webp", "image/svg+xml": ".svg",
	"video/mp4": ".mp4", "video/webm": ".webm", "audio/mpeg": ".mp3", "audio/mp4": ".m4a", "audio/ogg": ".ogg",
	"application/pdf": ".pdf", "application/json": ".json", "application/zip": ".zip",
	"text/plain": ".txt", "text/markdown": ".md", "text/csv": ".csv",
}

func blobExt(typ string) string {
	if e, ok := blobExts[typ]; ok {
		return e
	}
	return ".bin"
}

// blobType is the Content-Type a blob is served with: its stored type, else BUD-01's default.
func blobType(typ string) string {
	if typ == "" {
		return "application/octet-stream"
	}
	return typ
}
