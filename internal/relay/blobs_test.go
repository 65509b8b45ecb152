package relay_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/relay"
	"github.com/buzz-harness/buzz/internal/relay/relaytest"
)

// pngBytes is enough of a PNG for content sniffing.
var pngBytes = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR a screenshot")

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

type descriptor struct {
	URL      string `json:"url"`
	SHA256   string `json:"sha256"`
	Size     int64  `json:"size"`
	Type     string `json:"type"`
	Uploaded int64  `json:"uploaded"`
	Error    string `json:"error"`
}

func uploadToken(t *testing.T, sk string, hashes ...string) string {
	t.Helper()
	h, err := protocol.SignBlobAuth(sk, protocol.BlobUpload, hashes, "", time.Now(), 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func getToken(t *testing.T, sk, blob string) string {
	t.Helper()
	h, err := protocol.SignBlobAuth(sk, protocol.BlobGet, []string{blob}, "", time.Now(), 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// put sends PUT path with body and the given headers (Authorization among them).
func put(t *testing.T, s *relaytest.Server, path string, body io.Reader, headers map[string]string) (int, descriptor, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, s.HTTPURL+path, body)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var d descriptor
	raw, _ := io.ReadAll(resp.Body)
	json.Unmarshal(raw, &d)
	return resp.StatusCode, d, resp.Header
}

// upload puts data as sk with a token naming it.
func upload(t *testing.T, s *relaytest.Server, sk string, data []byte, typ string) (int, descriptor) {
	t.Helper()
	status, d, _ := put(t, s, "/upload", bytes.NewReader(data), map[string]string{
		"Authorization": uploadToken(t, sk, sha(data)), "Content-Type": typ})
	return status, d
}

// fetch GETs path with the given Authorization ("" = none) and returns status, body, headers.
func fetch(t *testing.T, s *relaytest.Server, method, path, auth string) (int, []byte, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(method, s.HTTPURL+path, nil)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header
}

// teamRelay is a relay with an open channel whose owner may upload.
func teamRelay(t *testing.T, config func(*relay.Config)) (*relaytest.Server, user, string) {
	t.Helper()
	s := relaytest.StartWith(t, config)
	owner := newUser()
	return s, owner, s.CreateChannel(t, owner.sk, "eng", false)
}

// imetaMsg is a message in channel carrying data as an attachment.
func imetaMsg(channel string, data []byte) nostr.Event {
	url := "http://relay.example/media/" + sha(data) + ".png"
	return nostr.Event{Kind: protocol.KindStreamMessage, Content: "see " + url, Tags: nostr.Tags{{"h", channel},
		protocol.Attachment{URL: url, Type: "image/png", SHA256: sha(data), Size: int64(len(data))}.Tag()}}
}

func TestUploadStoresTheBlobAndAnswersItsDescriptor(t *testing.T) {
	s, owner, _ := teamRelay(t, nil)
	status, d := upload(t, s, owner.sk, pngBytes, "image/png")
	if status != http.StatusCreated {
		t.Fatalf("status %d (%s), want 201", status, d.Error)
	}
	want := descriptor{URL: s.HTTPURL + "/media/" + sha(pngBytes) + ".png", SHA256: sha(pngBytes), Size: int64(len(pngBytes)), Type: "image/png"}
	if d.URL != want.URL || d.SHA256 != want.SHA256 || d.Size != want.Size || d.Type != want.Type || d.Uploaded == 0 {
		t.Fatalf("descriptor %+v, want %+v", d, want)
	}
	code, body, h := fetch(t, s, http.MethodGet, strings.TrimPrefix(d.URL, s.HTTPURL), getToken(t, owner.sk, d.SHA256))
	if code != http.StatusOK || !bytes.Equal(body, pngBytes) || h.Get("Content-Type") != "image/png" {
		t.Fatalf("uploader's GET: %d %q %q", code, body, h.Get("Content-Type"))
	}
}

func TestRepeatUploadByTheSameUploaderAnswers200(t *testing.T) {
	s, owner, _ := teamRelay(t, nil)
	upload(t, s, owner.sk, pngBytes, "image/png")
	if status, _ := upload(t, s, owner.sk, pngBytes, "image/png"); status != http.StatusOK {
		t.Fatalf("repeat upload: %d, want 200", status)
	}
}

func TestUploadWithoutContentTypeIsSniffed(t *testing.T) {
	s, owner, _ := teamRelay(t, nil)
	if _, d := upload(t, s, owner.sk, pngBytes, ""); d.Type != "image/png" || !strings.HasSuffix(d.URL, ".png") {
		t.Fatalf("descriptor %+v, want image/png", d)
	}
}

func TestUploadRefusedWithoutAValidUploadToken(t *testing.T) {
	s, owner, _ := teamRelay(t, nil)
	nip98, _ := protocol.SignHTTPAuth(owner.sk, s.HTTPURL+"/upload", http.MethodPut, pngBytes, time.Now())
	getTok, _ := protocol.SignBlobAuth(owner.sk, protocol.BlobGet, []string{sha(pngBytes)}, "", time.Now(), time.Minute)
	expired, _ := protocol.SignBlobAuth(owner.sk, protocol.BlobUpload, []string{sha(pngBytes)}, "", time.Now().Add(-time.Hour), time.Minute)
	unscoped, _ := protocol.SignBlobAuth(owner.sk, protocol.BlobUpload, nil, "", time.Now(), time.Minute)
	otherServer, _ := protocol.SignBlobAuth(owner.sk, protocol.BlobUpload, []string{sha(pngBytes)}, "cdn.example", time.Now(), time.Minute)
	for name, auth := range map[string]string{"none": "", "NIP-98": nip98, "get token": getTok, "expired": expired,
		"no x tag": unscoped, "other server": otherServer} {
		if status, d, h := put(t, s, "/upload", bytes.NewReader(pngBytes), map[string]string{"Authorization": auth}); status != http.StatusUnauthorized || h.Get("X-Reason") == "" {
			t.Errorf("%s: status %d (%s), want 401 with X-Reason", name, status, d.Error)
		}
	}
}

func TestUploadOfBytesTheTokenDoesNotNameStoresNothing(t *testing.T) {
	s, owner, _ := teamRelay(t, nil)
	other := []byte("what the token was signed for")
	status, _, _ := put(t, s, "/upload", bytes.NewReader(pngBytes), map[string]string{"Authorization": uploadToken(t, owner.sk, sha(other))})
	if status != http.StatusForbidden {
		t.Fatalf("status %d, want 403", status)
	}
	if code, _, _ := fetch(t, s, http.MethodGet, "/media/"+sha(pngBytes), getToken(t, owner.sk, sha(pngBytes))); code != http.StatusNotFound {
		t.Fatalf("refused bytes readable: %d", code)
	}
}

func TestUploadRefusedFromAPubkeyInNoChannel(t *testing.T) {
	s, _, _ := teamRelay(t, nil)
	if status, d := upload(t, s, newUser().sk, pngBytes, "image/png"); status != http.StatusForbidden {
		t.Fatalf("stranger's upload: %d (%s), want 403", status, d.Error)
	}
}

func TestUploadOverTheCapIsRefused(t *testing.T) {
	s, owner, _ := teamRelay(t, func(c *relay.Config) { c.MaxBlobBytes = 64 })
	big := bytes.Repeat([]byte("x"), 65)
	if status, _ := upload(t, s, owner.sk, big, "text/plain"); status != http.StatusRequestEntityTooLarge {
		t.Fatalf("declared length over the cap: %d, want 413", status)
	}
	// Without a Content-Length the cap is enforced while reading.
	status, _, _ := put(t, s, "/upload", io.MultiReader(bytes.NewReader(big)), map[string]string{"Authorization": uploadToken(t, owner.sk, sha(big))})
	if status != http.StatusRequestEntityTooLarge {
		t.Fatalf("streamed body over the cap: %d, want 413", status)
	}
	if status, _ := upload(t, s, owner.sk, big[:64], "text/plain"); status != http.StatusCreated {
		t.Fatalf("a blob of exactly the cap: %d, want 201", status)
	}
}

func TestUploadWhoseXSHA256IsNotTheBodyIs409(t *testing.T) {
	s, owner, _ := teamRelay(t, nil)
	other := []byte("other")
	status, _, _ := put(t, s, "/upload", bytes.NewReader(pngBytes), map[string]string{
		"Authorization": uploadToken(t, owner.sk, sha(pngBytes), sha(other)), "X-SHA-256": sha(other)})
	if status != http.StatusConflict {
		t.Fatalf("status %d, want 409", status)
	}
}

func TestReaderOfAMessageMayFetchItsAttachment(t *testing.T) {
	s, owner, ch := teamRelay(t, nil)
	upload(t, s, owner.sk, pngBytes, "image/png")
	s.Publish(t, owner.sk, imetaMsg(ch, pngBytes))
	reader := newUser() // the channel is open: anyone may read it
	code, body, _ := fetch(t, s, http.MethodGet, "/"+sha(pngBytes)+".png", getToken(t, reader.sk, sha(pngBytes)))
	if code != http.StatusOK || !bytes.Equal(body, pngBytes) {
		t.Fatalf("reader's GET: %d %q", code, body)
	}
}

func TestBlobReadsAcceptNIP98AndServerScopedTokens(t *testing.T) {
	s, owner, _ := teamRelay(t, nil)
	upload(t, s, owner.sk, pngBytes, "image/png")
	path := "/media/" + sha(pngBytes) + ".png"
	nip98, _ := protocol.SignHTTPAuth(owner.sk, s.HTTPURL+path, http.MethodGet, nil, time.Now())
	server, _ := protocol.SignBlobAuth(owner.sk, protocol.BlobGet, nil, strings.TrimPrefix(s.HTTPURL, "http://"), time.Now(), 10*time.Minute)
	host, _ := protocol.SignBlobAuth(owner.sk, protocol.BlobGet, nil, "localhost", time.Now(), 10*time.Minute)
	for name, auth := range map[string]string{"NIP-98": nip98, "server host:port": server, "server localhost": host} {
		if code, _, _ := fetch(t, s, http.MethodGet, path, auth); code != http.StatusOK {
			t.Errorf("%s: %d, want 200", name, code)
		}
	}
	if code, _, _ := fetch(t, s, http.MethodGet, path, nip98); code != http.StatusUnauthorized {
		t.Errorf("replayed NIP-98: %d, want 401", code)
	}
}

func TestBlobReadRefusesUnscopedOrLongLivedGetTokens(t *testing.T) {
	s, owner, _ := teamRelay(t, nil)
	upload(t, s, owner.sk, pngBytes, "image/png")
	unscoped, _ := protocol.SignBlobAuth(owner.sk, protocol.BlobGet, nil, "", time.Now(), time.Minute)
	long, _ := protocol.SignBlobAuth(owner.sk, protocol.BlobGet, []string{sha(pngBytes)}, "", time.Now(), 2*time.Hour)
	foreign, _ := protocol.SignBlobAuth(owner.sk, protocol.BlobGet, []string{sha(pngBytes)}, "cdn.example", time.Now(), time.Minute)
	for name, auth := range map[string]string{"none": "", "unscoped": unscoped, "two hours": long, "other server": foreign} {
		if code, _, _ := fetch(t, s, http.MethodGet, "/media/"+sha(pngBytes), auth); code != http.StatusUnauthorized {
			t.Errorf("%s: %d, want 401", name, code)
		}
	}
}

func TestHeadAndRangeRequestsOfABlob(t *testing.T) {
	s, owner, _ := teamRelay(t, nil)
	upload(t, s, owner.sk, pngBytes, "image/png")
	path := "/media/" + sha(pngBytes)
	code, body, h := fetch(t, s, http.MethodHead, path, getToken(t, owner.sk, sha(pngBytes)))
	if code != http.StatusOK || len(body) != 0 || h.Get("Content-Length") != strconv.Itoa(len(pngBytes)) || h.Get("Accept-Ranges") != "bytes" {
		t.Fatalf("HEAD: %d, %d body bytes, headers %v", code, len(body), h)
	}
	req, _ := http.NewRequest(http.MethodGet, s.HTTPURL+path, nil)
	req.Header.Set("Authorization", getToken(t, owner.sk, sha(pngBytes)))
	req.Header.Set("Range", "bytes=0-3")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	part, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusPartialContent || !bytes.Equal(part, pngBytes[:4]) {
		t.Fatalf("range: %d %q", resp.StatusCode, part)
	}
}
