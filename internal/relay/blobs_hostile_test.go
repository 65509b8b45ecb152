package relay_test

// Attacks on the blob routes (blobs.go, upload.go), each refused over real HTTP.

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
)

func TestPrivateChannelScreenshotDoesNotLeakByItsHash(t *testing.T) {
	s, owner, _ := teamRelay(t, nil)
	private := s.CreateChannel(t, owner.sk, "war-room", true)
	shot := []byte("\x89PNG\r\n\x1a\n incident dashboard")
	upload(t, s, owner.sk, shot, "image/png")
	s.Publish(t, owner.sk, imetaMsg(private, shot))

	outsider := newUser()
	if code, _, _ := fetch(t, s, http.MethodGet, "/media/"+sha(shot), getToken(t, outsider.sk, sha(shot))); code != http.StatusNotFound {
		t.Fatalf("outsider who knows the hash: %d, want 404", code)
	}
	// The outsider names the hash in an open channel of their own: an event by someone who
	// never uploaded the bytes must grant nothing.
	public := s.CreateChannel(t, outsider.sk, "lobby", false)
	s.Publish(t, outsider.sk, imetaMsg(public, shot))
	if code, _, _ := fetch(t, s, http.MethodGet, "/media/"+sha(shot), getToken(t, outsider.sk, sha(shot))); code != http.StatusNotFound {
		t.Fatalf("outsider after re-posting the hash publicly: %d, want 404", code)
	}
	member := newUser()
	s.AddMember(t, owner.sk, private, member.pk, "member")
	if code, _, _ := fetch(t, s, http.MethodGet, "/media/"+sha(shot), getToken(t, member.sk, sha(shot))); code != http.StatusOK {
		t.Fatalf("member of the private channel: %d, want 200", code)
	}
}

func TestDeletedMessageNoLongerGrantsItsAttachment(t *testing.T) {
	s, owner, ch := teamRelay(t, nil)
	upload(t, s, owner.sk, pngBytes, "image/png")
	ev := imetaMsg(ch, pngBytes)
	ev.CreatedAt = nostr.Now()
	if err := ev.Sign(owner.sk); err != nil {
		t.Fatal(err)
	}
	s.Publish(t, owner.sk, ev)
	reader := newUser()
	if code, _, _ := fetch(t, s, http.MethodGet, "/media/"+sha(pngBytes), getToken(t, reader.sk, sha(pngBytes))); code != http.StatusOK {
		t.Fatalf("before the deletion: %d", code)
	}
	s.Publish(t, owner.sk, nostr.Event{Kind: protocol.KindDeletion, Tags: nostr.Tags{{"e", ev.ID}}})
	if code, _, _ := fetch(t, s, http.MethodGet, "/media/"+sha(pngBytes), getToken(t, reader.sk, sha(pngBytes))); code != http.StatusNotFound {
		t.Fatalf("after the deletion: %d, want 404", code)
	}
	if code, _, _ := fetch(t, s, http.MethodGet, "/media/"+sha(pngBytes), getToken(t, owner.sk, sha(pngBytes))); code != http.StatusOK {
		t.Fatalf("the uploader after the deletion: %d, want 200", code)
	}
}

func TestForbiddenBlobLooksLikeAMissingOne(t *testing.T) {
	s, owner, _ := teamRelay(t, nil)
	upload(t, s, owner.sk, pngBytes, "image/png")
	missing := sha([]byte("never uploaded"))
	stranger := newUser()
	c1, b1, _ := fetch(t, s, http.MethodGet, "/media/"+sha(pngBytes), getToken(t, stranger.sk, sha(pngBytes)))
	c2, b2, _ := fetch(t, s, http.MethodGet, "/media/"+missing, getToken(t, stranger.sk, missing))
	if c1 != http.StatusNotFound || c1 != c2 || !bytes.Equal(b1, b2) {
		t.Fatalf("forbidden %d %q vs missing %d %q: must be the same answer", c1, b1, c2, b2)
	}
}

func TestSecondUploadDoesNotRevealTheFirst(t *testing.T) {
	s, owner, ch := teamRelay(t, nil)
	other := newUser()
	s.AddMember(t, owner.sk, ch, other.pk, "member")
	upload(t, s, owner.sk, pngBytes, "image/png")
	status, d := upload(t, s, other.sk, pngBytes, "application/x-test")
	if status != http.StatusCreated || d.Type != "application/x-test" {
		t.Fatalf("second uploader got %d %+v: an answer that differs from a first upload tells them someone holds the file", status, d)
	}
}

func TestUploadedHTMLIsServedSandboxed(t *testing.T) {
	s, owner, _ := teamRelay(t, nil)
	page := []byte("<html><script>fetch('/query')</script></html>")
	upload(t, s, owner.sk, page, "text/html")
	code, _, h := fetch(t, s, http.MethodGet, "/media/"+sha(page), getToken(t, owner.sk, sha(page)))
	if code != http.StatusOK || h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Content-Security-Policy") != "default-src 'none'; sandbox" {
		t.Fatalf("%d, headers %v", code, h)
	}
	if h.Get("Cache-Control") != "private, max-age=300" {
		t.Fatalf("Cache-Control %q: an access-checked blob must not sit in shared caches", h.Get("Cache-Control"))
	}
}

func TestBlobPathsRefuseOtherMethods(t *testing.T) {
	s, owner, _ := teamRelay(t, nil)
	if code, _, _ := fetch(t, s, http.MethodDelete, "/media/"+sha(pngBytes), getToken(t, owner.sk, sha(pngBytes))); code != http.StatusMethodNotAllowed {
		t.Fatalf("DELETE: %d, want 405", code)
	}
	if code, _, _ := fetch(t, s, http.MethodGet, "/upload", uploadToken(t, owner.sk, sha(pngBytes))); code != http.StatusMethodNotAllowed {
		t.Fatalf("GET /upload: %d, want 405", code)
	}
}
