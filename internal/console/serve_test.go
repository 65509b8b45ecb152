package console_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/console"
	"github.com/buzz-harness/buzz/internal/leakcheck"
	"github.com/buzz-harness/buzz/internal/observer"
	"github.com/buzz-harness/buzz/internal/relay/relaytest"
)

// Serve returns only once what it started is gone: the connections and the requests on them
// (an open event stream here), and the chat's relay session with the goroutines under it.
func TestServeReturnsOnlyOnceItsRequestsAndRelaySessionAreGone(t *testing.T) {
	relay := relaytest.Start(t)
	ownerSK := nostr.GeneratePrivateKey()
	ch := relay.CreateChannel(t, ownerSK, "general", false)
	s, err := console.New(console.Config{RelayURL: relay.URL, OwnerKey: ownerSK, Bus: observer.NewBus(10)})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := console.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- console.Serve(ctx, ln, s) }()
	base := "http://" + ln.Addr().String()

	sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer scancel()
	req, _ := http.NewRequestWithContext(sctx, http.MethodGet, base+"/api/stream?token="+s.Token(), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	stream := bufio.NewReader(resp.Body)
	for readSSE(t, stream).name != "ready" {
	}
	// The message's live copy on the stream shows the relay session up and delivering.
	body, _ := json.Marshal(map[string]string{"channel": ch, "content": "hello"})
	post, _ := http.NewRequest(http.MethodPost, base+"/api/messages", bytes.NewReader(body))
	post.Header.Set("X-Buzz-Token", s.Token())
	presp, err := http.DefaultClient.Do(post)
	if err != nil || presp.StatusCode != http.StatusOK {
		t.Fatalf("post: %v %v", presp, err)
	}
	presp.Body.Close()
	for ev := readSSE(t, stream); ev.name != "message"; ev = readSSE(t, stream) {
	}

	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
	for _, fn := range []string{"github.com/buzz-harness/buzz/internal/console.", "github.com/buzz-harness/buzz/internal/client.(*Live)."} {
		if left := leakcheck.Running(fn); len(left) > 0 {
			t.Errorf("%d goroutine(s) in %s after Serve returned:\n%s", len(left), fn, strings.Join(left, "\n\n"))
		}
	}
}
