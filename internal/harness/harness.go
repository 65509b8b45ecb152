// Package harness is buzz-acp's core: it listens for mentions on a Buzz relay, queues them per
// conversation (a thread, or a whole channel: --session-policy), and drives ACP agents with one
// session per conversation.
//
// One goroutine (Run's loop) owns all mutable state: the queue, the channel table, the agent
// pool. Everything slow runs on goroutines the loop starts and Run joins before it returns:
// turns (with exclusive use of a slot, reporting back over a channel), agent spawns, membership
// lookups and publishes. Nothing else touches a busy slot.
//
// Where things live:
//
//	harness.go   Harness, New, Run: the loop and its shutdown
//	channels.go  the channel table: discovery, subscriptions, membership, leaving
//	subs.go      channel subscriptions in groups (up to 100 channels per REQ)
//	intake.go    an event's way in (gate, journal, queue) and the journal replay after a restart
//	control.go   owner commands and the author gate
//	queue.go     the per-conversation FIFO, with retry backoff
//	steer.go     a new message while its conversation's turn runs: native steer, or cancel and merge
//	turn.go      a turn: dispatch, run, decide its outcome, act on it
//	session.go   opening a session (resume, load or new) and the one builder of its parameters
//	scope.go     which conversation an event belongs to (scopeKey, --session-policy)
//	route.go     how standing context reaches each agent
//	pool.go      agent processes: spawn, respawn, circuit breaker
//	heartbeat.go scheduled prompts
//	relay.go     one-shot relay calls: prompt context, profiles, membership, publish
//	feed.go      activity-feed events
//	ack.go       acknowledgement: 👀 on accepted events, typing while a turn runs, presence
//	reap.go      agents a previous harness left running
//	quota.go     waits that providers name
package harness

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/acp"
	"github.com/buzz-harness/buzz/internal/client"
	"github.com/buzz-harness/buzz/internal/journal"
	"github.com/buzz-harness/buzz/internal/observer"
	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/sessionstore"
)

// Harness is one running buzz-acp.
type Harness struct {
	cfg   Config
	log   *slog.Logger
	bus   *observer.Bus
	agent string // our pubkey hex
	now   func() time.Time

	relay    *relayClient // one-shot bridge calls: queries and publishes
	live     *client.Live // subscriptions
	store    *sessionstore.Store
	jrnl     *journal.Journal
	sessions *sessionOpener
	pool     *pool
	asker    *permAsker // --permissions ask: questions to the owner in the thread
	queue    *Queue
	gate     Gate
	ack      *acker

	channels map[string]*channel // subscribed channels by id
	removed  map[string]bool     // channels we were removed from while a turn ran
	subs     subGroups           // the channels' group subscriptions
	seen     *client.IDSet       // event ids already accepted (a replay never prompts twice)
	lookups  memberLookups       // membership lookups running off the loop
	siblings siblingLookups      // NIP-OA sibling verdicts and the events waiting for one
	costs    costTracker         // each ACP session's running cost (usage_update), for turn metrics

	// inflight stops a conversation's running turn; the cause says why (owner cancel, rotate, leave).
	inflight map[scopeKey]context.CancelCauseFunc
	// turns is the loop's view of each running turn, for steer and interrupt (steer.go).
	turns  map[scopeKey]*liveTurn
	steers chan steerResult
	runIDs runIDs
	// resumeRetried marks conversations whose resume already failed indeterminately once.
	resumeRetried map[scopeKey]bool
	heartbeatBusy bool
	turnEnds      turnEnds
	results       chan turnResult
	wake          chan struct{}

	// tasks are the goroutines the loop started (turns, spawns, lookups, publishes); Run waits
	// for all of them before it returns.
	tasks    sync.WaitGroup
	shutdown context.CancelFunc
	stopLive context.CancelFunc // ends the WebSocket; stop calls it after the offline presence
}

// New prepares a harness: it validates cfg and opens the session store (taking its lock).
func New(cfg Config) (*Harness, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	pk, err := protocol.PublicKey(cfg.SecretKey)
	if err != nil {
		return nil, fmt.Errorf("private key: %w", err)
	}
	if err := cfg.resolveOwner(pk); err != nil {
		return nil, err
	}
	h := &Harness{
		cfg:           cfg,
		log:           cfg.Logger,
		bus:           cfg.Observer,
		agent:         pk,
		now:           time.Now,
		queue:         NewQueue(),
		gate:          Gate{Mode: cfg.RespondTo, Owner: cfg.Owner, Allowlist: cfg.Allowlist},
		channels:      map[string]*channel{},
		removed:       map[string]bool{},
		subs:          newSubGroups(),
		lookups:       memberLookups{started: map[string]int{}, done: make(chan membershipCheck, 16)},
		seen:          client.NewIDSet(20000),
		siblings:      newSiblingLookups(),
		inflight:      map[scopeKey]context.CancelCauseFunc{},
		turns:         map[scopeKey]*liveTurn{},
		steers:        make(chan steerResult, 16),
		resumeRetried: map[scopeKey]bool{},
		results:       make(chan turnResult, 64),
		wake:          make(chan struct{}, 1),
	}
	if cfg.NoResumeSessions {
		h.store = sessionstore.Disabled()
	} else if h.store, err = sessionstore.Open(cfg.StateDir, pk, cfg.Logger); err != nil {
		return nil, err
	}
	if h.jrnl, err = journal.Open(cfg.StateDir, pk, cfg.Logger); err != nil {
		h.store.Close()
		return nil, err
	}
	h.relay = &relayClient{bridge: client.NewBridge(cfg.RelayURL, cfg.SecretKey), self: pk, cfg: &h.cfg, log: h.log, now: h.now}
	h.ack = newAcker(&h.cfg, pk, h.relay.bridge, h.log, &h.tasks)
	h.asker = newPermAsker(h)
	h.sessions = &sessionOpener{cfg: &h.cfg, store: h.store, relay: h.relay, feed: h, log: h.log, now: h.now}
	h.pool = &pool{
		cfg: &h.cfg, log: h.log, now: h.now, tasks: &h.tasks,
		client: acp.ClientConfig{
			OnLine:         h.onLine,
			OnUpdate:       h.onAgentUpdate,
			Permissions:    permissionPolicy(&h.cfg),
			PermissionFunc: h.permissionFunc(),
			ClientVersion:  cfg.Version,
		},
		spawned: make(chan spawnResult, 64),
		record:  agentsFile(cfg.StateDir, pk),
	}
	return h, nil
}

// Run connects, discovers channels, starts the agent pool and serves until ctx ends or the owner
// sends !shutdown. Subscriptions come up (and events queue) before the pool is ready, so a slow
// agent start never drops a mention. Every goroutine the harness started has returned (and every
// agent process is gone) when Run returns.
func (h *Harness) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	h.shutdown = cancel
	defer h.store.Close()
	defer h.jrnl.Close()
	defer h.stop(cancel) // first: nothing may write the journal or the store once they close

	h.turnEnds.since = h.now()
	since := h.catchUpSince()
	h.live = client.NewLive(client.LiveConfig{RelayURL: h.cfg.RelayURL, SecretKey: h.cfg.SecretKey, Logger: h.log})
	liveErr := make(chan error, 1)
	// The socket outlives the run's context by the offline presence at shutdown (see stop).
	liveCtx, stopLive := context.WithCancel(context.WithoutCancel(ctx))
	h.stopLive = stopLive
	h.tasks.Go(func() { liveErr <- h.live.Run(liveCtx) })
	h.ack.start(ctx, h.live)

	if err := h.publishAddPolicy(ctx); err != nil {
		return err
	}
	if err := h.discover(ctx, since); err != nil {
		return err
	}
	h.live.Subscribe(subMembership, nostr.Filter{
		Kinds: []int{protocol.KindMemberAdded, protocol.KindMemberRemoved},
		Tags:  nostr.TagMap{"p": {h.agent}},
		Since: ptrTS(since),
	})
	if h.pool.reapOrphans() > 0 {
		// A reply a killed orphan's `buzz` call sent just before may still be committing at the
		// relay; the replay below looks for it.
		select {
		case <-time.After(publishSettle):
		case <-ctx.Done():
		}
	}
	h.asker.recover(ctx) // before the replay: a turn that died asking the owner is not run again
	h.replayJournal(ctx)
	h.log.Info("buzz-acp ready", "agent", h.agent, "channels", len(h.channels), "relay", h.cfg.RelayURL, "procs", runtime.GOMAXPROCS(0))
	h.pool.startAll(ctx)
	return h.serve(ctx, liveErr)
}

// catchUpSince is where subscriptions start: everything since the last event the journal saw (a
// little before it, as created_at has one-second resolution), so mentions sent while we were
// down are answered; now on a first start. It is taken before connecting.
func (h *Harness) catchUpSince() time.Time {
	now := h.now()
	w := h.jrnl.Watermark()
	if w <= 0 {
		return now
	}
	since := time.Unix(w-5, 0)
	if oldest := now.Add(-maxCatchUp); since.Before(oldest) {
		since = oldest
	}
	// Never from the future: one event dated ahead must not blind every subscription.
	if !since.Before(now) {
		return now
	}
	return since
}

// serve is the loop: the one goroutine that owns the queue, the channel table and the pool.
func (h *Harness) serve(ctx context.Context, liveErr <-chan error) error {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var heartbeats <-chan time.Time
	if h.cfg.HeartbeatInterval > 0 {
		hb := time.NewTicker(h.cfg.HeartbeatInterval)
		defer hb.Stop()
		heartbeats = hb.C
	}
	for {
		h.dispatch(ctx)
		select {
		case <-ctx.Done():
			return nil
		case err := <-liveErr:
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("relay connection: %w", err)
		case in := <-h.live.Events():
			h.handleIncoming(ctx, in)
		case r := <-h.results:
			h.finishTurn(ctx, r)
		case r := <-h.steers:
			h.finishSteer(r)
		case s := <-h.pool.spawned:
			h.finishSpawn(ctx, s)
		case m := <-h.lookups.done:
			h.applyMembership(m)
		case sc := <-h.siblings.done:
			h.finishSiblingLookup(ctx, sc)
		case <-tick.C:
			// Once a second, one REQ per changed channel group: a burst of joins (a flood of
			// adds) costs the relay one query per group, not one per join. Each channel's
			// since covers the wait.
			h.flushSubs()
			h.pool.maintain(ctx)
		case <-heartbeats:
			h.heartbeat(ctx)
		case <-h.wake:
		}
	}
}

func (h *Harness) poke() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// stop ends the run: it cancels running turns, stops every agent process, and waits for the
// goroutines the harness started, so nothing touches the journal or the store after Run.
func (h *Harness) stop(cancel context.CancelFunc) {
	for _, stop := range h.inflight {
		stop(errShutdown)
	}
	cancel()
	if h.stopLive != nil {
		h.tasks.Go(func() { h.ack.offline(context.Background()); h.stopLive() })
	}
	h.pool.killAll()
	h.tasks.Wait()
	h.pool.discardUnadopted()
}

var errShutdown = errors.New("harness shutting down")

// maxCatchUp bounds how far back a restarted harness asks the relay for missed events.
const maxCatchUp = 7 * 24 * time.Hour

func ptrTS(t time.Time) *nostr.Timestamp {
	ts := nostr.Timestamp(t.Unix())
	return &ts
}
