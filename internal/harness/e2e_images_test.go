package harness_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/client"
	"github.com/buzz-harness/buzz/internal/protocol"
)

// screenshot is a PNG-looking blob the owner attaches.
var screenshot = append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte("pixels "), 40)...)

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// uploadAsOwner stores data on the relay as the owner and returns the imeta tag of it.
func (s *stack) uploadAsOwner(data []byte, typ string) nostr.Tag {
	s.t.Helper()
	d, err := client.NewBridge(s.relay.URL, s.ownerSK).Upload(context.Background(), data, typ)
	if err != nil {
		s.t.Fatal(err)
	}
	return protocol.Attachment{URL: d.URL, Type: d.Type, SHA256: d.SHA256, Size: d.Size, Alt: "the failing page"}.Tag()
}

// imageAgent is the test agent with image prompts, answering with the image blocks it got.
var imageAgent = []string{"TESTAGENT_IMAGE=1", "TESTAGENT_REPLY=images: {images}"}

func TestImageAttachmentReachesAnImageAgentAsAnImageBlock(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start(nil, imageAgent...)
	tag := s.uploadAsOwner(screenshot, "image/png")
	m := s.mention(s.ownerSK, "what is wrong on this page?", tag)
	if got := s.waitReply(m.ID).Content; got != "images: image/png:"+sha256Hex(screenshot) {
		t.Fatalf("reply %q: the agent did not get the screenshot as an image block", got)
	}
	if all := strings.Join(s.prompts(), "\n"); !strings.Contains(all, `Attachments (1): `+tag[1][4:]+`, image/png, `) {
		t.Fatalf("the prompt text does not list the attachment:\n%s", all)
	}
}

func TestImageAttachmentIsOnlyTextForAnAgentWithoutImages(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start(nil, "TESTAGENT_REPLY=images: {images}")
	m := s.mention(s.ownerSK, "see attached", s.uploadAsOwner(screenshot, "image/png"))
	if got := s.waitReply(m.ID).Content; got != "images: none" {
		t.Fatalf("reply %q: an agent without promptCapabilities.image got image blocks", got)
	}
	if all := strings.Join(s.prompts(), "\n"); !strings.Contains(all, "Attachments (1): ") {
		t.Fatalf("the prompt does not list the attachment:\n%s", all)
	}
}

func TestFailedImageFetchStillSendsTheTextPrompt(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start(nil, imageAgent...)
	missing := sha256Hex([]byte("never uploaded"))
	tag := protocol.Attachment{URL: s.relay.HTTPURL + "/media/" + missing + ".png", Type: "image/png", SHA256: missing}.Tag()
	m := s.mention(s.ownerSK, "this one is gone", tag)
	if got := s.waitReply(m.ID).Content; got != "images: none" {
		t.Fatalf("reply %q", got)
	}
	s.waitLog("image attachment not sent to the agent", 5*time.Second)
}

func TestImageOverMaxImageBytesIsNotSent(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start([]string{"--max-image-bytes", "64"}, imageAgent...)
	tag := s.uploadAsOwner(screenshot, "image/png")
	tag = nostr.Tag{tag[0], tag[1], tag[2], tag[3]} // url, m, x: no declared size, so the fetch itself must stop
	m := s.mention(s.ownerSK, "too big to look at", tag)
	if got := s.waitReply(m.ID).Content; got != "images: none" {
		t.Fatalf("reply %q: a %d-byte image went past --max-image-bytes 64", got, len(screenshot))
	}
}

func TestImageOnAnotherHostIsNeverFetched(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.Write(screenshot)
	}))
	defer elsewhere.Close()
	s := newStack(t)
	s.start(nil, imageAgent...)
	tag := protocol.Attachment{URL: elsewhere.URL + "/media/" + sha256Hex(screenshot) + ".png", Type: "image/png", SHA256: sha256Hex(screenshot)}.Tag()
	m := s.mention(s.ownerSK, "look at this", tag)
	if got := s.waitReply(m.ID).Content; got != "images: none" || hits.Load() != 0 {
		t.Fatalf("reply %q, %d requests to the other host: a message must not make the harness fetch any URL it names", got, hits.Load())
	}
}
