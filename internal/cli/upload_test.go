package cli_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"image"
	"image/png"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/relay/relaytest"
)

// writePNG writes a real 3x2 PNG and returns its path and bytes.
func writePNG(t *testing.T, name string) (string, []byte) {
	t.Helper()
	var buf bytes.Buffer
	if err := png.Encode(&buf, image.NewRGBA(image.Rect(0, 0, 3, 2))); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, buf.Bytes()
}

func hexHash(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

type blobOut struct {
	URL    string `json:"url"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
	Type   string `json:"type"`
}

// blobBytes fetches a blob from the relay as sk.
func blobBytes(t *testing.T, url, sk, sha string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	auth, _ := protocol.SignBlobAuth(sk, protocol.BlobGet, []string{sha}, "", time.Now(), time.Minute)
	req.Header.Set("Authorization", auth)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func TestUploadPrintsTheBlobDescriptor(t *testing.T) {
	t.Parallel()
	s := relaytest.Start(t)
	alice := newUser(t, s.URL)
	alice.createChannel("general", false)
	path, data := writePNG(t, "shot.png")
	var out blobOut
	alice.ok(&out, "", "upload", path)
	if out.SHA256 != hexHash(data) || out.Size != int64(len(data)) || out.Type != "image/png" || out.URL != s.HTTPURL+"/media/"+hexHash(data)+".png" {
		t.Fatalf("upload printed %+v", out)
	}
	if code, got := blobBytes(t, out.URL, alice.sk, out.SHA256); code != http.StatusOK || !bytes.Equal(got, data) {
		t.Fatalf("the uploaded blob reads back as %d %d bytes", code, len(got))
	}
}

func TestUploadOfAMissingFileIsAUsageError(t *testing.T) {
	t.Parallel()
	s := relaytest.Start(t)
	e := newUser(t, s.URL).fails(1, "upload", "/nonexistent/shot.png")
	if !strings.Contains(e.Message, "/nonexistent/shot.png") {
		t.Fatalf("error %q does not name the file", e.Message)
	}
}

func TestUploadByAPubkeyInNoChannelIsAnAuthError(t *testing.T) {
	t.Parallel()
	s := relaytest.Start(t)
	path, _ := writePNG(t, "shot.png")
	if e := newUser(t, s.URL).fails(3, "upload", path); !strings.Contains(e.Message, "channel members") {
		t.Fatalf("error %+v", e)
	}
}

func TestSendWithFileAttachesItAsImeta(t *testing.T) {
	t.Parallel()
	s := relaytest.Start(t)
	alice := newUser(t, s.URL)
	ch := alice.createChannel("general", false)
	path, data := writePNG(t, "shot.png")
	var out sent
	alice.ok(&out, "", "messages", "send", "--channel", ch, "--content", "the login page is blank", "--file", path)
	evs := s.Query(t, alice.sk, nostr.Filter{IDs: []string{out.EventID}})
	if len(evs) != 1 {
		t.Fatalf("message %s not stored", out.EventID)
	}
	url := s.HTTPURL + "/media/" + hexHash(data) + ".png"
	want := protocol.Attachment{URL: url, Type: "image/png", SHA256: hexHash(data), Size: int64(len(data)), Dim: "3x2", Alt: "shot.png"}
	got := protocol.Attachments(evs[0].Tags)
	if len(got) != 1 || got[0].URL != want.URL || got[0].Type != want.Type || got[0].SHA256 != want.SHA256 || got[0].Size != want.Size ||
		got[0].Dim != want.Dim || got[0].Alt != want.Alt {
		t.Fatalf("attachments %+v, want %+v", got, want)
	}
	if evs[0].Content != "the login page is blank\n"+url {
		t.Fatalf("content %q: the attachment's URL must follow the text", evs[0].Content)
	}
}

func TestSendWithOnlyAFileNeedsNoText(t *testing.T) {
	t.Parallel()
	s := relaytest.Start(t)
	alice := newUser(t, s.URL)
	ch := alice.createChannel("general", false)
	path, data := writePNG(t, "shot.png")
	var out sent
	alice.ok(&out, "", "messages", "send", "--channel", ch, "--content", "", "--file", path)
	if evs := s.Query(t, alice.sk, nostr.Filter{IDs: []string{out.EventID}}); len(evs) != 1 || !strings.HasSuffix(evs[0].Content, hexHash(data)+".png") {
		t.Fatalf("message %+v", evs)
	}
}

func TestSendWithAMissingFilePostsNothing(t *testing.T) {
	t.Parallel()
	s := relaytest.Start(t)
	alice := newUser(t, s.URL)
	ch := alice.createChannel("general", false)
	alice.fails(1, "messages", "send", "--channel", ch, "--content", "see attached", "--file", "/nonexistent.png")
	if evs := s.Query(t, alice.sk, nostr.Filter{Kinds: []int{9}, Tags: nostr.TagMap{"h": {ch}}}); len(evs) != 0 {
		t.Fatalf("a message went out without its file: %+v", evs)
	}
}
