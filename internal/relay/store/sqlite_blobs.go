package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"

	"github.com/buzz-harness/buzz/internal/atomicfile"
	"github.com/buzz-harness/buzz/internal/protocol"
)

var _ Blobs = (*SQLite)(nil)

// blobPath is where a blob's bytes live: blobs/<first two hex digits>/<sha256>, so no one
// directory grows past 256 entries per 64 K blobs.
func (s *SQLite) blobPath(sha string) string { return filepath.Join(s.blobDir, sha[:2], sha) }

// PutBlob implements Blobs. The bytes stream into a temp file in the blob directory (never
// whole in memory), fsynced; once accepted it is renamed into place and the rows are written.
// A crash in between leaves at most a file no row names, which the next upload of the same
// bytes reuses.
func (s *SQLite) PutBlob(ctx context.Context, content io.Reader, typ, owner string, now int64, accept func(string, int64) error) (Upload, error) {
	if err := os.MkdirAll(s.blobDir, 0o700); err != nil {
		return Upload{}, fmt.Errorf("blob dir: %w", err)
	}
	tmp, err := os.CreateTemp(s.blobDir, "upload-*")
	if err != nil {
		return Upload{}, fmt.Errorf("blob temp file: %w", err)
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	hr := &hashingReader{r: content, h: sha256.New()}
	_, err = io.Copy(tmp, hr)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return Upload{}, err
	}
	sha := hr.sum()
	if err := accept(sha, hr.n); err != nil {
		return Upload{}, err
	}
	final := s.blobPath(sha)
	if _, err := os.Stat(final); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(final), 0o700); err != nil {
			return Upload{}, err
		}
		if err := os.Rename(tmp.Name(), final); err != nil {
			return Upload{}, err
		}
		if err := atomicfile.SyncDir(filepath.Dir(final)); err != nil {
			return Upload{}, err
		}
	}
	up := Upload{Blob: Blob{SHA256: sha, Size: hr.n, Type: typ}}
	err = s.Update(ctx, func(tx Tx) error {
		t := tx.(*sqliteTx)
		if err := t.exec(`INSERT INTO blobs (sha256, size, type, uploaded) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`,
			sha, hr.n, typ, now); err != nil {
			return err
		}
		res, err := t.execResult(`INSERT INTO blob_owners (sha256, pubkey, uploaded) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`, sha, owner, now)
		if err != nil {
			return err
		}
		n, _ := res.RowsAffected()
		up.New = n == 1
		st, err := t.stmt(`SELECT uploaded FROM blob_owners WHERE sha256 = ? AND pubkey = ?`)
		if err != nil {
			return err
		}
		return st.QueryRow(sha, owner).Scan(&up.Uploaded)
	})
	return up, err
}

// OpenBlob implements Blobs.
func (s *SQLite) OpenBlob(ctx context.Context, sha string) (Blob, io.ReadSeekCloser, error) {
	if !protocol.IsHex64(sha) {
		return Blob{}, nil, ErrBlobNotFound
	}
	b := Blob{SHA256: sha}
	err := s.r.QueryRowContext(ctx, `SELECT size, type FROM blobs WHERE sha256 = ?`, sha).Scan(&b.Size, &b.Type)
	if errors.Is(err, sql.ErrNoRows) {
		return Blob{}, nil, ErrBlobNotFound
	}
	if err != nil {
		return Blob{}, nil, err
	}
	f, err := os.Open(s.blobPath(sha))
	if errors.Is(err, os.ErrNotExist) {
		return Blob{}, nil, ErrBlobNotFound
	}
	if err != nil {
		return Blob{}, nil, err
	}
	return b, f, nil
}

// BlobOwners implements Blobs.
func (s *SQLite) BlobOwners(ctx context.Context, sha string, limit int) ([]string, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT pubkey FROM blob_owners WHERE sha256 = ? ORDER BY uploaded, pubkey LIMIT ?`, sha, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var pk string
		if err := rows.Scan(&pk); err != nil {
			return nil, err
		}
		out = append(out, pk)
	}
	return out, rows.Err()
}

// hashingReader counts and hashes what is read through it.
type hashingReader struct {
	r io.Reader
	h hash.Hash
	n int64
}

func (h *hashingReader) Read(p []byte) (int, error) {
	n, err := h.r.Read(p)
	h.h.Write(p[:n])
	h.n += int64(n)
	return n, err
}

func (h *hashingReader) sum() string { return hex.EncodeToString(h.h.Sum(nil)) }
