package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	_ "image/gif" // image.DecodeConfig reads the dimensions of the formats registered here
	_ "image/jpeg"
	_ "image/png"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/buzz-harness/buzz/internal/client"
	"github.com/buzz-harness/buzz/internal/protocol"
)

// maxUploadBytes bounds what the CLI reads into memory to upload; the relay's own cap
// (--max-blob-bytes, 16 MiB by default) is usually lower and answers 413 past it.
const maxUploadBytes = 256 << 20

// uploadCommand is `buzz upload FILE`: the file stored on the relay (Blossom), its descriptor
// printed. Others can fetch it once a message they can read attaches it; `messages send --file`
// does both steps.
func (a *app) uploadCommand() *cobra.Command {
	return &cobra.Command{Use: "upload FILE", Short: "Store a file on the relay (Blossom) and print its url, sha256, size and type",
		Args: cobra.ExactArgs(1),
		RunE: a.run(func(ctx context.Context, cmd *cobra.Command) (any, error) {
			f, err := readUpload(cmd.Flags().Arg(0))
			if err != nil {
				return nil, err
			}
			b, err := a.bridge()
			if err != nil {
				return nil, err
			}
			return b.Upload(ctx, f.data, f.typ)
		})}
}

// uploadFile is a file read for upload.
type uploadFile struct {
	name string // the file's base name, the attachment's alt text
	data []byte
	typ  string // MIME type
	dim  string // WIDTHxHEIGHT for the images the standard library reads, else ""
}

// readUpload reads a regular file of at most maxUploadBytes and works out its type.
func readUpload(path string) (uploadFile, error) {
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return uploadFile{}, usageError("%s", unwrapPathError(err))
	case !fi.Mode().IsRegular():
		return uploadFile{}, usageError("%s is not a regular file", path)
	case fi.Size() > maxUploadBytes:
		return uploadFile{}, usageError("%s is %d bytes; the CLI uploads at most %d (256 MiB)", path, fi.Size(), maxUploadBytes)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return uploadFile{}, usageError("%s", unwrapPathError(err))
	}
	f := uploadFile{name: filepath.Base(path), data: data, typ: fileType(path, data)}
	if cfg, _, err := image.DecodeConfig(bytes.NewReader(data)); err == nil && strings.HasPrefix(f.typ, "image/") {
		f.dim = fmt.Sprintf("%dx%d", cfg.Width, cfg.Height)
	}
	return f, nil
}

// fileType is what the bytes say when they carry a signature (images, PDF, archives...), else
// what the file name says, else plain or binary as the bytes look.
func fileType(path string, data []byte) string {
	sniffed := protocol.MediaType(http.DetectContentType(data))
	if sniffed != "" && sniffed != "text/plain" && sniffed != "application/octet-stream" {
		return sniffed
	}
	if byName := protocol.MediaType(mime.TypeByExtension(strings.ToLower(filepath.Ext(path)))); byName != "" {
		return byName
	}
	if sniffed == "" {
		return "application/octet-stream"
	}
	return sniffed
}

// unwrapPathError drops the Go operation name ("open x: no such file" rather than
// "stat x: ...").
func unwrapPathError(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Path + ": " + pe.Err.Error()
	}
	return err.Error()
}

// readUploads reads every file of a message's --file flags.
func readUploads(paths []string) ([]uploadFile, error) {
	files := make([]uploadFile, len(paths))
	for i, p := range paths {
		f, err := readUpload(p)
		if err != nil {
			return nil, err
		}
		files[i] = f
	}
	return files, nil
}

// uploadAll uploads each file and returns their NIP-92 attachments, in order.
func uploadAll(ctx context.Context, b *client.Bridge, files []uploadFile) ([]protocol.Attachment, error) {
	out := make([]protocol.Attachment, len(files))
	for i, f := range files {
		d, err := b.Upload(ctx, f.data, f.typ)
		if err != nil {
			return nil, fmt.Errorf("upload %s: %w", f.name, err)
		}
		out[i] = protocol.Attachment{URL: d.URL, Type: d.Type, SHA256: d.SHA256, Size: d.Size, Dim: f.dim, Alt: f.name}
	}
	return out, nil
}
