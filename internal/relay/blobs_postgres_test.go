package relay_test

import (
	"bytes"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/relay/store/postgres/pgtest"
)

func TestPostgresBlobUploadedOnOneNodeIsServedByAnother(t *testing.T) {
	dbURL := pgtest.URL(t)
	nodeA, nodeB := startPGRelay(t, dbURL), startPGRelay(t, dbURL)
	owner := newUser()
	c := dialRaw(t, nodeA)
	c.mustAuth(owner.sk, nodeA)
	if ok := c.publish(owner.sk, nostr.Event{Kind: protocol.KindCreateGroup, Tags: nostr.Tags{
		{"h", uuid.NewString()}, {"name", "eng"}, {"visibility", protocol.VisibilityOpen}, {"channel_type", protocol.TypeStream},
	}}); ok[2] != true {
		t.Fatalf("create channel: %v", ok)
	}
	req, _ := http.NewRequest(http.MethodPut, protocol.HTTPBase(nodeA)+"/upload", bytes.NewReader(pngBytes))
	req.Header.Set("Authorization", uploadToken(t, owner.sk, sha(pngBytes)))
	req.Header.Set("Content-Type", "image/png")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("upload on node A: %d", resp.StatusCode)
	}
	get, _ := http.NewRequest(http.MethodGet, protocol.HTTPBase(nodeB)+"/media/"+sha(pngBytes)+".png", nil)
	auth, _ := protocol.SignBlobAuth(owner.sk, protocol.BlobGet, []string{sha(pngBytes)}, "", time.Now(), time.Minute)
	get.Header.Set("Authorization", auth)
	resp, err = http.DefaultClient.Do(get)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !bytes.Equal(body, pngBytes) {
		t.Fatalf("GET on node B: %d %q", resp.StatusCode, body)
	}
}
