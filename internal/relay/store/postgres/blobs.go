package postgres

import (
	"bytes"
	"context"
	"errors"
	"io"

	"github.com/jackc/pgx/v5"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/relay/store"
)

var _ store.Blobs = (*Store)(nil)

// PutBlob implements store.Blobs. The bytes are held in memory for the insert: the relay's blob
// size cap bounds them.
func (s *Store) PutBlob(ctx context.Context, content io.Reader, typ, owner string, now int64, accept func(string, int64) error) (store.Upload, error) {
	if s.closed.Load() {
		return store.Upload{}, store.ErrClosed
	}
	data, sha, err := store.ReadBlob(content)
	if err != nil {
		return store.Upload{}, err
	}
	if err := accept(sha, int64(len(data))); err != nil {
		return store.Upload{}, err
	}
	up := store.Upload{Blob: store.Blob{SHA256: sha, Size: int64(len(data)), Type: typ}}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO blobs (sha256, size, type, data, uploaded) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT DO NOTHING`, sha, len(data), text(typ), data, now); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `INSERT INTO blob_owners (sha256, pubkey, uploaded) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
			sha, text(owner), now)
		if err != nil {
			return err
		}
		up.New = tag.RowsAffected() == 1
		return tx.QueryRow(ctx, `SELECT uploaded FROM blob_owners WHERE sha256 = $1 AND pubkey = $2`, sha, text(owner)).Scan(&up.Uploaded)
	})
	return up, s.wrap(err)
}

// OpenBlob implements store.Blobs.
func (s *Store) OpenBlob(ctx context.Context, sha string) (store.Blob, io.ReadSeekCloser, error) {
	if s.closed.Load() {
		return store.Blob{}, nil, store.ErrClosed
	}
	if !protocol.IsHex64(sha) {
		return store.Blob{}, nil, store.ErrBlobNotFound
	}
	b := store.Blob{SHA256: sha}
	var data []byte
	err := s.pool.QueryRow(ctx, `SELECT size, type, data FROM blobs WHERE sha256 = $1`, sha).Scan(&b.Size, &b.Type, &data)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Blob{}, nil, store.ErrBlobNotFound
	}
	if err != nil {
		return store.Blob{}, nil, s.wrap(err)
	}
	return b, nopCloser{bytes.NewReader(data)}, nil
}

// BlobOwners implements store.Blobs.
func (s *Store) BlobOwners(ctx context.Context, sha string, limit int) ([]string, error) {
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	rows, err := s.pool.Query(ctx, `SELECT pubkey FROM blob_owners WHERE sha256 = $1 ORDER BY uploaded, pubkey LIMIT $2`, text(sha), limit)
	if err != nil {
		return nil, s.wrap(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return out, s.wrap(err)
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }
