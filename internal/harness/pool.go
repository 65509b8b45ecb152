package harness

import (
	"context"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/buzz-harness/buzz/internal/acp"
	"github.com/buzz-harness/buzz/internal/observer"
	"github.com/buzz-harness/buzz/internal/prompt"
	"github.com/buzz-harness/buzz/internal/protocol"
)

// Circuit breaker: three crashes within a minute keep a slot down for five minutes.
const (
	breakerWindow = time.Minute
	breakerTrips  = 3
	breakerOpen   = 5 * time.Minute
)

// slot is one agent process and the channel sessions it holds. The loop owns every field;
// while busy, a turn goroutine owns only the chanSession it was handed.
type slot struct {
	idx      int
	gen      int // bumps on every spawn, so late news about an old process is ignored
	proc     *acp.Process
	ident    AgentIdentity
	ready    bool
	starting bool
	busy     bool
	sessions map[string]*chanSession
	// heartbeat is the session heartbeats run in (no channel identity).
	heartbeat *chanSession
	pending   map[string]bool // channels whose session must be dropped when the turn returns
	crashes   []time.Time
	retryAt   time.Time
	attempt   int
}

// chanSession is one ACP session for a channel, with what has been delivered to it.
type chanSession struct {
	ID           string
	Route        Route
	StandingSent bool
	Delivered    map[string]bool
	Turns        int
	Resumed      bool
	// opening is the standing context fetched when the session was opened, kept for its first
	// briefing on the user-message route so the relay is not asked twice.
	opening *prompt.Standing
}

// invalidateChannel drops the slot's session for a channel; for a busy slot the drop is deferred
// to the turn's return. It reports whether a session was known.
func (s *slot) invalidateChannel(ch string, busy bool) bool {
	_, had := s.sessions[ch]
	if busy {
		if s.pending == nil {
			s.pending = map[string]bool{}
		}
		s.pending[ch] = true
		return had
	}
	delete(s.sessions, ch)
	return had
}

type spawnResult struct {
	slot *slot
	gen  int
	proc *acp.Process
	init *acp.InitializeResult
	err  error
	// exited: a ready agent's process ended (sent by the watcher started in finishSpawn).
	exited bool
}

// startSpawn launches the slot's agent process and initializes it in the background.
func (h *Harness) startSpawn(ctx context.Context, s *slot) {
	s.gen++
	s.starting, s.ready = true, false
	gen := s.gen
	go func() {
		proc, init, err := h.spawnAgent(ctx, s.idx)
		if err != nil && proc != nil {
			_ = proc.Kill()
			proc = nil
		}
		h.spawns <- spawnResult{slot: s, gen: gen, proc: proc, init: init, err: err}
	}()
}

func (h *Harness) spawnAgent(ctx context.Context, idx int) (*acp.Process, *acp.InitializeResult, error) {
	logw := &lineLogger{log: h.log, agent: idx}
	proc, err := acp.Spawn(ctx, acp.SpawnConfig{
		Command: h.cfg.AgentCommand,
		Args:    h.cfg.AgentArgs,
		Env:     h.agentEnv(),
		Dir:     h.cfg.AgentCwd,
		Stderr:  logw,
		Client: acp.ClientConfig{
			OnLine:        h.onLine,
			OnUpdate:      h.onUpdate,
			Permissions:   h.permissionPolicy(),
			ClientVersion: h.cfg.Version,
		},
	})
	if err != nil {
		return nil, nil, err
	}
	ictx, cancel := context.WithTimeout(ctx, h.cfg.InitTimeout)
	defer cancel()
	init, err := proc.Initialize(ictx)
	return proc, init, err
}

func (h *Harness) permissionPolicy() acp.PermissionPolicy {
	if h.cfg.PermissionsDeny {
		return acp.PermissionDeny
	}
	return acp.PermissionAllow
}

// agentEnv is the harness's environment plus what the agent's `buzz` calls need: the relay URL,
// the agent's own key, and a PATH on which `buzz` is the CLI shipped with this harness.
func (h *Harness) agentEnv() []string {
	env := make([]string, 0, len(os.Environ())+4)
	path := os.Getenv("PATH")
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "BUZZ_RELAY_URL", "BUZZ_PRIVATE_KEY", "BUZZ_ACP_PRIVATE_KEY", "PATH":
			continue
		}
		env = append(env, kv)
	}
	if h.cfg.BuzzCLIDir != "" {
		path = h.cfg.BuzzCLIDir + string(os.PathListSeparator) + path
	}
	env = append(env,
		"PATH="+path,
		"BUZZ_RELAY_URL="+h.cfg.RelayURL,
		"BUZZ_PRIVATE_KEY="+protocol.Nsec(h.cfg.SecretKey),
	)
	return append(env, h.cfg.AgentEnv...)
}

// finishSpawn adopts a started agent, or schedules a retry with backoff.
func (h *Harness) finishSpawn(ctx context.Context, r spawnResult) {
	s := r.slot
	if r.exited {
		if r.gen == s.gen {
			h.handleExit(s)
		}
		return
	}
	if r.gen != s.gen {
		if r.proc != nil {
			_ = r.proc.Kill()
		}
		return
	}
	s.starting = false
	if r.err != nil {
		h.log.Error("agent failed to start", "slot", s.idx, "command", h.cfg.AgentCommand, "err", r.err)
		h.bus.Publish(observer.Scope{}, observer.AgentExited{Slot: s.idx, Reason: r.err.Error()})
		h.scheduleRespawn(s)
		return
	}
	s.proc, s.ready, s.attempt = r.proc, true, 0
	s.sessions, s.pending, s.heartbeat = map[string]*chanSession{}, nil, nil
	s.ident = AgentIdentity{
		Name:             r.init.AgentName,
		Version:          r.init.AgentVersion,
		SpecSystemPrompt: r.init.HasSessionCapability("systemPrompt"),
		LoadSession:      r.init.LoadSession,
		Resume:           r.init.HasSessionCapability("resume"),
	}
	h.log.Info("agent ready", "slot", s.idx, "pid", r.proc.Pid(), "agent", s.ident.Name, "version", s.ident.Version,
		"route", DecideRoute(s.ident), "loadSession", s.ident.LoadSession, "resume", s.ident.Resume)
	h.bus.Publish(observer.Scope{}, observer.AgentSpawned{
		Slot: s.idx, PID: r.proc.Pid(), AgentName: s.ident.Name, AgentVersion: s.ident.Version, Route: string(DecideRoute(s.ident))})
	h.recordAgents()
	gen := s.gen
	go func() {
		<-r.proc.Exited()
		h.spawns <- spawnResult{slot: s, gen: gen, exited: true}
	}()
}

// handleExit reacts to an agent process ending while idle (a busy one is handled by its turn).
func (h *Harness) handleExit(s *slot) {
	if s.busy || !s.ready {
		return
	}
	h.log.Warn("agent exited while idle; respawning", "slot", s.idx)
	h.crashed(s)
}

// crashed forgets a slot's process and sessions and schedules a respawn.
func (h *Harness) crashed(s *slot) {
	if s.proc != nil {
		_ = s.proc.Kill()
	}
	s.proc, s.ready, s.sessions, s.pending, s.heartbeat = nil, false, nil, nil, nil
	s.gen++
	h.bus.Publish(observer.Scope{}, observer.AgentExited{Slot: s.idx})
	h.scheduleRespawn(s)
}

func (h *Harness) scheduleRespawn(s *slot) {
	now := h.now()
	s.crashes = append(s.crashes, now)
	for len(s.crashes) > 0 && now.Sub(s.crashes[0]) > breakerWindow {
		s.crashes = s.crashes[1:]
	}
	s.attempt++
	delay := h.respawnDelay(s.attempt)
	if len(s.crashes) >= breakerTrips {
		delay = breakerOpen
		s.crashes = nil
		h.log.Error("agent keeps crashing; circuit open", "slot", s.idx, "for", delay)
	}
	s.retryAt = now.Add(delay)
}

func (h *Harness) respawnDelay(attempt int) time.Duration {
	if h.cfg.RespawnBackoff != nil {
		return h.cfg.RespawnBackoff(attempt)
	}
	d := time.Second << min(attempt-1, 5)
	d = min(d, 30*time.Second)
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

// maintain respawns slots whose backoff has passed.
func (h *Harness) maintain(ctx context.Context) {
	now := h.now()
	for _, s := range h.slots {
		if !s.ready && !s.starting && !s.busy && !s.retryAt.IsZero() && !now.Before(s.retryAt) {
			s.retryAt = time.Time{}
			h.startSpawn(ctx, s)
		}
	}
}

// claim picks an idle ready slot for a channel, preferring one that already holds its session.
func (h *Harness) claim(ch string) *slot {
	var first *slot
	for _, s := range h.slots {
		if !s.ready || s.busy {
			continue
		}
		if _, ok := s.sessions[ch]; ok {
			return s
		}
		if first == nil {
			first = s
		}
	}
	return first
}

func (h *Harness) idleSlot() bool { return h.claim("") != nil }

// lineLogger turns an agent's stderr into log lines.
type lineLogger struct {
	log   interface{ Info(string, ...any) }
	agent int
	buf   []byte
}

func (l *lineLogger) Write(p []byte) (int, error) {
	l.buf = append(l.buf, p...)
	for {
		i := strings.IndexByte(string(l.buf), '\n')
		if i < 0 {
			break
		}
		l.log.Info("agent stderr", "slot", l.agent, "line", observer.Redact(string(l.buf[:i])))
		l.buf = l.buf[i+1:]
	}
	if len(l.buf) > 64<<10 {
		l.log.Info("agent stderr", "slot", l.agent, "line", observer.Redact(string(l.buf)))
		l.buf = l.buf[:0]
	}
	return len(p), nil
}

var _ io.Writer = (*lineLogger)(nil)

// buzzCLIDir finds the directory of the buzz CLI shipped beside this executable, if any.
func BuzzCLIDir() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	dir := filepath.Dir(exe)
	if _, err := os.Stat(filepath.Join(dir, "buzz")); err == nil {
		return dir
	}
	return ""
}
