package console_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/console"
	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/relay/relaytest"
)

// attachConsole is a console for an owner of one open channel on a real relay.
func attachConsole(t *testing.T) (r *relaytest.Server, ts *httptest.Server, token, channel, ownerSK string) {
	t.Helper()
	r = relaytest.Start(t)
	ownerSK = nostr.GeneratePrivateKey()
	channel = r.CreateChannel(t, ownerSK, "general", false)
	s, err := console.New(console.Config{RelayURL: r.URL, OwnerKey: ownerSK})
	if err != nil {
		t.Fatal(err)
	}
	ts = httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return r, ts, s.Token(), channel, ownerSK
}

// call sends method path with body as the console's page does and decodes the JSON answer.
func call(t *testing.T, ts *httptest.Server, token, method, path, typ string, body []byte, out any) int {
	t.Helper()
	req, _ := http.NewRequest(method, ts.URL+path, bytes.NewReader(body))
	req.Header.Set("X-Buzz-Token", token)
	req.Header.Set("Content-Type", typ)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil {
		json.Unmarshal(raw, out)
	}
	return resp.StatusCode
}

type consoleAttachment struct {
	URL, Type, SHA256, Src, Alt string
	Size                        int64
}

var pngShot = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR the console's screenshot")

func TestConsoleUploadsAndPostsAnAttachmentShownInline(t *testing.T) {
	r, ts, token, ch, ownerSK := attachConsole(t)
	var up consoleAttachment
	if code := call(t, ts, token, "POST", "/api/upload", "image/png", pngShot, &up); code != http.StatusOK || up.Type != "image/png" {
		t.Fatalf("upload: %d %+v", code, up)
	}
	up.Alt = "screen.png"
	body, _ := json.Marshal(map[string]any{"channel": ch, "content": "see this", "attachments": []consoleAttachment{up}})
	var m struct {
		ID          string
		Content     string
		Attachments []consoleAttachment
	}
	if code := call(t, ts, token, "POST", "/api/messages", "application/json", body, &m); code != http.StatusOK {
		t.Fatalf("post: %d", code)
	}
	if len(m.Attachments) != 1 || m.Attachments[0].Src != "/api/blob/"+up.SHA256 || m.Content != "see this\n"+up.URL {
		t.Fatalf("message %+v", m)
	}
	evs := r.Query(t, ownerSK, nostr.Filter{IDs: []string{m.ID}})
	if got := protocol.Attachments(evs[0].Tags); len(got) != 1 || got[0].SHA256 != up.SHA256 || got[0].Alt != "screen.png" {
		t.Fatalf("stored imeta %+v", got)
	}
	req, _ := http.NewRequest("GET", ts.URL+m.Attachments[0].Src+"?token="+token, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	img, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !bytes.Equal(img, pngShot) || resp.Header.Get("Content-Type") != "image/png" {
		t.Fatalf("inline image: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

func TestConsoleRefusesAnAttachmentItDidNotUpload(t *testing.T) {
	_, ts, token, ch, _ := attachConsole(t)
	foreign := consoleAttachment{URL: "https://elsewhere.example/media/" + strings.Repeat("a", 64) + ".png", SHA256: strings.Repeat("a", 64), Type: "image/png"}
	body, _ := json.Marshal(map[string]any{"channel": ch, "content": "x", "attachments": []consoleAttachment{foreign}})
	if code := call(t, ts, token, "POST", "/api/messages", "application/json", body, nil); code != http.StatusBadRequest {
		t.Fatalf("post with a foreign attachment: %d, want 400", code)
	}
}

func TestConsoleServesOnlyImagesFromItsOrigin(t *testing.T) {
	_, ts, token, _, _ := attachConsole(t)
	page := []byte("<html><script>steal(location.search)</script></html>")
	var up consoleAttachment
	if code := call(t, ts, token, "POST", "/api/upload", "text/html", page, &up); code != http.StatusOK {
		t.Fatalf("upload: %d", code)
	}
	resp, err := http.Get(ts.URL + "/api/blob/" + up.SHA256 + "?token=" + token)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Fatalf("an HTML blob through the console: %d, want 415 (it would run with the console's token)", resp.StatusCode)
	}
}
