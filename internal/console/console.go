// Package console is the web console of `buzz up` (and the activity view of buzz-acp
// --activity-addr): a small embedded HTML/CSS/JS app plus JSON and Server-Sent-Events handlers.
//
// It binds to loopback and every data request must carry the random token printed in the URL
// (header X-Buzz-Token, or ?token= for the page and the event stream, which cannot set headers).
// Writes require the header, so a cross-site form cannot post as the owner. Messages are
// untrusted: the browser code only ever puts them into the page with textContent.
package console

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/buzz-harness/buzz/internal/client"
	"github.com/buzz-harness/buzz/internal/observer"
	"github.com/buzz-harness/buzz/internal/observer/relayframes"
)

//go:embed static
var staticFS embed.FS

// Config configures a console. Without RelayURL/OwnerKey it serves the activity view only.
//
// With an agent as well, the console is the agent's owner on the relay (NIP-AO): its Stop and
// model controls send control frames, and without a Bus (remote mode: the harness runs
// elsewhere) its Activity view shows the agent's telemetry frames instead of the in-process feed.
type Config struct {
	RelayURL    string        // relay URL (ws or http); "" = activity only
	OwnerKey    string        // hex secret key the composer posts with
	AgentPubkey string        // hex; the agent is labelled as such in the chat
	HomeChannel string        // the stack's #general, listed first and marked ("" = none)
	Bus         *observer.Bus // the in-process harness activity feed; nil = none (or remote mode)
	Token       string        // "" = a fresh random token
	Logger      *slog.Logger
	// SecretKeys (hex) are cut out of the activity stream wherever they appear, besides what
	// observer.Redact finds: an agent that echoes its own key bare is not caught by any pattern.
	SecretKeys []string
}

// Server is the console as an http.Handler. Call Run alongside serving to get live messages.
type Server struct {
	cfg    Config
	log    *slog.Logger
	token  string
	mux    *http.ServeMux
	chat   *chat // nil in activity-only mode
	static http.Handler
	// owner is the NIP-AO owner session (nil without an agent or the owner's key): controls go
	// through it, and in remote mode the frames it receives feed bus.
	owner  *relayframes.Owner
	bus    *observer.Bus // the feed the Activity view shows: cfg.Bus, or the frames' in remote mode
	remote bool
}

// New builds a console server.
func New(cfg Config) (*Server, error) {
	s := &Server{cfg: cfg, log: cfg.Logger, token: cfg.Token}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.token == "" {
		b := make([]byte, 16)
		if _, err := rand.Read(b); err != nil {
			return nil, err
		}
		s.token = hex.EncodeToString(b)
	}
	if cfg.RelayURL != "" && cfg.OwnerKey != "" {
		c, err := newChat(cfg.RelayURL, cfg.OwnerKey, cfg.AgentPubkey, cfg.HomeChannel, s.log)
		if err != nil {
			return nil, err
		}
		s.chat = c
		if cfg.AgentPubkey != "" {
			o, err := relayframes.NewOwner(relayframes.OwnerConfig{RelayURL: cfg.RelayURL, OwnerSecret: cfg.OwnerKey, Agent: cfg.AgentPubkey,
				Logger: s.log.With("part", "console-frames"),
				OnSkip: func(id string, err error) { s.log.Warn("observer frame skipped", "id", id, "err", err) }})
			if err != nil {
				return nil, err
			}
			s.owner = o
		}
	}
	s.bus = cfg.Bus
	if s.bus == nil && s.owner != nil {
		s.bus, s.remote = observer.NewBus(2000), true
	}
	sub, _ := fs.Sub(staticFS, "static")
	s.static = http.StripPrefix("/static/", http.FileServerFS(sub))
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("GET /{$}", s.page)
	s.mux.Handle("GET /static/", s.static)
	s.mux.HandleFunc("GET /api/state", s.guard(s.state))
	s.mux.HandleFunc("GET /api/messages", s.guard(s.messages))
	s.mux.HandleFunc("POST /api/messages", s.guard(s.post))
	s.mux.HandleFunc("GET /api/stream", s.guard(s.stream))
	s.mux.HandleFunc("GET /api/memory", s.guard(s.memory))
	s.mux.HandleFunc("GET /api/turns", s.guard(s.turns))
	s.mux.HandleFunc("POST /api/control", s.guard(s.control))
	s.mux.HandleFunc("POST /api/upload", s.guard(s.upload))
	s.mux.HandleFunc("GET /api/blob/{sha}", s.guard(s.blob))
	return s, nil
}

// Token is the secret every request must carry.
func (s *Server) Token() string { return s.token }

// URL is the address to open for a console listening on addr (host:port).
func (s *Server) URL(addr string) string { return "http://" + addr + "/?token=" + s.token }

// Run keeps the live message subscription and the owner's frame session going until ctx ends
// (a no-op in activity-only mode), and returns once the goroutines it started are gone.
func (s *Server) Run(ctx context.Context) error {
	if s.chat == nil {
		<-ctx.Done()
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	if s.owner != nil {
		wg.Go(func() {
			if err := s.owner.Run(ctx); err != nil {
				s.log.Warn("observer frames: the relay session ended; controls and remote activity stop", "err", err)
			}
		})
		wg.Go(func() {
			for fr := range s.owner.Frames() {
				if !s.remote {
					continue // the in-process feed says it all already
				}
				if sc, p, ok := relayframes.ToFeed(fr.Event); ok {
					s.bus.Publish(sc, p)
				}
			}
		})
	}
	err := s.chat.run(ctx)
	cancel()
	wg.Wait()
	return err
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Refuse foreign Host headers: with DNS rebinding a web page could otherwise reach
	// 127.0.0.1 under its own origin.
	if !loopbackHost(r.Host) {
		http.Error(w, "forbidden host", http.StatusForbidden)
		return
	}
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
	s.mux.ServeHTTP(w, r)
}

func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (s *Server) tokenOK(r *http.Request, allowQuery bool) bool {
	got := r.Header.Get("X-Buzz-Token")
	if got == "" && allowQuery {
		got = r.URL.Query().Get("token")
	}
	return subtle.ConstantTimeCompare([]byte(got), []byte(s.token)) == 1
}

// guard checks the token: GETs may carry it in the query (EventSource cannot set headers),
// writes only in the header.
func (s *Server) guard(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.tokenOK(r, r.Method == http.MethodGet) {
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "missing or wrong console token: open the URL printed at startup"})
			return
		}
		h(w, r)
	}
}

func (s *Server) page(w http.ResponseWriter, r *http.Request) {
	if !s.tokenOK(r, true) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintln(w, "This console needs its token: open the full URL printed at startup (…/?token=…).")
		return
	}
	b, err := staticFS.ReadFile("static/index.html")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Write(b)
}

type stateResp struct {
	Mode     string        `json:"mode"`               // "full" or "activity"
	Controls bool          `json:"controls,omitempty"` // POST /api/control works (an agent, the owner's key)
	Remote   bool          `json:"remote,omitempty"`   // activity comes from the agent's frames
	Owner    *person       `json:"owner,omitempty"`
	Agent    *person       `json:"agent,omitempty"`
	Channels []channelInfo `json:"channels"`
}

func (s *Server) state(w http.ResponseWriter, r *http.Request) {
	if s.chat == nil {
		writeJSON(w, http.StatusOK, stateResp{Mode: "activity", Channels: []channelInfo{}})
		return
	}
	st, err := s.chat.state(r.Context())
	if err != nil {
		writeJSON(w, http.StatusBadGateway, map[string]string{"error": err.Error()})
		return
	}
	st.Controls, st.Remote = s.owner != nil, s.remote
	writeJSON(w, http.StatusOK, st)
}

func (s *Server) memory(w http.ResponseWriter, r *http.Request) {
	if s.chat == nil {
		writeJSON(w, http.StatusOK, memoryResp{State: "none"})
		return
	}
	m, err := s.chat.memory(r.Context())
	if err != nil {
		writeJSON(w, http.StatusBadGateway, map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, m)
}

// turns lists the agent's recent turn metrics (NIP-AM), decrypted with the owner's key.
func (s *Server) turns(w http.ResponseWriter, r *http.Request) {
	if s.chat == nil {
		writeJSON(w, http.StatusOK, []turnRow{})
		return
	}
	rows, err := s.chat.turns(r.Context())
	if err != nil {
		writeJSON(w, http.StatusBadGateway, map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, rows)
}

func (s *Server) messages(w http.ResponseWriter, r *http.Request) {
	if s.chat == nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no chat in activity-only mode"})
		return
	}
	msgs, err := s.chat.history(r.Context(), r.URL.Query().Get("channel"))
	if err != nil {
		writeJSON(w, statusFor(err), map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, msgs)
}

// postReq is the composer's request body.
type postReq struct {
	Channel string `json:"channel"`
	Content string `json:"content"`
	ReplyTo string `json:"replyTo"`
	// Mention lists channel members to mention besides the @names in Content (an answer
	// button's reply is just the option's number, yet must reach the agent).
	Mention []string `json:"mention,omitempty"`
	// Attachments are files POST /api/upload stored, attached as imeta (attachments.go).
	Attachments []attachment `json:"attachments,omitempty"`
}

func (s *Server) post(w http.ResponseWriter, r *http.Request) {
	if s.chat == nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no chat in activity-only mode"})
		return
	}
	var req postReq
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 128<<10)).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "bad request body: " + err.Error()})
		return
	}
	m, err := s.chat.send(r.Context(), req)
	if err != nil {
		writeJSON(w, statusFor(err), map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, m)
}

// stream is the SSE feed: activity history then live activity, and live channel messages and
// reactions.
func (s *Server) stream(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)

	var acts <-chan observer.Event
	var snap []observer.Event
	if s.bus != nil {
		acts, snap = s.bus.Subscribe(ctx, 1024)
	}
	var msgs <-chan liveEvent
	if s.chat != nil {
		msgs = s.chat.hub.subscribe(ctx)
	}
	for _, e := range snap {
		if !s.writeActivity(w, e) {
			return
		}
	}
	fmt.Fprint(w, "event: ready\ndata: {}\n\n")
	fl.Flush()
	keep := time.NewTicker(20 * time.Second)
	defer keep.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-acts:
			if !ok {
				return
			}
			if !s.writeActivity(w, e) {
				return
			}
		case m, ok := <-msgs:
			if !ok {
				return
			}
			if !writeEvent(w, m.name, m.data) {
				return
			}
		case <-keep.C:
			fmt.Fprint(w, ": keepalive\n\n")
		}
		fl.Flush()
	}
}

// writeActivity forwards one activity event. Raw ACP lines are left out: they are the
// --activity-log's job and would drown the view.
// Its data is redacted as the activity log is, and the known secret keys are cut out as well.
func (s *Server) writeActivity(w http.ResponseWriter, e observer.Event) bool {
	if e.Type == observer.TypeACPLine {
		return true
	}
	line := string(bytes.TrimSuffix(observer.MarshalLine(e), []byte("\n")))
	for _, sk := range s.cfg.SecretKeys {
		if len(sk) == 64 {
			line = replaceFold(line, sk, observer.Redacted)
		}
	}
	_, err := fmt.Fprintf(w, "event: activity\ndata: %s\n\n", line)
	return err == nil
}

// replaceFold replaces every ASCII-case-insensitive occurrence of the ASCII string old in s.
func replaceFold(s, old, repl string) string {
	lower, o := asciiLower(s), asciiLower(old)
	if !strings.Contains(lower, o) {
		return s
	}
	var b strings.Builder
	for {
		i := strings.Index(lower, o)
		if i < 0 {
			break
		}
		b.WriteString(s[:i])
		b.WriteString(repl)
		s, lower = s[i+len(old):], lower[i+len(old):]
	}
	b.WriteString(s)
	return b.String()
}

// asciiLower lower-cases A–Z only, so byte offsets stay those of the original (strings.ToLower
// can change the length of non-ASCII text).
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

func writeEvent(w http.ResponseWriter, name string, v any) bool {
	b, err := json.Marshal(v)
	if err != nil {
		return true // skip what cannot be encoded rather than end the stream
	}
	_, err = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
	return err == nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.Encode(v)
}

// badRequest marks errors caused by the request itself.
type badRequest struct{ msg string }

func (e *badRequest) Error() string { return e.msg }

func statusFor(err error) int {
	var br *badRequest
	if errors.As(err, &br) {
		return http.StatusBadRequest
	}
	var he *client.HTTPError
	if errors.As(err, &he) && he.Status >= 400 && he.Status < 500 {
		return http.StatusBadRequest
	}
	return http.StatusBadGateway
}

// Serve serves s on ln (and runs its live subscription) until ctx ends. It returns once every
// goroutine it started is gone, those serving connections (and so requests) included.
func Serve(ctx context.Context, ln net.Listener, s *Server) error {
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second,
		// Requests, event streams above all, end when serving stops.
		BaseContext: func(net.Listener) context.Context { return rctx },
		// net/http serves each connection on a goroutine of its own: counted from the accept
		// loop (so before Serve returns) until the connection is closed, its requests answered.
		ConnState: func(_ net.Conn, st http.ConnState) {
			switch st {
			case http.StateNew:
				wg.Add(1)
			case http.StateClosed, http.StateHijacked:
				wg.Done()
			}
		},
	}
	wg.Go(func() { s.Run(rctx) })
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	var err error
	select {
	case err = <-errc:
		srv.Close() // the listener failed: drop the connections still open as well
	case <-ctx.Done():
		// Event streams end with ctx (their requests' base context); give Shutdown a short
		// grace to see every connection idle, then close outright.
		sctx, scancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		if srv.Shutdown(sctx) != nil {
			srv.Close()
		}
		scancel()
		<-errc
	}
	cancel()
	wg.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// ServeActivity serves the activity view of bus on addr (e.g. "127.0.0.1:3001") until ctx ends;
// done is closed once it has stopped and its goroutines are gone. It returns once listening,
// with the URL (token included) to print; listen errors come back at once. This is what
// buzz-acp --activity-addr uses.
func ServeActivity(ctx context.Context, addr string, bus *observer.Bus, secretKeys ...string) (url string, done <-chan struct{}, err error) {
	s, err := New(Config{Bus: bus, SecretKeys: secretKeys})
	if err != nil {
		return "", nil, err
	}
	ln, err := Listen(addr)
	if err != nil {
		return "", nil, err
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		Serve(ctx, ln, s)
	}()
	return s.URL(ln.Addr().String()), stopped, nil
}

// Listen opens a loopback-only listener; a non-loopback host is refused because the console
// posts as the owner.
func Listen(addr string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("console address %q: %w", addr, err)
	}
	if !loopbackHost(host) {
		return nil, fmt.Errorf("console address %q: only loopback (127.0.0.1, localhost, ::1) is allowed", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, fmt.Errorf("console port %s is already in use", addr)
		}
		return nil, fmt.Errorf("console: cannot listen on %s: %w", addr, err)
	}
	return ln, nil
}
