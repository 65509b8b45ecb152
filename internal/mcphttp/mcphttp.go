// Package mcphttp offers stdio MCP servers over MCP's streamable HTTP transport (2025-03-26 and
// later), for agents that take only HTTP MCP servers (Copilot).
//
// A Bridge listens on 127.0.0.1 only and serves each server at its own path, /<name>. Every
// request must carry the bridge's secret as "Authorization: Bearer <secret>"; anything else is
// 401. An initialize request without an Mcp-Session-Id header starts the server's command, just
// as an agent would start a stdio server, and the response names the new session; the session's
// later requests are relayed to that process, one JSON-RPC message per POST, and its answers
// come back as application/json. DELETE (or an idle timeout, or Close) ends the process.
//
// The bridge relays client→server requests and notifications and their responses. It keeps no
// standalone SSE stream (GET is 405, as the spec allows), so what the server says on its own —
// a notification, or a request to the client — has nowhere to go: notifications are dropped and
// requests are answered with a JSON-RPC error, so the server does not wait for them.
package mcphttp

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// Command is how one stdio server is started: the same command, arguments and extra environment
// the agent would have been given in its stdio mcpServers entry.
type Command struct {
	Path string
	Args []string
	Env  []string // KEY=value, added to (and overriding) the bridge process's environment
}

// DefaultIdleTimeout ends a session nobody has used for this long, so the processes of an agent
// that died without a DELETE do not pile up. A client that comes back gets 404 and, as the
// transport requires, initializes a new session.
const DefaultIdleTimeout = time.Hour

const (
	sessionHeader = "Mcp-Session-Id"
	maxBody       = 4 << 20 // one JSON-RPC message; the buzz tools take a message or a canvas
)

// Bridge is the listener and its sessions. Its zero value is not usable; call Start.
type Bridge struct {
	url         string
	secret      string
	servers     map[string]Command
	log         *slog.Logger
	srv         *http.Server
	idleTimeout time.Duration

	mu       sync.Mutex
	sessions map[string]*session
	closed   bool
	wg       sync.WaitGroup // the server loop, and each session's reader and reaper: Close waits
}

// Options are Start's optional settings.
type Options struct {
	Logger      *slog.Logger  // nil: no logs
	IdleTimeout time.Duration // 0: DefaultIdleTimeout
	// Stderr gives each session's process its stderr; nil, or a nil writer: discarded.
	Stderr func(server string) io.Writer
}

// Start listens on a random loopback port with a new random secret and serves the named servers.
func Start(servers map[string]Command, opts Options) (*Bridge, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("mcp http bridge: listen: %w", err)
	}
	b := &Bridge{
		url:         "http://" + ln.Addr().String(),
		secret:      rand.Text(),
		servers:     servers,
		log:         opts.Logger,
		idleTimeout: opts.IdleTimeout,
		sessions:    map[string]*session{},
	}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	if b.idleTimeout <= 0 {
		b.idleTimeout = DefaultIdleTimeout
	}
	b.srv = &http.Server{Handler: b.handler(opts.Stderr), ReadHeaderTimeout: 10 * time.Second}
	b.wg.Go(func() { _ = b.srv.Serve(ln) })
	return b, nil
}

// URL is the endpoint of the named server.
func (b *Bridge) URL(name string) string { return b.url + "/" + name }

// Authorization is the Authorization header value every request must carry.
func (b *Bridge) Authorization() string { return "Bearer " + b.secret }

// Close stops listening, ends every session's process and waits until they are reaped (a
// server that ignores the end of its stdin is killed after 5 s).
func (b *Bridge) Close() error {
	b.mu.Lock()
	b.closed = true
	all := make([]*session, 0, len(b.sessions))
	for _, s := range b.sessions {
		all = append(all, s)
	}
	b.mu.Unlock()
	err := b.srv.Close()
	for _, s := range all {
		s.close()
	}
	b.wg.Wait()
	return err
}

func (b *Bridge) handler(stderr func(string) io.Writer) http.Handler {
	want := []byte(b.Authorization())
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", "Bearer")
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		name := strings.TrimPrefix(r.URL.Path, "/")
		cmd, ok := b.servers[name]
		if !ok {
			http.NotFound(w, r)
			return
		}
		switch r.Method {
		case http.MethodPost:
			b.post(w, r, name, cmd, stderr)
		case http.MethodDelete:
			s := b.lookup(w, r, name)
			if s == nil {
				return
			}
			s.close()
			w.WriteHeader(http.StatusNoContent)
		default:
			// No standalone SSE stream (GET): the spec lets a server refuse it with 405.
			w.Header().Set("Allow", "POST, DELETE")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		}
	})
}

// message is the part of a JSON-RPC message the bridge routes by.
type message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
}

func (m message) isRequest() bool { return m.Method != "" && len(m.ID) > 0 && string(m.ID) != "null" }

func (b *Bridge) post(w http.ResponseWriter, r *http.Request, name string, cmd Command, stderr func(string) io.Writer) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		http.Error(w, "request body: "+err.Error(), http.StatusRequestEntityTooLarge)
		return
	}
	body = bytes.TrimSpace(body)
	if len(body) > 0 && body[0] == '[' {
		http.Error(w, "JSON-RPC batches are not supported; send one message per request", http.StatusBadRequest)
		return
	}
	var m message
	if err := json.Unmarshal(body, &m); err != nil {
		http.Error(w, "body is not a JSON-RPC message: "+err.Error(), http.StatusBadRequest)
		return
	}
	var s *session
	if r.Header.Get(sessionHeader) == "" {
		if m.Method != "initialize" {
			http.Error(w, "no "+sessionHeader+" header: initialize first", http.StatusBadRequest)
			return
		}
		if s, err = b.startSession(name, cmd, stderr); err != nil {
			b.log.Error("mcp http bridge: start server", "server", name, "err", err)
			http.Error(w, "cannot start the MCP server", http.StatusBadGateway)
			return
		}
	} else if s = b.lookup(w, r, name); s == nil {
		return
	}
	s.touch()
	w.Header().Set(sessionHeader, s.id)
	if !m.isRequest() {
		// A notification or a response to the server: nothing comes back for it.
		if err := s.send(body); err != nil {
			http.Error(w, "MCP server gone", http.StatusNotFound)
			return
		}
		w.WriteHeader(http.StatusAccepted)
		return
	}
	answer, err := s.call(r.Context(), m.ID, body)
	if err != nil {
		if r.Context().Err() == nil {
			http.Error(w, "MCP server gone: "+err.Error(), http.StatusBadGateway)
		}
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(answer)
}

// lookup finds the request's session, or answers 404: unknown, ended, or another server's.
func (b *Bridge) lookup(w http.ResponseWriter, r *http.Request, name string) *session {
	b.mu.Lock()
	s := b.sessions[r.Header.Get(sessionHeader)]
	b.mu.Unlock()
	if s == nil || s.server != name {
		http.Error(w, "session not found", http.StatusNotFound)
		return nil
	}
	return s
}

func (b *Bridge) startSession(name string, c Command, stderr func(string) io.Writer) (*session, error) {
	cmd := exec.Command(c.Path, c.Args...)
	cmd.Env = append(os.Environ(), c.Env...)
	if stderr != nil {
		cmd.Stderr = stderr(name) // nil: discarded
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &session{id: rand.Text(), server: name, cmd: cmd, stdin: stdin, idleFor: b.idleTimeout,
		waiting: map[string]chan []byte{}, done: make(chan struct{}), tasks: &b.wg}
	s.onClose = func() {
		b.mu.Lock()
		delete(b.sessions, s.id)
		b.mu.Unlock()
	}
	b.mu.Lock()
	if b.closed { // Close may be waiting already: reap here rather than on its WaitGroup
		b.mu.Unlock()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, errors.New("bridge closed")
	}
	s.idle = time.AfterFunc(b.idleTimeout, s.close)
	b.sessions[s.id] = s
	// Counted before Close can see the session: its reader, and its reaper, which close starts
	// (once, from whichever end comes first: DELETE, idle, the server's exit, Close).
	b.wg.Add(2)
	b.mu.Unlock()
	go func() {
		defer b.wg.Done()
		s.read(stdout, b.log)
	}()
	return s, nil
}

// session is one MCP session: one server process and the requests waiting for its answers.
type session struct {
	id, server string
	cmd        *exec.Cmd
	idleFor    time.Duration
	idle       *time.Timer // ends the session after idleFor without a request
	onClose    func()
	tasks      *sync.WaitGroup // the bridge's: counts this session's reaper from its start

	wmu   sync.Mutex // one message at a time on stdin
	stdin io.WriteCloser

	mu      sync.Mutex
	waiting map[string]chan []byte // by request id, as sent
	done    chan struct{}
	closed  bool
}

func (s *session) touch() { s.idle.Reset(s.idleFor) }

func (s *session) send(line []byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	select {
	case <-s.done:
		return errors.New("session ended")
	default:
	}
	_, err := s.stdin.Write(append(line, '\n'))
	return err
}

// call sends a request and waits for the server's response to it.
func (s *session) call(ctx context.Context, id json.RawMessage, line []byte) ([]byte, error) {
	key := string(id)
	ch := make(chan []byte, 1)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, errors.New("session ended")
	}
	if _, dup := s.waiting[key]; dup {
		s.mu.Unlock()
		return nil, fmt.Errorf("request id %s is already waiting", key)
	}
	s.waiting[key] = ch
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.waiting, key)
		s.mu.Unlock()
	}()
	if err := s.send(line); err != nil {
		return nil, err
	}
	select {
	case answer := <-ch:
		return answer, nil
	case <-s.done:
		return nil, errors.New("the server exited")
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// read routes the server's output: responses to their waiting requests; its own requests get
// an error (there is no stream to carry them to the client); its notifications are dropped.
func (s *session) read(stdout io.Reader, log *slog.Logger) {
	defer s.close()
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		line := bytes.Clone(bytes.TrimSpace(sc.Bytes()))
		if len(line) == 0 {
			continue
		}
		var m message
		if err := json.Unmarshal(line, &m); err != nil {
			log.Warn("mcp http bridge: server wrote a line that is not JSON-RPC", "server", s.server, "err", err)
			continue
		}
		switch {
		case m.Method == "":
			s.mu.Lock()
			ch := s.waiting[string(m.ID)]
			s.mu.Unlock()
			if ch != nil {
				select {
				case ch <- line:
				default: // a second answer to one id: the first one stands, the reader goes on
				}
			}
		case m.isRequest():
			refusal, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": m.ID,
				"error": map[string]any{"code": -32601, "message": "the client cannot be reached from this server over the HTTP bridge"}})
			_ = s.send(refusal)
		}
	}
}

// close ends the session: stdin closed (a stdio server exits on EOF), then the process killed
// if it is still there, and reaped.
func (s *session) close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	close(s.done)
	s.mu.Unlock()
	if s.idle != nil {
		s.idle.Stop()
	}
	if s.onClose != nil {
		s.onClose()
	}
	s.wmu.Lock()
	_ = s.stdin.Close()
	s.wmu.Unlock()
	go func() {
		defer s.tasks.Done()
		t := time.AfterFunc(5*time.Second, func() { _ = s.cmd.Process.Kill() })
		_ = s.cmd.Wait()
		t.Stop()
	}()
}
