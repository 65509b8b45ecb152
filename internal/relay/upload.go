package relay

import (
	"bufio"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/buzz-harness/buzz/internal/protocol"
)

// blobDescriptor is BUD-02's answer to an upload.
type blobDescriptor struct {
	URL      string `json:"url"`
	SHA256   string `json:"sha256"`
	Size     int64  `json:"size"`
	Type     string `json:"type"`
	Uploaded int64  `json:"uploaded"`
}

var (
	errBlobNotNamed = errors.New("blossom auth: the token's x tags do not name the uploaded bytes")
	errBlobMismatch = errors.New("X-SHA-256 does not match the uploaded bytes")
)

// handleUpload is PUT /upload (and upstream's older /media/upload): a Blossom upload, authorised
// by a kind-24242 token with t=upload whose x tags name the bytes' SHA-256. Only members of
// some channel may upload (the relay is a team's, not a public file host), and no upload may
// exceed MaxBlobBytes. The body streams into the store, which hashes it; nothing is kept unless
// the hash is one the token names.
func (r *Relay) handleUpload(w http.ResponseWriter, req *http.Request) {
	if !r.enterBlob(w, req) {
		return
	}
	defer r.handlers.Done()
	if req.Method != http.MethodPut {
		w.Header().Set("Allow", http.MethodPut)
		blobError(w, http.StatusMethodNotAllowed, "method not allowed: use PUT")
		return
	}
	now := r.now()
	a, err := protocol.VerifyBlobAuth(req.Header.Get("Authorization"), protocol.BlobUpload, now)
	switch {
	case err != nil:
		blobError(w, http.StatusUnauthorized, err.Error())
		return
	case len(a.Hashes) == 0:
		blobError(w, http.StatusUnauthorized, "blossom auth: an upload token must name the blob's sha256 in an x tag")
		return
	case len(a.Servers) > 0 && !a.NamesServer(r.serverNames()...):
		blobError(w, http.StatusUnauthorized, "blossom auth: the token is for another server")
		return
	case !r.acl.memberOfAny(a.Pubkey):
		blobError(w, http.StatusForbidden, protocol.ReasonRestricted.Msg("only channel members may upload"))
		return
	}
	claimed := strings.ToLower(strings.TrimSpace(req.Header.Get("X-SHA-256")))
	if claimed != "" && !a.NamesBlob(claimed) {
		blobError(w, http.StatusUnauthorized, "blossom auth: the token does not name X-SHA-256")
		return
	}
	max := r.cfg.MaxBlobBytes
	if req.ContentLength > max {
		blobError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("blob exceeds %d bytes", max))
		return
	}
	body := bufio.NewReader(http.MaxBytesReader(w, req.Body, max))
	typ := uploadType(req.Header.Get("Content-Type"), body)
	up, err := r.blobs.PutBlob(req.Context(), body, typ, a.Pubkey, now.Unix(), func(sha string, _ int64) error {
		switch {
		case claimed != "" && sha != claimed:
			return errBlobMismatch
		case !a.NamesBlob(sha):
			return errBlobNotNamed
		}
		return nil
	})
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		blobError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("blob exceeds %d bytes", max))
		return
	case errors.Is(err, errBlobMismatch):
		blobError(w, http.StatusConflict, err.Error())
		return
	case errors.Is(err, errBlobNotNamed):
		blobError(w, http.StatusForbidden, err.Error())
		return
	case err != nil:
		if req.Context().Err() == nil {
			r.log.Error("store blob", "pubkey", a.Pubkey, "err", err)
		}
		storeFailure(w, err, protocol.ReasonError.Msg("could not store blob"))
		return
	}
	status := http.StatusOK
	if up.New {
		status = http.StatusCreated
	}
	// The type this uploader declared, not the first upload's: the answer must not tell
	// whether someone else already holds the same bytes.
	writeJSON(w, status, blobDescriptor{URL: r.blobURL(up.SHA256, typ), SHA256: up.SHA256, Size: up.Size, Type: typ, Uploaded: up.Uploaded})
}

// uploadType is the MIME type an upload is stored under: the declared Content-Type, or, when
// none (or only octet-stream) is given, what the first bytes look like.
func uploadType(declared string, body *bufio.Reader) string {
	if t := protocol.MediaType(declared); t != "" && t != "application/octet-stream" {
		return t
	}
	head, _ := body.Peek(512)
	if t := protocol.MediaType(http.DetectContentType(head)); t != "" {
		return t
	}
	return "application/octet-stream"
}

// memberOfAny reports whether pubkey is a member of some live channel (DMs included).
func (a *acl) memberOfAny(pubkey string) bool {
	a.mu.RLock()
	defer a.mu.RUnlock()
	for _, c := range a.ch {
		if _, ok := c.Members[pubkey]; ok && !c.Deleted {
			return true
		}
	}
	return false
}
