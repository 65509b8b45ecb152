package client

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/coder/websocket"
	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/leakcheck"
)

// pipeRelay is a scripted relay for synctest bubbles: each dial gets an in-memory net.Pipe whose
// far end is accepted as a WebSocket and handed to the test. A pipe has no buffer and nothing
// reads it unless the test does, so a test that stops reading is a relay that stopped reading:
// the client's next write blocks until it reads again.
type pipeRelay struct{ conns chan *pipeConn }

type pipeConn struct {
	t  *testing.T
	ws *websocket.Conn
	nc net.Conn // the relay's end of the pipe, under ws
}

func newPipeRelay() *pipeRelay { return &pipeRelay{conns: make(chan *pipeConn, 8)} }

func (pr *pipeRelay) dial(ctx context.Context, url string) (*websocket.Conn, error) {
	cli, srv := net.Pipe()
	go pr.serve(srv)
	ws, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPClient: &http.Client{Transport: pipeTransport{cli}}})
	return ws, err
}

func (pr *pipeRelay) serve(nc net.Conn) {
	br := bufio.NewReader(nc)
	req, err := http.ReadRequest(br)
	if err != nil {
		nc.Close()
		return
	}
	w := &hijackWriter{nc: nc, brw: bufio.NewReadWriter(br, bufio.NewWriter(nc)), header: http.Header{}}
	ws, err := websocket.Accept(w, req, nil)
	if err != nil {
		nc.Close()
		return
	}
	pr.conns <- &pipeConn{ws: ws, nc: nc}
}

// accept returns the next connection, once the client has dialled it.
func (pr *pipeRelay) accept(t *testing.T) *pipeConn {
	t.Helper()
	pc := <-pr.conns
	pc.t = t
	return pc
}

// pipeTransport performs the WebSocket handshake's one HTTP exchange on a pipe.
type pipeTransport struct{ nc net.Conn }

func (p pipeTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := req.Write(p.nc); err != nil {
		return nil, err
	}
	br := bufio.NewReader(p.nc)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return nil, err
	}
	resp.Body = &upgraded{br: br, Conn: p.nc}
	return resp, nil
}

// upgraded is the switched connection as the dialler wants it: a ReadWriteCloser body.
type upgraded struct {
	br *bufio.Reader
	net.Conn
}

func (u *upgraded) Read(p []byte) (int, error) { return u.br.Read(p) }

// hijackWriter lets websocket.Accept answer a request read off a pipe.
type hijackWriter struct {
	nc     net.Conn
	brw    *bufio.ReadWriter
	header http.Header
}

func (w *hijackWriter) Header() http.Header { return w.header }

func (w *hijackWriter) Write(p []byte) (int, error) { return w.nc.Write(p) }

func (w *hijackWriter) WriteHeader(code int) {
	fmt.Fprintf(w.brw, "HTTP/1.1 %d %s\r\n", code, http.StatusText(code))
	_ = w.header.Write(w.brw)
	fmt.Fprint(w.brw, "\r\n")
	_ = w.brw.Flush()
}

func (w *hijackWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) { return w.nc, w.brw, nil }

func (pc *pipeConn) send(vals ...any) {
	raw, _ := json.Marshal(vals)
	if err := pc.ws.Write(context.Background(), websocket.MessageText, raw); err != nil {
		pc.t.Fatalf("relay write: %v", err)
	}
}

// next reads the client's next frame and checks its label and first field.
func (pc *pipeConn) next(label, first string) []json.RawMessage {
	pc.t.Helper()
	_, raw, err := pc.ws.Read(context.Background())
	if err != nil {
		pc.t.Fatalf("waiting for %s %s: %v", label, first, err)
	}
	var arr []json.RawMessage
	var gotLabel, gotFirst string
	if json.Unmarshal(raw, &arr) != nil || len(arr) < 2 || json.Unmarshal(arr[0], &gotLabel) != nil {
		pc.t.Fatalf("client sent %s, want %s %s", raw, label, first)
	}
	_ = json.Unmarshal(arr[1], &gotFirst)
	if gotLabel != label || first != "" && gotFirst != first {
		pc.t.Fatalf("client sent %s %s, want %s %s", gotLabel, gotFirst, label, first)
	}
	return arr
}

// authenticate challenges the client and accepts its AUTH, which must be its first frame.
func (pc *pipeConn) authenticate() {
	pc.t.Helper()
	pc.send("AUTH", "challenge")
	var ev nostr.Event
	if err := json.Unmarshal(pc.next("AUTH", "")[1], &ev); err != nil || ev.Kind != 22242 {
		pc.t.Fatalf("AUTH frame carries %+v (%v), want a kind 22242 event", ev, err)
	}
	pc.send("OK", ev.ID, true, "")
}

func runPipeLive(t *testing.T, pr *pipeRelay, setup func(*Live)) *Live {
	l := NewLive(LiveConfig{RelayURL: "ws://relay.test", SecretKey: nostr.GeneratePrivateKey(),
		Backoff: func(int) time.Duration { return time.Second }})
	l.dial = pr.dial
	if setup != nil {
		setup(l)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return l
}

func TestLiveSubscribeAndUnsubscribeDoNotWaitForARelayThatStoppedReading(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pr := newPipeRelay()
		l := runPipeLive(t, pr, func(l *Live) { l.Subscribe("a", nostr.Filter{Kinds: []int{1}}) })
		rc := pr.accept(t)
		rc.authenticate()
		rc.next("REQ", "a")
		<-l.Connected()

		// The relay reads nothing now: the first frame blocks the writer, the rest wait behind it.
		start := time.Now()
		l.Subscribe("b", nostr.Filter{Kinds: []int{2}})
		l.Subscribe("c", nostr.Filter{Kinds: []int{3}})
		l.Unsubscribe("b")
		l.Subscribe("a", nostr.Filter{Kinds: []int{4}})
		synctest.Wait()
		if waited := time.Since(start); waited != 0 {
			t.Fatalf("Subscribe/Unsubscribe waited %v on a relay that is not reading", waited)
		}

		// Reading again, the relay gets every change in call order, on the same connection.
		rc.next("REQ", "b")
		rc.next("REQ", "c")
		rc.next("CLOSE", "b")
		var f nostr.Filter
		_ = json.Unmarshal(rc.next("REQ", "a")[2], &f)
		if !slices.Equal(f.Kinds, []int{4}) {
			t.Fatalf("re-sent REQ a has kinds %v, want the newest filter's [4]", f.Kinds)
		}
		select {
		case <-pr.conns:
			t.Fatal("client reconnected; the stall should only have delayed its writes")
		default:
		}
	})
}

func TestLiveSendQueueOverflowReconnectsWithTheDesiredSubscriptions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pr := newPipeRelay()
		l := runPipeLive(t, pr, func(l *Live) {
			l.maxFrames = 3
			l.Subscribe("a", nostr.Filter{Kinds: []int{1}})
		})
		rc := pr.accept(t)
		rc.authenticate()
		rc.next("REQ", "a")
		<-l.Connected()

		// The relay stops reading: "b" blocks the writer, three frames fill the queue and the
		// fourth overflows it.
		l.Subscribe("b", nostr.Filter{Kinds: []int{2}})
		synctest.Wait()
		l.Subscribe("c", nostr.Filter{Kinds: []int{3}})
		l.Subscribe("d", nostr.Filter{Kinds: []int{4}})
		l.Unsubscribe("a")
		l.Unsubscribe("c") // overflow: dropped, the connection with it

		// The next connection gets AUTH first, then exactly the desired state.
		rc2 := pr.accept(t)
		rc2.authenticate()
		var got []string
		for range 2 {
			var id string
			_ = json.Unmarshal(rc2.next("REQ", "")[1], &id)
			got = append(got, id)
		}
		slices.Sort(got)
		if !slices.Equal(got, []string{"b", "d"}) {
			t.Fatalf("after the overflow the client re-subscribed %v, want [b d]", got)
		}
		<-l.Connected()
		if subs := l.Subscriptions(); len(subs) != 2 {
			t.Fatalf("desired subscriptions %v, want b and d", subs)
		}
	})
}

// holdLog holds the goroutine that logs msg, once, until release is closed; held is closed
// when it arrives.
type holdLog struct {
	msg           string
	held, release chan struct{}
}

func (h holdLog) Enabled(context.Context, slog.Level) bool { return true }
func (h holdLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h holdLog) WithGroup(string) slog.Handler            { return h }

func (h holdLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		close(h.held)
		<-h.release
	}
	return nil
}

// The relay reads frames but never answers a ping: the pinger gives up after the pong timeout
// and is held in its log call. Run, stopped meanwhile, must not return before the pinger has.
func TestLiveRunReturnsOnlyOnceItsPingerHasReturned(t *testing.T) {
	const pinger = "github.com/buzz-harness/buzz/internal/client.(*Live).pinger"
	synctest.Test(t, func(t *testing.T) {
		pr := newPipeRelay()
		hold := holdLog{msg: "relay ping failed; dropping connection", held: make(chan struct{}), release: make(chan struct{})}
		l := NewLive(LiveConfig{RelayURL: "ws://relay.test", SecretKey: nostr.GeneratePrivateKey(),
			PingInterval: time.Second, Logger: slog.New(hold)})
		l.dial = pr.dial
		ctx, cancel := context.WithCancel(context.Background())
		ran := make(chan struct{})
		go func() {
			defer close(ran)
			l.Run(ctx)
		}()
		rc := pr.accept(t)
		rc.authenticate()
		<-l.Connected()
		go io.Copy(io.Discard, rc.nc) // read everything, answer nothing

		<-hold.held
		cancel()
		synctest.Wait()
		select {
		case <-ran:
			t.Fatalf("Run returned while its pinger still ran:\n%s", strings.Join(leakcheck.Running(pinger), "\n\n"))
		default:
		}
		close(hold.release)
		<-ran
		if left := leakcheck.Running(pinger); len(left) > 0 {
			t.Fatalf("pinger still running after Run returned:\n%s", strings.Join(left, "\n\n"))
		}
	})
}
