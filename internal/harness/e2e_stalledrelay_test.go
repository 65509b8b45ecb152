package harness_test

import (
	"bytes"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
)

// stallProxy forwards TCP between buzz-acp and the relay. pause stops reading what buzz-acp sends
// on its open WebSocket connections, as a relay that stops reading would; the relay's traffic to
// buzz-acp and every other connection (HTTP queries, the agent's CLI) still flow. swallow holds
// back, for good, whatever buzz-acp sends that contains a marker (a publish that never arrives);
// queries counts its HTTP queries.
type stallProxy struct {
	t      testing.TB
	ln     net.Listener
	target string

	mu       sync.Mutex
	ws       []*gate
	closed   bool
	marker   []byte        // swallow: bytes containing it are never forwarded
	dropped  chan struct{} // closed by drop: the connections holding swallowed bytes close
	held     int           // sends swallowed so far
	queryLog []proxyQuery  // each POST /query that went upstream
}

// proxyQuery is one of buzz-acp's HTTP queries: when it went upstream, and the bytes it came in
// (its request line, headers and, usually, its filters).
type proxyQuery struct {
	at    time.Time
	bytes string
}

// gate holds a connection's upstream copy while closed.
type gate struct {
	mu   sync.Mutex
	open chan struct{} // nil while running; a channel closed on resume while paused
}

func (g *gate) wait() {
	g.mu.Lock()
	ch := g.open
	g.mu.Unlock()
	if ch != nil {
		<-ch
	}
}

func startStallProxy(t testing.TB, relayURL string) *stallProxy {
	t.Helper()
	target := strings.TrimPrefix(strings.TrimPrefix(relayURL, "http://"), "ws://")
	_, port, err := net.SplitHostPort(target)
	if err != nil {
		t.Fatal(err)
	}
	// The relay accepts NIP-42/NIP-98 only for its own port under a loopback name, so the proxy
	// takes the same port on [::1] (the relay listens on 127.0.0.1).
	ln, err := net.Listen("tcp", net.JoinHostPort("::1", port))
	if err != nil {
		t.Fatal(err)
	}
	p := &stallProxy{t: t, ln: ln, target: target}
	go p.serve()
	t.Cleanup(func() {
		p.mu.Lock()
		p.closed = true
		p.mu.Unlock()
		p.resume()
		p.drop()
		ln.Close()
	})
	return p
}

func (p *stallProxy) url() string { return "http://" + p.ln.Addr().String() }

func (p *stallProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		go func() { // relay → buzz-acp always flows
			_, _ = io.Copy(c, up)
			c.Close()
		}()
		go p.upstream(c, up)
	}
}

// upstream copies buzz-acp → relay, registering WebSocket upgrades so pause can hold them.
func (p *stallProxy) upstream(c, up net.Conn) {
	defer up.Close()
	buf := make([]byte, 32<<10)
	var g *gate
	var frames *wsFrames // after the upgrade: what buzz-acp sends, frame by frame
	for first := true; ; first = false {
		n, err := c.Read(buf)
		if n > 0 {
			out, seen := buf[:n], buf[:n]
			if frames != nil {
				out, seen = frames.add(buf[:n])
			}
			if first && bytes.Contains(bytes.ToLower(buf[:n]), []byte("upgrade: websocket")) {
				g = &gate{}
				p.mu.Lock()
				p.ws = append(p.ws, g)
				p.mu.Unlock()
				frames = &wsFrames{}
			}
			if g != nil {
				g.wait()
			}
			if p.swallowed(seen) {
				return
			}
			if _, err := up.Write(out); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// wsFrames cuts the client side of a WebSocket into whole frames. A client masks each frame's
// payload, so a marker in a publish is not in the bytes on the wire: add returns the whole
// frames received so far as they were sent (out) and their payloads unmasked (seen).
type wsFrames struct{ pending []byte }

func (w *wsFrames) add(b []byte) (out, seen []byte) {
	w.pending = append(w.pending, b...)
	for {
		f := w.pending
		if len(f) < 2 {
			break
		}
		n, head := int(f[1]&0x7f), 2
		switch n {
		case 126:
			if len(f) < 4 {
				return out, seen
			}
			n, head = int(f[2])<<8|int(f[3]), 4
		case 127:
			if len(f) < 10 {
				return out, seen
			}
			n, head = 0, 10
			for _, c := range f[2:10] {
				n = n<<8 | int(c)
			}
		}
		var key []byte
		if f[1]&0x80 != 0 {
			key, head = f[head:min(head+4, len(f))], head+4
		}
		if len(f) < head+n {
			break
		}
		payload := slices.Clone(f[head : head+n])
		for i := range payload {
			if key != nil {
				payload[i] ^= key[i%4]
			}
		}
		out, seen = append(out, f[:head+n]...), append(seen, payload...)
		w.pending = f[head+n:]
	}
	w.pending = slices.Clone(w.pending)
	return out, seen
}

// swallowed reports whether b holds the swallow marker, then waits for drop; it also counts
// the queries in b.
func (p *stallProxy) swallowed(b []byte) bool {
	p.mu.Lock()
	for _, part := range bytes.Split(b, []byte("POST /query "))[1:] {
		p.queryLog = append(p.queryLog, proxyQuery{at: time.Now(), bytes: string(part)})
	}
	hit := p.marker != nil && bytes.Contains(b, p.marker)
	if hit {
		p.held++
	}
	dropped := p.dropped
	p.mu.Unlock()
	if hit {
		<-dropped
	}
	return hit
}

// swallow holds back everything buzz-acp sends that contains marker, until drop closes the
// connections that carried it (the bytes never reach the relay).
func (p *stallProxy) swallow(marker string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.marker, p.dropped = []byte(marker), make(chan struct{})
}

func (p *stallProxy) drop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.marker != nil {
		p.marker = nil
		close(p.dropped)
	}
}

// swallowedCount is how many sends swallow has held back.
func (p *stallProxy) swallowedCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held
}

// queries are buzz-acp's HTTP queries, in order.
func (p *stallProxy) queries() []proxyQuery {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.queryLog)
}

func (p *stallProxy) pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, g := range p.ws {
		g.mu.Lock()
		if g.open == nil {
			g.open = make(chan struct{})
		}
		g.mu.Unlock()
	}
}

func (p *stallProxy) resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, g := range p.ws {
		g.mu.Lock()
		if g.open != nil {
			close(g.open)
			g.open = nil
		}
		g.mu.Unlock()
	}
}

func (s *stack) post(ch, text string) nostr.Event {
	s.t.Helper()
	ev := nostr.Event{Kind: 9, Content: text, CreatedAt: nostr.Now(), Tags: nostr.Tags{{"h", ch}, {"p", s.agentPK}}}
	if err := ev.Sign(s.ownerSK); err != nil {
		s.t.Fatal(err)
	}
	s.relay.Publish(s.t, s.ownerSK, ev)
	return ev
}

// While the relay reads nothing buzz-acp sends, joining and leaving channels (REQ and CLOSE)
// must not hold up the loop: mentions in other channels are still prompted, and the join takes
// effect once the relay reads again.
func TestRelayThatStopsReadingDoesNotStopTheHarness(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	third := s.relay.CreateChannel(t, s.ownerSK, "third", false)
	s.relay.AddMember(t, s.ownerSK, third, s.agentPK, "bot")
	proxy := startStallProxy(t, s.relay.URL)
	s.start([]string{"--relay-url", proxy.url()}, "TESTAGENT_NO_CLI=1")
	s.waitPrompted(s.post(s.channel, "before the stall").ID)

	proxy.pause()
	second := s.relay.CreateChannel(t, s.ownerSK, "second", false)
	s.relay.AddMember(t, s.ownerSK, second, s.agentPK, "bot")
	s.waitLog("name=second", 20*time.Second) // logged once Subscribe returned
	s.relay.Publish(t, s.ownerSK, nostr.Event{Kind: protocol.KindRemoveUser, CreatedAt: nostr.Now(),
		Tags: nostr.Tags{{"h", third}, {"p", s.agentPK}}})
	s.waitLog("left channel", 20*time.Second) // logged once Unsubscribe returned
	s.waitPrompted(s.post(s.channel, "during the stall").ID)

	proxy.resume()
	s.waitPrompted(s.post(second, "in the channel joined during the stall").ID)
}
