package console

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/client"
	"github.com/buzz-harness/buzz/internal/protocol"
)

// Attachments in the console: the composer uploads a file through POST /api/upload (the owner's
// key signs the Blossom token) and posts the message with its imeta tag; images on the stack's
// relay are shown inline through GET /api/blob/<sha256>, which fetches them with the owner's
// key. The browser never talks to the relay itself, and only raster images are ever served from
// the console's origin: an uploaded HTML or SVG file served here could act with the token.

// maxConsoleUpload is the largest file the composer uploads (the relay's default cap).
const maxConsoleUpload = 16 << 20

// inlineTypes are the image types the page shows inline.
var inlineTypes = []string{"image/png", "image/jpeg", "image/gif", "image/webp"}

// attachment is one file of a message as the browser sees it.
type attachment struct {
	URL    string `json:"url"`
	Type   string `json:"type,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	Size   int64  `json:"size,omitempty"`
	Dim    string `json:"dim,omitempty"`
	Alt    string `json:"alt,omitempty"`
	// Src is the console path that shows it inline (an image on the stack's relay), else "".
	Src string `json:"src,omitempty"`
}

// blobBridge is what attachments need of the relay's bridge.
type blobBridge interface {
	Upload(ctx context.Context, data []byte, typ string) (client.BlobDescriptor, error)
	FetchBlob(ctx context.Context, rawURL string, maxBytes int64) ([]byte, string, error)
	BlobHash(rawURL string) (string, bool)
	BaseURL() string
}

// attachments are an event's imeta files, with Src set for the ones the page may show inline.
func (c *chat) attachments(tags nostr.Tags) []attachment {
	var out []attachment
	for _, a := range protocol.Attachments(tags) {
		at := attachment{URL: a.URL, Type: a.Type, SHA256: a.SHA256, Size: a.Size, Dim: a.Dim, Alt: a.Alt}
		if sha, ok := c.bridge.BlobHash(a.URL); ok && slices.Contains(inlineTypes, a.Type) && (a.SHA256 == "" || a.SHA256 == sha) {
			at.Src = "/api/blob/" + sha
		}
		out = append(out, at)
	}
	return out
}

// imetaOf checks the composer's attachments, which must be files it uploaded to the stack's
// relay (a blob URL there, with the hash the URL names), and returns them as NIP-92 attachments.
func (c *chat) imetaOf(list []attachment) ([]protocol.Attachment, error) {
	if len(list) > protocol.MaxAttachments {
		return nil, &badRequest{fmt.Sprintf("at most %d attachments per message", protocol.MaxAttachments)}
	}
	out := make([]protocol.Attachment, 0, len(list))
	for _, a := range list {
		sha, ok := c.bridge.BlobHash(a.URL)
		if !ok || strings.ToLower(a.SHA256) != sha {
			return nil, &badRequest{"an attachment must be a file uploaded here (its relay URL and sha256)"}
		}
		p := protocol.Attachment{URL: a.URL, Type: protocol.MediaType(a.Type), SHA256: sha, Dim: a.Dim, Alt: cleanAlt(a.Alt)}
		if a.Size > 0 {
			p.Size = a.Size
		}
		out = append(out, p)
	}
	return out, nil
}

// cleanAlt keeps an alt text to one line of at most 200 runes.
func cleanAlt(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 200 {
		s = string(r[:200])
	}
	return s
}

// upload is POST /api/upload: the request body is the file, its Content-Type the file's type.
// The answer is the attachment the composer sends with its message.
func (s *Server) upload(w http.ResponseWriter, r *http.Request) {
	if s.chat == nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no chat in activity-only mode"})
		return
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxConsoleUpload))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeJSON(w, http.StatusRequestEntityTooLarge, map[string]string{"error": fmt.Sprintf("file is larger than %d MiB", maxConsoleUpload>>20)})
		return
	case err != nil:
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "could not read the file: " + err.Error()})
		return
	case len(data) == 0:
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "the file is empty"})
		return
	}
	d, err := s.chat.bridge.Upload(r.Context(), data, protocol.MediaType(r.Header.Get("Content-Type")))
	if err != nil {
		writeJSON(w, statusFor(err), map[string]string{"error": "upload failed: " + err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, attachment{URL: d.URL, Type: d.Type, SHA256: d.SHA256, Size: d.Size})
}

// blob is GET /api/blob/{sha}: an image from the stack's relay, fetched with the owner's key
// (so the relay's read rule applies to the owner), served only when it is a raster image.
func (s *Server) blob(w http.ResponseWriter, r *http.Request) {
	sha := r.PathValue("sha")
	if s.chat == nil || !protocol.IsHex64(sha) {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "not found"})
		return
	}
	data, typ, err := s.chat.bridge.FetchBlob(r.Context(), s.chat.bridge.BaseURL()+"/media/"+sha, maxConsoleUpload)
	if err != nil {
		status := statusFor(err)
		var he *client.HTTPError
		if errors.As(err, &he) && he.Status == http.StatusNotFound {
			status = http.StatusNotFound
		}
		writeJSON(w, status, map[string]string{"error": err.Error()})
		return
	}
	typ = protocol.MediaType(typ)
	if !slices.Contains(inlineTypes, typ) {
		writeJSON(w, http.StatusUnsupportedMediaType, map[string]string{"error": "only images are shown here"})
		return
	}
	w.Header().Set("Content-Type", typ)
	w.Header().Set("Cache-Control", "private, max-age=300")
	w.Write(data)
}
