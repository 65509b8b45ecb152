// Package bare is the "verify-only ceiling" for the peer benchmark: a WebSocket server that
// does the least a relay must do per event — parse the EVENT frame, check its id and
// signature, answer OK, and forward it to every live REQ whose filters match. It stores
// nothing, knows no AUTH and no channels, so no real relay can beat it on the same machine.
package bare

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"

	"github.com/coder/websocket"
	"github.com/nbd-wtf/go-nostr"
)

// sendBuffer bounds each connection's outgoing queue; a full queue blocks the sender, which
// is the honest back-pressure for a benchmark (nothing is dropped).
const sendBuffer = 4096

// Server accepts WebSocket connections on any path.
type Server struct {
	mu    sync.RWMutex
	conns map[*conn]struct{}
}

// New returns an empty server.
func New() *Server { return &Server{conns: map[*conn]struct{}{}} }

type conn struct {
	ws  *websocket.Conn
	out chan []byte
	ctx context.Context // done once the connection is gone

	mu   sync.Mutex
	subs map[string]nostr.Filters
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return
	}
	ws.SetReadLimit(1 << 20)
	ctx, cancel := context.WithCancel(context.Background())
	c := &conn{ws: ws, out: make(chan []byte, sendBuffer), ctx: ctx, subs: map[string]nostr.Filters{}}
	s.mu.Lock()
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		cancel()
		ws.CloseNow()
	}()
	go func() {
		for {
			select {
			case b := <-c.out:
				if ws.Write(ctx, websocket.MessageText, b) != nil {
					cancel()
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	for {
		_, data, err := ws.Read(ctx)
		if err != nil {
			return
		}
		s.handle(c, data)
	}
}

func (c *conn) send(b []byte) {
	select {
	case c.out <- b:
	case <-c.ctx.Done():
	}
}

func (s *Server) handle(c *conn, data []byte) {
	var frame []json.RawMessage
	var label string
	if json.Unmarshal(data, &frame) != nil || len(frame) < 2 || json.Unmarshal(frame[0], &label) != nil {
		c.send(notice("could not parse frame"))
		return
	}
	switch label {
	case "EVENT":
		var ev nostr.Event
		if err := json.Unmarshal(frame[1], &ev); err != nil {
			c.send(notice("bad event: " + err.Error()))
			return
		}
		reason := ""
		if !ev.CheckID() {
			reason = "invalid: id does not match the event"
		} else if ok, _ := ev.CheckSignature(); !ok {
			reason = "invalid: bad signature"
		}
		ok, _ := json.Marshal([]any{"OK", ev.ID, reason == "", reason})
		c.send(ok)
		if reason == "" {
			s.fanOut(&ev, frame[1])
		}
	case "REQ":
		var id string
		if json.Unmarshal(frame[1], &id) != nil {
			c.send(notice("bad subscription id"))
			return
		}
		fs := make(nostr.Filters, 0, len(frame)-2)
		for _, raw := range frame[2:] {
			var f nostr.Filter
			if err := json.Unmarshal(raw, &f); err != nil {
				c.send(notice("bad filter: " + err.Error()))
				return
			}
			fs = append(fs, f)
		}
		c.mu.Lock()
		c.subs[id] = fs
		c.mu.Unlock()
		eose, _ := json.Marshal([]any{"EOSE", id})
		c.send(eose)
	case "CLOSE":
		var id string
		json.Unmarshal(frame[1], &id)
		c.mu.Lock()
		delete(c.subs, id)
		c.mu.Unlock()
	default:
		c.send(notice("unsupported frame " + label))
	}
}

// fanOut forwards the event's original bytes (no re-encoding) to each matching subscription.
func (s *Server) fanOut(ev *nostr.Event, raw json.RawMessage) {
	s.mu.RLock()
	targets := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		targets = append(targets, c)
	}
	s.mu.RUnlock()
	for _, c := range targets {
		c.mu.Lock()
		var ids []string
		for id, fs := range c.subs {
			if fs.Match(ev) {
				ids = append(ids, id)
			}
		}
		c.mu.Unlock()
		for _, id := range ids {
			b := make([]byte, 0, len(raw)+len(id)+16)
			b = append(b, `["EVENT",`...)
			quoted, _ := json.Marshal(id)
			b = append(b, quoted...)
			b = append(b, ',')
			b = append(b, raw...)
			b = append(b, ']')
			c.send(b)
		}
	}
}

func notice(msg string) []byte {
	b, _ := json.Marshal([]any{"NOTICE", msg})
	return b
}
