package console_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

func TestConsoleAttachedImageShowsInlineAndReachesTheAgent(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	info, _ := upWithTestAgent(t, newPlace(t), "TESTAGENT_IMAGE=1", "TESTAGENT_REPLY=images: {images}")
	var buf bytes.Buffer
	if err := png.Encode(&buf, image.NewRGBA(image.Rect(0, 0, 3, 2))); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "screen.png")
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(buf.Bytes())

	err := chromedp.Do(ctx,
		chromedp.Navigate(info.ConsoleURL),
		chromedp.WaitVisible(chromedp.CSS(`#channels li.active`)),
		chromedp.SetUploadFiles(chromedp.CSS(`#attach-file`), []string{path}),
		chromedp.WaitVisible(chromedp.CSS(`.attach-chip[data-sha256="`+hex.EncodeToString(sum[:])+`"]`)),
		chromedp.SendKeys(chromedp.CSS(`#compose-text`), "@"+info.AgentName+" what is on this screen?"),
		chromedp.Click(chromedp.CSS(`#send`)),
	)
	if err != nil {
		t.Fatalf("attach and send: %v", err)
	}
	// Our message shows the picture, loaded through the console from the relay.
	mine := `.msg[data-pubkey="` + info.Owner.Pubkey + `"] img.attachment-img`
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`(() => { const i = document.querySelector(`+jsString(mine)+`); return !!i && i.complete && i.naturalWidth === 3 })()`)); err != nil {
		t.Fatalf("the attached image never showed inline: %v", err)
	}
	// The live stream may show the message before the send's POST has answered, which is when
	// the chips go.
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelectorAll('.attach-chip').length === 0`)); err != nil {
		n, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('.attach-chip').length`))
		t.Errorf("%d attachment chips left after sending (%v)", n, err)
	}
	// The agent, which advertises images, got it as an image block.
	reply := `.thread .msg[data-pubkey="` + info.Agent.Pubkey + `"] .body`
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(reply))); err != nil {
		t.Fatalf("no agent reply: %v", err)
	}
	bodies, err := textsOf(ctx, reply)
	if err != nil {
		t.Fatal(err)
	}
	if want := "images: image/png:" + hex.EncodeToString(sum[:]); len(bodies) != 1 || !strings.Contains(bodies[0], want) {
		t.Fatalf("agent reply %q, want %q", bodies, want)
	}
}
