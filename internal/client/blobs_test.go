package client_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/client"
	"github.com/buzz-harness/buzz/internal/relay/relaytest"
)

var shot = []byte("\x89PNG\r\n\x1a\n a screenshot for the client tests")

func hexSHA(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// member is a relay with one channel whose owner's bridge is returned.
func member(t *testing.T) (*relaytest.Server, *client.Bridge) {
	t.Helper()
	s := relaytest.Start(t)
	sk := nostr.GeneratePrivateKey()
	s.CreateChannel(t, sk, "eng", false)
	return s, client.NewBridge(s.URL, sk)
}

func TestUploadThenFetchRoundTrips(t *testing.T) {
	_, b := member(t)
	d, err := b.Upload(context.Background(), shot, "image/png")
	if err != nil {
		t.Fatal(err)
	}
	if d.SHA256 != hexSHA(shot) || d.Size != int64(len(shot)) || d.Type != "image/png" {
		t.Fatalf("descriptor %+v", d)
	}
	data, typ, err := b.FetchBlob(context.Background(), d.URL, 1<<20)
	if err != nil || !bytes.Equal(data, shot) || typ != "image/png" {
		t.Fatalf("fetch: %q %q %v", data, typ, err)
	}
}

func TestFetchBlobRefusesURLsOffTheRelay(t *testing.T) {
	s, b := member(t)
	sha := hexSHA(shot)
	for _, u := range []string{
		"http://169.254.169.254/" + sha,                             // another host
		"https" + strings.TrimPrefix(s.HTTPURL, "http") + "/" + sha, // another scheme
		s.HTTPURL + "/media/" + sha + "?x=1",                        // a query the relay would ignore
		s.HTTPURL + "/query",                                        // not a blob path
	} {
		if _, _, err := b.FetchBlob(context.Background(), u, 1<<20); err == nil {
			t.Errorf("fetched %s", u)
		}
	}
}

func TestFetchBlobRefusesABlobOverTheLimit(t *testing.T) {
	_, b := member(t)
	d, err := b.Upload(context.Background(), shot, "image/png")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.FetchBlob(context.Background(), d.URL, int64(len(shot))-1); !errors.Is(err, client.ErrBlobTooLarge) {
		t.Fatalf("got %v, want ErrBlobTooLarge", err)
	}
}

func TestFetchBlobRefusesBytesThatDoNotMatchTheHash(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("not the screenshot")) }))
	defer srv.Close()
	b := client.NewBridge(srv.URL, nostr.GeneratePrivateKey())
	if _, _, err := b.FetchBlob(context.Background(), srv.URL+"/media/"+hexSHA(shot)+".png", 1<<20); err == nil || !strings.Contains(err.Error(), "do not match") {
		t.Fatalf("got %v, want a hash mismatch", err)
	}
}

func TestFetchBlobEndsWithItsContext(t *testing.T) {
	gone := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // a relay that never answers
		close(gone)
	}))
	defer srv.Close()
	b := client.NewBridge(srv.URL, nostr.GeneratePrivateKey())
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, _, err := b.FetchBlob(ctx, srv.URL+"/"+hexSHA(shot), 1<<20); err == nil {
		t.Fatal("a fetch from a relay that never answers returned no error")
	}
	<-gone // the request was abandoned, not left running
}
