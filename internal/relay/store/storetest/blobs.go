package storetest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/relay/store"
)

func init() {
	type tc = struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}
	cases = append(cases,
		tc{"BlobRoundTripsByItsHash", testBlobRoundTrips},
		tc{"UnknownBlobIsNotFound", testUnknownBlobIsNotFound},
		tc{"RefusedBlobStoresNothing", testRefusedBlobStoresNothing},
		tc{"BlobCutShortStoresNothing", testBlobCutShortStoresNothing},
		tc{"SecondUploaderIsNewForThemAndKeepsTheFirstType", testSecondUploader},
		tc{"ImetaHashIsIndexedAsAnXTag", testImetaHashIsIndexed})
}

func blobsOf(t *testing.T, s store.Store) store.Blobs {
	t.Helper()
	bs, ok := s.(store.Blobs)
	if !ok {
		t.Fatalf("%T does not store blobs", s)
	}
	return bs
}

func hashOf(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func acceptAll(string, int64) error { return nil }

func putBlob(t *testing.T, bs store.Blobs, data []byte, typ, owner string, now int64) store.Upload {
	t.Helper()
	up, err := bs.PutBlob(ctx, bytes.NewReader(data), typ, owner, now, acceptAll)
	if err != nil {
		t.Fatal(err)
	}
	return up
}

func readBlob(t *testing.T, bs store.Blobs, sha string) (store.Blob, []byte) {
	t.Helper()
	b, rc, err := bs.OpenBlob(ctx, sha)
	if err != nil {
		t.Fatalf("open %s: %v", sha, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b, data
}

func testBlobRoundTrips(t *testing.T, s store.Store) {
	bs := blobsOf(t, s)
	data := []byte("\x89PNG\r\n\x1a\n screenshot bytes \x00\xff")
	var askedSHA string
	var askedSize int64
	up, err := bs.PutBlob(ctx, bytes.NewReader(data), "image/png", newKey().pk, 100, func(sha string, size int64) error {
		askedSHA, askedSize = sha, size
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if askedSHA != hashOf(data) || askedSize != int64(len(data)) {
		t.Fatalf("accept asked about %s/%d, want %s/%d", askedSHA, askedSize, hashOf(data), len(data))
	}
	if !up.New || up.Uploaded != 100 || up.SHA256 != hashOf(data) {
		t.Fatalf("upload %+v", up)
	}
	b, got := readBlob(t, bs, hashOf(data))
	if !bytes.Equal(got, data) || b.Size != int64(len(data)) || b.Type != "image/png" {
		t.Fatalf("read back %+v %q", b, got)
	}
}

func testUnknownBlobIsNotFound(t *testing.T, s store.Store) {
	bs := blobsOf(t, s)
	for _, sha := range []string{hashOf([]byte("never stored")), "../../relay.key", ""} {
		if _, _, err := bs.OpenBlob(ctx, sha); !errors.Is(err, store.ErrBlobNotFound) {
			t.Errorf("open %q: %v, want ErrBlobNotFound", sha, err)
		}
	}
}

func testRefusedBlobStoresNothing(t *testing.T, s store.Store) {
	bs := blobsOf(t, s)
	data := []byte("not what the token named")
	refused := errors.New("hash not authorized")
	if _, err := bs.PutBlob(ctx, bytes.NewReader(data), "text/plain", newKey().pk, 1, func(string, int64) error { return refused }); !errors.Is(err, refused) {
		t.Fatalf("got %v, want accept's refusal", err)
	}
	if _, _, err := bs.OpenBlob(ctx, hashOf(data)); !errors.Is(err, store.ErrBlobNotFound) {
		t.Fatalf("refused blob readable: %v", err)
	}
	if owners, err := bs.BlobOwners(ctx, hashOf(data), 10); err != nil || len(owners) != 0 {
		t.Fatalf("refused blob has owners %v (%v)", owners, err)
	}
}

// failingReader yields some bytes, then fails as a dropped or oversized upload does.
type failingReader struct{ r io.Reader }

var errCut = errors.New("client went away")

func (f *failingReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF {
		return n, errCut
	}
	return n, err
}

func testBlobCutShortStoresNothing(t *testing.T, s store.Store) {
	bs := blobsOf(t, s)
	data := []byte("half an upload")
	called := false
	_, err := bs.PutBlob(ctx, &failingReader{strings.NewReader(string(data))}, "text/plain", newKey().pk, 1, func(string, int64) error {
		called = true
		return nil
	})
	if !errors.Is(err, errCut) || called {
		t.Fatalf("got %v (accept called: %v), want the read error before any accept", err, called)
	}
	if _, _, err := bs.OpenBlob(ctx, hashOf(data)); !errors.Is(err, store.ErrBlobNotFound) {
		t.Fatalf("cut-short blob readable: %v", err)
	}
}

func testSecondUploader(t *testing.T, s store.Store) {
	bs := blobsOf(t, s)
	a, b := newKey(), newKey()
	data := []byte("shared file")
	putBlob(t, bs, data, "image/png", a.pk, 10)
	second := putBlob(t, bs, data, "text/html", b.pk, 20)
	again := putBlob(t, bs, data, "image/png", a.pk, 30)
	if !second.New || second.Uploaded != 20 {
		t.Fatalf("second uploader: %+v, want new, uploaded at 20", second)
	}
	if again.New || again.Uploaded != 10 {
		t.Fatalf("repeat upload: %+v, want not new, uploaded at 10", again)
	}
	if blob, _ := readBlob(t, bs, hashOf(data)); blob.Type != "image/png" {
		t.Fatalf("type %q, want the first upload's", blob.Type)
	}
	owners, err := bs.BlobOwners(ctx, hashOf(data), 10)
	if err != nil || !reflect.DeepEqual(owners, []string{a.pk, b.pk}) {
		t.Fatalf("owners %v (%v), want both, oldest first", owners, err)
	}
	if one, _ := bs.BlobOwners(ctx, hashOf(data), 1); len(one) != 1 {
		t.Fatalf("limit ignored: %v", one)
	}
}

func testImetaHashIsIndexed(t *testing.T, s store.Store) {
	a := newKey()
	sha := hashOf([]byte("a screenshot"))
	with := a.sign(t, nostr.Event{Kind: 9, CreatedAt: 10, Content: "see https://r.example/" + sha,
		Tags: nostr.Tags{{"imeta", "url https://r.example/" + sha, "m image/png", "x " + sha}}})
	without := a.sign(t, nostr.Event{Kind: 9, CreatedAt: 11, Content: "no file"})
	mustSave(t, s, "", with, without)
	wantContents(t, "#x", query(t, s, reader(a.pk), nostr.Filter{Tags: nostr.TagMap{"x": {sha}}}), with.Content)
}
