package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
)

// ErrBlobNotFound means no blob with that hash is stored.
var ErrBlobNotFound = errors.New("blob not found")

// Blob is one stored file (Blossom): its content address, size, and the MIME type of its first
// upload.
type Blob struct {
	SHA256 string
	Size   int64
	Type   string
}

// Upload is one PutBlob's outcome for its uploader.
type Upload struct {
	Blob
	// New: this uploader had not uploaded these bytes before. It says nothing about other
	// uploaders, so an upload never tells whether someone else holds the same file.
	New bool
	// Uploaded is when this uploader first uploaded them (unix seconds).
	Uploaded int64
}

// Blobs is what a store adds to hold Blossom blobs: content addressed by SHA-256, each with
// the pubkeys that uploaded it. SQLite keeps the bytes in files beside its database, PostgreSQL
// in a table every node shares. Read access is the relay's decision (blobs.go there): the store
// only says who uploaded what.
type Blobs interface {
	// PutBlob reads content to its end, hashing it, then asks accept whether a blob of that
	// hash and size may be stored (the uploader's authorization must name it); only if accept
	// returns nil are the bytes stored (once per hash; typ is kept from the first upload) and
	// owner recorded as an uploader. A read error (a size limit, a dropped client) is returned
	// as it is and stores nothing.
	PutBlob(ctx context.Context, content io.Reader, typ, owner string, now int64, accept func(sha string, size int64) error) (Upload, error)
	// OpenBlob returns a stored blob and its bytes, which the caller closes; ErrBlobNotFound
	// when there is none.
	OpenBlob(ctx context.Context, sha string) (Blob, io.ReadSeekCloser, error)
	// BlobOwners lists up to limit pubkeys that uploaded sha, oldest upload first (none when
	// it is not stored).
	BlobOwners(ctx context.Context, sha string, limit int) ([]string, error)
}

// ReadBlob reads content to its end and returns it with its SHA-256 (lowercase hex): for a
// backend that stores blobs as values.
func ReadBlob(content io.Reader) (data []byte, sha string, err error) {
	data, err = io.ReadAll(content)
	sum := sha256.Sum256(data)
	return data, hex.EncodeToString(sum[:]), err
}
