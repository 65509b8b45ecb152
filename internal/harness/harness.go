// Package harness is buzz-acp's core: it listens for mentions on a Buzz relay, queues them per
// conversation (a thread, or a whole channel: --session-policy), and drives ACP agents with one
// session per conversation.
//
// One goroutine (Run's loop) owns all mutable state: the conversation table, the channel table,
// the agent pool. Everything slow runs on goroutines the loop starts and Run joins before it
// returns: turns (with exclusive use of a slot, reporting back over a channel), agent spawns,
// membership lookups, publishes and every disk write. The loop itself never waits for the disk
// or the network: the journal appends without fsync (its syncer fsyncs and compacts), and the
// state files (sessions, agents, permission questions) are written by writers of their own.
//
// Where things live:
//
//	harness.go      Harness, New, Run: the loop and its shutdown
//	config.go       Config, its validation and defaults
//	conversation.go a conversation: its state, the table of them, the one way to change one
//	queue.go        a conversation's queue: batches, retry backoff, the next batch to run
//	scope.go        which conversation an event belongs to (--session-policy)
//	channels.go     the channel table: discovery, membership, leaving
//	subs.go         channel subscriptions in groups (up to 100 channels per REQ)
//	intake.go       an event's way in (rules or thread follow, gate, journal, queue), the journal replay
//	listen.go       which events the subscription rules (--subscribe, --config) listen to
//	control.go      owner commands (!cancel, !rotate, !shutdown, !status, !model, !mode, !budget), author gate
//	ownersettings.go !model / !mode (and observer control): an owner's choice on a conversation's sessions
//	siblings.go     NIP-OA sibling agents through the author gate
//	steer.go        a new message while its conversation's turn runs: native steer, or cancel and merge
//	turn.go         a turn: dispatch, run, decide its outcome, act on it; the same-second hold
//	transcript.go   what a turn's agent wrote and which `buzz messages send` calls it made
//	reply.go        the reply safety net: was the batch answered; the fallback reply or notice
//	follow.go       thread follow: the followed threads, their subscriptions, the agent's own messages
//	session.go      opening a session (resume, load or new) and the one builder of its parameters
//	mcpbridge.go    the MCP servers over streamable HTTP, for agents that take no stdio servers
//	route.go        how standing context reaches each agent
//	agentconfig.go  --model, --permission-mode, --effort-level: applying settings to a session
//	pool.go         agent processes: spawn, respawn, circuit breaker, live-session bounds
//	pools.go        pools that sleep: lazy start, idle sleep, wake on work, exit after inactivity
//	reap.go         agents a previous harness left running, and the record that finds them
//	heartbeat.go    scheduled prompts
//	heartbeat_cursor.go a heartbeat with nothing new for the agent sends no prompt
//	reminders.go    NIP-ER reminders that wake the agent in the conversation they link to
//	permask.go      --permissions ask: permission questions in the thread
//	relay.go        one-shot relay calls: prompt context, profiles, membership, publish
//	images.go       image attachments fetched for agents that take images (ACP image blocks)
//	ack.go          acknowledgement: 👀 on accepted events, typing while a turn runs, presence
//	feed.go         activity-feed events
//	observe.go      the relay observer (NIP-AO): telemetry to the owner, its control frames
//	metrics.go      turn metrics (NIP-AM)
//	metrics_prom.go Prometheus metrics (--metrics-addr) and the loop's snapshot for the gauges
//	budget.go       daily spend caps (--max-cost-per-day, --max-tokens-per-day, !budget)
//	catchup.go      paging back through history a subscription's limit left out
//	notice.go       the failure notice
//	addpolicy.go    the kind-10100 channel add policy
//	directory.go    the kind-10100 directory entry (channels, respond_to) and its worker
//	quota.go        waits that providers name
package harness

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/acp"
	"github.com/buzz-harness/buzz/internal/client"
	"github.com/buzz-harness/buzz/internal/clock"
	"github.com/buzz-harness/buzz/internal/journal"
	"github.com/buzz-harness/buzz/internal/observer"
	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/protocol/observerframe"
	"github.com/buzz-harness/buzz/internal/sessionstore"
)

// Harness is one running buzz-acp.
type Harness struct {
	cfg   Config
	log   *slog.Logger
	bus   *observer.Bus
	agent string // our pubkey hex
	clock clock.Clock

	relay    *relayClient // one-shot bridge calls: queries and publishes
	live     *client.Live // subscriptions
	store    *sessionstore.Store
	jrnl     *journal.Journal
	sessions *sessionOpener
	pool     *pool
	asker    *permAsker // --permissions ask: questions to the owner in the thread
	gate     Gate
	ack      *acker

	convs    *conversations // every conversation: queue, turn, sessions, owner settings, questions
	chans    channelTable   // subscribed channels, their subscriptions and membership lookups
	seen     *client.IDSet  // event ids already accepted (a replay never prompts twice)
	siblings siblingLookups // NIP-OA sibling verdicts and the events waiting for one
	feed     *activity      // the activity feed, and the agents' session/updates
	costs    costTracker    // each ACP session's running cost (usage_update), for turn metrics
	runIDs   runIDs         // goose's active run per session, for its steer method
	turns    transcripts    // what each prompting turn's agent writes and sends (reply.go)
	replays  replayWatch    // whether a loading session's replayed history was briefed (session.go)
	follows  *followSet     // the followed threads; nil with thread follow off
	replies  replyCounts    // the safety net's silent turns, for !status
	turnEnds turnEnds
	// heartbeatBusy: a heartbeat prompt (or its look for news) is running (at most one at a time).
	heartbeatBusy bool
	// hbCursor is where the agent's view ends for heartbeats: the last heartbeat prompt, or the
	// start (heartbeat_cursor.go).
	hbCursor time.Time
	metrics  *opsMetrics          // Prometheus (metrics_prom.go)
	budget   *budget              // --max-cost-per-day, --max-tokens-per-day (budget.go)
	activeAt time.Time            // the last moment the harness was not quiet (--exit-after-inactivity)
	catchUp  catchUp              // history pages older than a subscription's limit (catchup.go)
	dir      *directory           // the kind-10100 directory entry; nil with --no-publish-directory (directory.go)
	frames   frameResults         // the relay observer's sender; nil when off (observe.go)
	guard    *observerframe.Guard // checks the owner's control frames (observe.go)

	inbox inbox // what goroutines report back to the loop

	// tasks are the goroutines the loop started (turns, spawns, lookups, publishes); Run waits
	// for all of them before it returns.
	tasks      sync.WaitGroup
	shutdown   context.CancelFunc
	stopLive   context.CancelFunc // ends the WebSocket; stop calls it after the offline presence
	stopBridge func()             // closes the MCP HTTP bridge (mcpbridge.go); stop calls it last
}

// inbox is where the loop's goroutines report back.
type inbox struct {
	results   chan turnResult
	checks    chan checkResult // the reply safety net's checks (reply.go)
	steers    chan steerResult
	questions chan questionChange
	wake      chan struct{} // dispatch again (a hold ended, a steer went back to the queue)
	peeks     chan heartbeatPeek
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
	clk := cfg.Clock
	h := &Harness{
		cfg:      cfg,
		log:      cfg.Logger,
		bus:      cfg.Observer,
		agent:    pk,
		clock:    clk,
		gate:     Gate{Mode: cfg.RespondTo, Owner: cfg.Owner, Allowlist: cfg.Allowlist},
		convs:    newConversations(clk.Now, func() float64 { return 0.8 + 0.4*rand.Float64() }),
		chans:    newChannelTable(),
		seen:     client.NewIDSet(20000),
		siblings: newSiblingLookups(),
		metrics:  newOpsMetrics(clk),
		catchUp:  newCatchUp(),
		inbox: inbox{
			results:   make(chan turnResult, 64),
			checks:    make(chan checkResult, 64),
			steers:    make(chan steerResult, 16),
			questions: make(chan questionChange, 16),
			wake:      make(chan struct{}, 1),
			peeks:     make(chan heartbeatPeek, 1),
		},
	}
	if !cfg.NoPublishDirectory {
		h.dir = newDirectory()
	}
	if cfg.NoResumeSessions {
		h.store = sessionstore.Disabled()
	} else if h.store, err = sessionstore.Open(cfg.StateDir, pk, cfg.Logger, cfg.stateWriteOpts...); err != nil {
		return nil, err
	}
	if h.jrnl, err = journal.Open(cfg.StateDir, pk, cfg.Logger); err != nil {
		h.store.Close()
		return nil, err
	}
	if h.budget, err = openBudget(&h.cfg, filepath.Join(cfg.StateDir, "budget-"+pk+".json"), clk, cfg.Logger); err != nil {
		h.jrnl.Close()
		h.store.Close()
		return nil, err
	}
	h.feed = &activity{bus: h.bus, cwd: cfg.AgentCwd, costs: &h.costs, runIDs: &h.runIDs, turns: &h.turns, replays: &h.replays}
	bridge := client.NewBridge(cfg.RelayURL, cfg.SecretKey)
	bridge.AuthTag = cfg.AuthTag                // x-auth-tag on every call, the auth tag on every event it signs
	sock := &client.SocketFirst{Bridge: bridge} // its Live is set once Run has the session
	h.relay = &relayClient{bridge: bridge, sock: sock, self: pk, cfg: &h.cfg, log: h.log, clock: clk}
	h.ack = newAcker(&h.cfg, pk, socketFirst{bridge, sock}, h.log, &h.tasks)
	h.asker = newPermAsker(&h.cfg, pk, h.relay, h.feed, h.inbox.questions, filepath.Join(cfg.StateDir, "permissions-"+pk+".json"))
	h.sessions = &sessionOpener{cfg: &h.cfg, store: h.store, relay: h.relay, feed: h.feed, replays: &h.replays, log: h.log, clock: clk}
	h.pool = &pool{
		cfg: &h.cfg, log: h.log, clock: clk, tasks: &h.tasks,
		client: acp.ClientConfig{
			OnLine:         h.feed.onLine,
			OnUpdate:       h.feed.onUpdate,
			Permissions:    permissionPolicy(&h.cfg),
			PermissionFunc: h.asker.permissionFunc(),
			ClientVersion:  cfg.Version,
		},
		spawned: make(chan spawnResult, 64),
	}
	h.pool.record = newAgentRecord(agentsFile(cfg.StateDir, pk), h.log, cfg.stateWriteOpts...)
	h.sessions.metrics = h.metrics
	if h.followOn() {
		h.follows = loadFollowSet(followFile(cfg.StateDir, pk), cfg.ThreadFollowTTL, h.log, cfg.stateWriteOpts...)
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
	defer h.pool.record.close()
	defer h.asker.close()
	defer h.budget.close()
	if h.follows != nil {
		defer h.follows.close()
	}
	defer h.stop(cancel) // first: nothing may write the journal or the store once they close

	h.turnEnds.since = h.clock.Now()
	since := h.catchUpSince()
	h.live = client.NewLive(client.LiveConfig{RelayURL: h.cfg.RelayURL, SecretKey: h.cfg.SecretKey, AuthTag: h.cfg.AuthTag, Logger: h.log,
		OnReady: h.metrics.relayReady})
	h.relay.sock.Live = h.live
	liveErr := make(chan error, 1)
	// The socket outlives the run's context by the offline presence at shutdown (see stop).
	liveCtx, stopLive := context.WithCancel(context.WithoutCancel(ctx))
	h.stopLive = stopLive
	h.tasks.Go(func() { liveErr <- h.live.Run(liveCtx) })
	h.ack.start(ctx, h.live, h.clock)
	h.startObserver(ctx)

	if err := h.publishAddPolicy(ctx); err != nil {
		return err
	}
	if err := h.discover(ctx, since); err != nil {
		return err
	}
	if h.dir != nil {
		h.tasks.Go(func() { runDirectory(ctx, h.dir, h.clock, h.log, h.writeDirectory) })
		h.directoryChanged() // reconcile: even with no channels, the entry is brought up to date
		h.flushDirectory()
	}
	h.live.Subscribe(subMembership, nostr.Filter{
		Kinds: []int{protocol.KindMemberAdded, protocol.KindMemberRemoved},
		Tags:  nostr.TagMap{"p": {h.agent}},
		Since: ptrTS(since),
	})
	h.subscribeReminders()
	h.startFollowing(since)
	h.flushSubs()
	if h.pool.reapOrphans() > 0 {
		// A reply a killed orphan's `buzz` call sent just before may still be committing at the
		// relay; the replay below looks for it.
		select {
		case <-clock.After(h.clock, publishSettle):
		case <-ctx.Done():
		}
	}
	h.asker.recover(ctx, h.done) // before the replay: a turn that died asking the owner is not run again
	h.replayJournal(ctx)
	stopBridge, err := h.startMCPBridge()
	if err != nil {
		return err
	}
	h.stopBridge = stopBridge
	h.log.Info("buzz-acp ready", "agent", h.agent, "channels", len(h.chans.byID), "relay", h.cfg.RelayURL, "procs", runtime.GOMAXPROCS(0))
	h.pool.startAll(ctx)
	h.activeAt = h.clock.Now()
	return h.serve(ctx, liveErr)
}

// catchUpSince is where subscriptions start: everything since the last event the journal saw (a
// little before it, as created_at has one-second resolution), so mentions sent while we were
// down are answered; now on a first start. BUZZ_ACP_REPLAY_FLOOR (Config.ReplayFloor) moves it
// back to that moment when that is earlier: the mention that woke a scaled-to-zero harness was
// sent before it started. It is taken before connecting.
func (h *Harness) catchUpSince() time.Time {
	now := h.clock.Now()
	since := now
	if w := h.jrnl.Watermark(); w > 0 {
		since = time.Unix(w-5, 0)
	}
	if f := h.cfg.ReplayFloor; !f.IsZero() && f.Before(since) {
		since = f
	}
	if oldest := now.Add(-maxCatchUp); since.Before(oldest) {
		since = oldest
	}
	// Never from the future: one event dated ahead must not blind every subscription.
	if !since.Before(now) {
		return now
	}
	return since
}

// serve is the loop: the one goroutine that owns the conversations, the channel table and the
// pool.
func (h *Harness) serve(ctx context.Context, liveErr <-chan error) error {
	tick := h.clock.NewTicker(time.Second)
	defer tick.Stop()
	var heartbeats <-chan time.Time
	if h.cfg.HeartbeatInterval > 0 {
		hb := h.clock.NewTicker(h.cfg.HeartbeatInterval)
		defer hb.Stop()
		heartbeats = hb.C()
	}
	for {
		h.dispatch(ctx)
		h.wakeForWork(ctx)
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
		case r := <-h.inbox.results:
			h.finishTurn(ctx, r)
		case r := <-h.inbox.checks:
			h.finishCheck(ctx, r)
		case r := <-h.inbox.steers:
			h.finishSteer(r)
		case q := <-h.inbox.questions:
			h.changeQuestion(q)
		case s := <-h.pool.spawned:
			h.finishSpawn(ctx, s)
		case m := <-h.chans.lookups.done:
			h.applyMembership(m)
		case sc := <-h.siblings.done:
			h.finishSiblingLookup(ctx, sc)
		case p := <-h.catchUp.pages:
			h.takePage(ctx, p)
		case now := <-tick.C():
			// Once a second, one REQ per changed channel group: a burst of joins (a flood of
			// adds) costs the relay one query per group, not one per join. Each channel's
			// since covers the wait.
			if h.follows != nil {
				h.unfollow(h.follows.expired(now))
			}
			h.flushSubs()
			h.flushDirectory()
			h.pool.maintain(ctx, h.convs)
			h.keepTyping(now)
			// The clock's time, not the tick's: a tick a slow loop missed is dropped, and the
			// one it gets may be stale.
			h.sleepIdle(h.clock.Now())
			h.checkInactivity(h.clock.Now())
			h.publishSnapshot()
		case <-heartbeats:
			h.heartbeat(ctx)
		case p := <-h.inbox.peeks:
			h.finishPeek(ctx, p)
		case <-h.inbox.wake:
		}
	}
}

// poke makes the loop dispatch again (a hold ended, a steer went back to the queue).
func (b *inbox) poke() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// stop ends the run: it cancels running turns, stops every agent process, and waits for the
// goroutines the harness started, so nothing touches the journal or the store after Run.
func (h *Harness) stop(cancel context.CancelFunc) {
	for _, c := range h.convs.running() {
		c.turn.cancel(errShutdown)
	}
	cancel()
	if h.stopLive != nil {
		h.tasks.Go(func() { h.ack.offline(context.Background()); h.stopLive() })
	}
	h.pool.killAll()
	h.tasks.Wait()
	h.pool.discardUnadopted()
	if h.stopBridge != nil {
		h.stopBridge() // the agents that used it are gone
	}
}

var errShutdown = errors.New("harness shutting down")

// maxCatchUp bounds how far back a restarted harness asks the relay for missed events.
const maxCatchUp = 7 * 24 * time.Hour

func ptrTS(t time.Time) *nostr.Timestamp {
	ts := nostr.Timestamp(t.Unix())
	return &ts
}

// timestamp dates an event the harness signs.
func timestamp(c clock.Clock) nostr.Timestamp { return nostr.Timestamp(c.Now().Unix()) }
