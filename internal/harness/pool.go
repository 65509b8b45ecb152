package harness

import (
	"context"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/buzz-harness/buzz/internal/acp"
	"github.com/buzz-harness/buzz/internal/clock"
	"github.com/buzz-harness/buzz/internal/observer"
	"github.com/buzz-harness/buzz/internal/protocol"
)

// Circuit breaker: three crashes within a minute keep a slot down for five minutes.
const (
	breakerWindow = time.Minute
	breakerTrips  = 3
	breakerOpen   = 5 * time.Minute
)

// slot is one agent process. The loop owns every field; the conversations' live sessions on it
// are kept by the conversations (conversation.sessions), and while busy, a turn goroutine owns
// only the session it was handed.
type slot struct {
	idx      int
	gen      int // bumps on every spawn, so late news about an old process is ignored
	proc     *acp.Process
	ident    AgentIdentity
	ready    bool
	starting bool
	busy     bool
	// heartbeat is the session heartbeats run in (no channel identity).
	heartbeat *convSession
	crashes   []time.Time
	retryAt   time.Time
	attempt   int
	// asleep: no process, and none is started until work waits for one (pools.go).
	asleep bool
	// usedAt is when the slot's last turn or heartbeat ended (or it started): --idle-pool-sleep
	// counts from it.
	usedAt time.Time
	// respawn: the next start replaces a process that crashed or failed to start.
	respawn bool
}

type spawnResult struct {
	slot  *slot
	gen   int
	proc  *acp.Process
	init  *acp.InitializeResult
	start uint64 // the process's start time (reap.go), read off the loop
	err   error
	// exited: a ready agent's process ended (sent by the watcher that adopt starts).
	exited bool
}

// pool is the agent processes: spawning them off the loop, adopting them, respawning with backoff
// and a circuit breaker, and choosing one for a turn. The loop owns it (and every slot); the
// goroutines it starts only report back on spawned and are joined through tasks.
type pool struct {
	cfg     *Config
	client  acp.ClientConfig // callbacks and policy every agent's ACP client gets
	log     *slog.Logger
	clock   clock.Clock
	tasks   *sync.WaitGroup
	slots   []*slot
	spawned chan spawnResult // spawn attempts and process exits, for the loop
	record  *agentRecord     // the live agents' process groups, on file (reap.go)
}

// startAll creates the slots and starts every agent; with --lazy-pool they start asleep.
func (p *pool) startAll(ctx context.Context) {
	p.slots = make([]*slot, p.cfg.Agents)
	for i := range p.slots {
		p.slots[i] = &slot{idx: i, asleep: p.cfg.LazyPool}
		if !p.cfg.LazyPool {
			p.startSpawn(ctx, p.slots[i])
		}
	}
}

// startSpawn launches the slot's agent process and initializes it in the background.
func (p *pool) startSpawn(ctx context.Context, s *slot) {
	s.gen++
	s.starting, s.ready = true, false
	gen := s.gen
	p.tasks.Go(func() {
		proc, init, err := p.launch(ctx, s.idx)
		if err != nil && proc != nil {
			_ = proc.Kill()
			proc = nil
		}
		r := spawnResult{slot: s, gen: gen, proc: proc, init: init, err: err}
		if proc != nil {
			r.start, _ = procStartTime(proc.Pid())
		}
		p.report(ctx, r)
	})
}

// report hands a spawn result to the loop; once the run is over nobody adopts the process.
func (p *pool) report(ctx context.Context, r spawnResult) {
	select {
	case p.spawned <- r:
	case <-ctx.Done():
		if r.proc != nil {
			_ = r.proc.Kill()
		}
	}
}

func (p *pool) launch(ctx context.Context, idx int) (*acp.Process, *acp.InitializeResult, error) {
	proc, err := acp.Spawn(ctx, acp.SpawnConfig{
		Command: p.cfg.AgentCommand,
		Args:    p.cfg.AgentArgs,
		Env:     agentEnv(p.cfg),
		Dir:     p.cfg.AgentCwd,
		Stderr:  &lineLogger{log: p.log, agent: idx},
		Client:  p.client,
	})
	if err != nil {
		return nil, nil, err
	}
	ictx, cancel := context.WithTimeout(ctx, p.cfg.InitTimeout)
	defer cancel()
	init, err := proc.Initialize(ictx)
	return proc, init, err
}

func permissionPolicy(cfg *Config) acp.PermissionPolicy {
	if cfg.Permissions == PermissionsDeny {
		return acp.PermissionDeny
	}
	return acp.PermissionAllow
}

// agentEnv is the harness's environment plus what the agent's `buzz` calls need: the relay URL,
// the agent's own key, and a PATH on which `buzz` is the CLI shipped with this harness.
func agentEnv(cfg *Config) []string {
	env := make([]string, 0, len(os.Environ())+4)
	path := os.Getenv("PATH")
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "BUZZ_RELAY_URL", "BUZZ_PRIVATE_KEY", "BUZZ_ACP_PRIVATE_KEY", "BUZZ_AGENT_OWNER", "PATH":
			continue
		}
		env = append(env, kv)
	}
	if cfg.BuzzCLIDir != "" {
		path = cfg.BuzzCLIDir + string(os.PathListSeparator) + path
	}
	env = append(env,
		"PATH="+path,
		"BUZZ_RELAY_URL="+cfg.RelayURL,
		"BUZZ_PRIVATE_KEY="+protocol.Nsec(cfg.SecretKey),
	)
	if cfg.Owner != "" {
		env = append(env, "BUZZ_AGENT_OWNER="+cfg.Owner) // whose memory `buzz mem` reads and writes
	}
	return append(env, cfg.AgentEnv...)
}

// adopt makes a started agent the slot's process and watches for it to exit.
func (p *pool) adopt(ctx context.Context, s *slot, proc *acp.Process, init *acp.InitializeResult) {
	s.starting = false
	s.proc, s.ready, s.attempt = proc, true, 0
	s.heartbeat, s.usedAt = nil, p.clock.Now()
	s.ident = AgentIdentity{
		Name:             init.AgentName,
		Version:          init.AgentVersion,
		SpecSystemPrompt: init.HasSessionCapability("systemPrompt"),
		LoadSession:      init.LoadSession,
		Resume:           init.HasSessionCapability("resume"),
		Close:            init.HasSessionCapability("close"),
		Steering:         advertisesSteering(init),
		Images:           init.PromptCapability("image"),
		MCPHTTP:          init.McpCapability("http"),
	}
	gen := s.gen
	p.tasks.Go(func() {
		select {
		case <-proc.Exited():
			p.report(ctx, spawnResult{slot: s, gen: gen, exited: true})
		case <-ctx.Done():
		}
	})
}

// forget kills a slot's process (if any) without waiting for it to be reaped, and drops its
// heartbeat session; news of the process is ignored from now (its exit watcher reports to a
// generation that is gone). The conversations' sessions on it are the caller's to drop.
func (p *pool) forget(s *slot) {
	if s.proc != nil {
		s.proc.Abort()
		p.record.drop(s.idx)
	}
	s.proc, s.ready, s.heartbeat = nil, false, nil
	s.gen++
}

func (p *pool) scheduleRespawn(s *slot) {
	now := p.clock.Now()
	s.crashes = append(s.crashes, now)
	for len(s.crashes) > 0 && now.Sub(s.crashes[0]) > breakerWindow {
		s.crashes = s.crashes[1:]
	}
	s.attempt++
	s.respawn = true
	delay := p.respawnDelay(s.attempt)
	if len(s.crashes) >= breakerTrips {
		delay = breakerOpen
		s.crashes = nil
		p.log.Error("agent keeps crashing; circuit open", "slot", s.idx, "for", delay)
	}
	s.retryAt = now.Add(delay)
}

func (p *pool) respawnDelay(attempt int) time.Duration {
	if p.cfg.RespawnBackoff != nil {
		return p.cfg.RespawnBackoff(attempt)
	}
	d := time.Second << min(attempt-1, 5)
	d = min(d, 30*time.Second)
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

// maintain respawns slots whose backoff has passed and closes sessions idle past the TTL.
func (p *pool) maintain(ctx context.Context, convs *conversations) {
	now := p.clock.Now()
	convs.each(func(c *conversation) {
		for s, sess := range c.sessions {
			if !s.busy && now.Sub(sess.lastUsed) >= p.cfg.ConversationSessionIdleTTL {
				p.closeSession(ctx, c, s, "idle")
			}
		}
	})
	for _, s := range p.slots {
		if !s.ready && !s.starting && !s.busy && !s.retryAt.IsZero() && !now.Before(s.retryAt) {
			s.retryAt = time.Time{}
			p.startSpawn(ctx, s)
		}
	}
}

// claim picks an idle ready slot for conversation k, preferring one that already holds its
// session; the zero k takes any.
func (p *pool) claim(convs *conversations, k convKey) *slot {
	var held map[*slot]*convSession
	if c := convs.get(k); c != nil {
		held = c.sessions
	}
	var first *slot
	for _, s := range p.slots {
		if !s.ready || s.busy {
			continue
		}
		if _, ok := held[s]; ok {
			return s
		}
		if first == nil {
			first = s
		}
	}
	return first
}

func (p *pool) idle() bool {
	for _, s := range p.slots {
		if s.ready && !s.busy {
			return true
		}
	}
	return false
}

// makeRoom closes an idle slot's least recently used sessions until a new one fits under
// --max-cached-conversation-sessions. Call it before a turn opens a session on s.
func (p *pool) makeRoom(ctx context.Context, convs *conversations, s *slot) {
	live := convs.slotSessions(s)
	for len(live) >= p.cfg.MaxCachedConversationSessions {
		var oldest convKey
		var at time.Time
		first := true
		for k, sess := range live {
			if first || sess.lastUsed.Before(at) || sess.lastUsed.Equal(at) && k.String() < oldest.String() {
				oldest, at, first = k, sess.lastUsed, false
			}
		}
		delete(live, oldest)
		convs.update(oldest, func(c *conversation) { p.closeSession(ctx, c, s, "lru") })
	}
}

// closeSession retires a conversation's live session on an idle slot: it leaves the slot (ACP
// session/close off the loop when the agent advertises it; otherwise it is just dropped) but
// stays in the session store, so the conversation's next turn loads it again.
func (p *pool) closeSession(ctx context.Context, c *conversation, s *slot, why string) {
	sess := c.sessions[s]
	c.setSession(s, nil)
	p.log.Info("session closed", "slot", s.idx, "conversation", c.key.String(), "session", sess.ID, "why", why, "rpc", s.ident.Close)
	if !s.ident.Close || s.proc == nil {
		return
	}
	proc := s.proc
	p.tasks.Go(func() {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if err := proc.Call(cctx, "session/close", map[string]any{"sessionId": sess.ID}, nil); err != nil {
			p.log.Warn("session/close failed", "session", sess.ID, "err", err)
		}
	})
}

// killAll stops every agent process (the run is ending).
func (p *pool) killAll() {
	for _, s := range p.slots {
		if s.proc != nil {
			_ = s.proc.Kill()
		}
	}
}

// discardUnadopted kills agents that started after the loop stopped listening; call it once the
// spawning goroutines have returned.
func (p *pool) discardUnadopted() {
	for {
		select {
		case r := <-p.spawned:
			if r.proc != nil {
				_ = r.proc.Kill()
			}
		default:
			return
		}
	}
}

// finishSpawn adopts a started agent, or schedules a retry with backoff.
func (h *Harness) finishSpawn(ctx context.Context, r spawnResult) {
	s := r.slot
	if r.exited {
		// A busy slot's exit is its turn's to handle; one still starting has not been adopted.
		if r.gen == s.gen && !s.busy && s.ready {
			h.log.Warn("agent exited while idle; respawning", "slot", s.idx)
			h.crashed(s)
		}
		return
	}
	if r.gen != s.gen {
		if r.proc != nil {
			r.proc.Abort()
		}
		return
	}
	if r.err != nil {
		s.starting = false
		h.log.Error("agent failed to start", "slot", s.idx, "command", h.cfg.AgentCommand, "err", r.err)
		h.bus.Publish(observer.Scope{}, observer.AgentExited{Slot: s.idx, Reason: r.err.Error()})
		h.pool.scheduleRespawn(s)
		return
	}
	h.pool.adopt(ctx, s, r.proc, r.init)
	h.metrics.spawns.Inc()
	if s.respawn {
		s.respawn = false
		h.metrics.respawns.Inc()
	}
	h.log.Info("agent ready", "slot", s.idx, "pid", r.proc.Pid(), "agent", s.ident.Name, "version", s.ident.Version,
		"route", DecideRoute(s.ident), "loadSession", s.ident.LoadSession, "resume", s.ident.Resume)
	h.bus.Publish(observer.Scope{}, observer.AgentSpawned{
		Slot: s.idx, PID: r.proc.Pid(), AgentName: s.ident.Name, AgentVersion: s.ident.Version, Route: string(DecideRoute(s.ident))})
	if r.start != 0 {
		h.pool.record.put(s.idx, agentProc{PID: r.proc.Pid(), StartTime: r.start})
	}
}

// crashed forgets a slot's process and sessions and schedules a respawn.
func (h *Harness) crashed(s *slot) {
	h.pool.forget(s)
	h.convs.forgetSlot(s)
	h.bus.Publish(observer.Scope{}, observer.AgentExited{Slot: s.idx})
	h.pool.scheduleRespawn(s)
}

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
