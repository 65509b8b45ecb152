package cli_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/cli"
	"github.com/buzz-harness/buzz/internal/client"
	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/protocol/observerframe"
	"github.com/buzz-harness/buzz/internal/protocol/ownerauth"
	"github.com/buzz-harness/buzz/internal/relay/relaytest"
	"github.com/buzz-harness/buzz/internal/testwait"
)

// lockedBuffer is stdout shared between the command and the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// attestedAgent is an agent key its owner attested, publishing over a WebSocket.
type attestedAgent struct {
	sk, pk string
	auth   nostr.Tag
	live   *client.Live
}

func newAttestedAgent(t *testing.T, relayURL, ownerSK string) *attestedAgent {
	t.Helper()
	a := &attestedAgent{sk: nostr.GeneratePrivateKey()}
	a.pk, _ = protocol.PublicKey(a.sk)
	tag, err := ownerauth.Issue(ownerSK, a.pk, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	a.auth = tag.NostrTag()
	a.live = client.NewLive(client.LiveConfig{RelayURL: relayURL, SecretKey: a.sk})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = a.live.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return a
}

func (a *attestedAgent) frame(t *testing.T, owner string, seq uint64) {
	t.Helper()
	ev, err := observerframe.BuildTelemetry(a.sk, owner, a.auth, observerframe.Event{Seq: seq, Kind: observerframe.KindTurnLiveness, Payload: []byte(`{"n":1}`)}, time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.live.Publish(ctx, &ev); err != nil {
		t.Fatalf("frame refused: %v", err)
	}
}

func TestObserveStreamsTheAgentsDecryptedFramesAsJSONLines(t *testing.T) {
	t.Parallel()
	s := relaytest.Start(t)
	ownerSK := nostr.GeneratePrivateKey()
	ownerPK, _ := protocol.PublicKey(ownerSK)
	agent := newAttestedAgent(t, s.URL, ownerSK)
	other := newAttestedAgent(t, s.URL, ownerSK)

	var out, errb lockedBuffer
	cmd := cli.NewRootCommand(cli.IO{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb,
		Env: func(k string) string {
			return map[string]string{"BUZZ_RELAY_URL": s.URL, "BUZZ_PRIVATE_KEY": ownerSK}[k]
		}})
	cmd.SetArgs([]string{"observe", "--agent", agent.pk})
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- cmd.ExecuteContext(ctx) }()

	var seq uint64
	testwait.Eventually(t, 30*time.Second, func() bool {
		seq++
		other.frame(t, ownerPK, seq)
		agent.frame(t, ownerPK, seq)
		return strings.Contains(out.String(), `"kind":"turn_liveness"`)
	}, "a frame on stdout")
	cancel()
	if err := <-ran; err != nil {
		t.Fatalf("observe: %v (stderr %s)", err, errb.String())
	}
	sc := bufio.NewScanner(strings.NewReader(out.String()))
	for sc.Scan() {
		var line struct {
			Agent   string          `json:"agent"`
			EventID string          `json:"eventId"`
			Seq     uint64          `json:"seq"`
			Kind    string          `json:"kind"`
			Payload json.RawMessage `json:"payload"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("not a JSON line: %q", sc.Text())
		}
		if line.Agent != agent.pk || line.Kind != "turn_liveness" || string(line.Payload) != `{"n":1}` || line.EventID == "" {
			t.Fatalf("line %s", sc.Text())
		}
	}
}

func TestObserveWithABadAgentIsAUsageError(t *testing.T) {
	t.Parallel()
	var out, errb bytes.Buffer
	code := cli.Main([]string{"observe", "--agent", "nope"}, cli.IO{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb,
		Env: func(k string) string {
			return map[string]string{"BUZZ_RELAY_URL": "http://127.0.0.1:1", "BUZZ_PRIVATE_KEY": nostr.GeneratePrivateKey()}[k]
		}})
	if code != cli.ExitUsage || !strings.Contains(errb.String(), "--agent") {
		t.Fatalf("exit %d stderr %s", code, errb.String())
	}
}
