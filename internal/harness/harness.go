// Package harness is buzz-acp's core: it listens for mentions on a Buzz relay, queues them per
// channel, and drives ACP agents with one session per channel.
//
// One goroutine (Run's loop) owns all mutable state: the queue, the channel table, the agent
// slots. Turns run in their own goroutines with exclusive use of a slot and report back over a
// channel; nothing else touches a busy slot.
package harness

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/client"
	"github.com/buzz-harness/buzz/internal/journal"
	"github.com/buzz-harness/buzz/internal/observer"
	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/sessionstore"
)

// Harness is one running buzz-acp.
type Harness struct {
	cfg    Config
	log    *slog.Logger
	bus    *observer.Bus
	agent  string // our pubkey hex
	bridge *client.Bridge
	live   *client.Live
	store  *sessionstore.Store
	jrnl   *journal.Journal
	queue  *Queue
	gate   Gate

	channels  map[string]*channel  // subscribed channels by id
	removed   map[string]bool      // channels we were removed from while a turn ran
	seen      *client.IDSet        // event ids already accepted (a replay never prompts twice)
	memberSeq map[string]int       // per channel: membership lookups started
	metas     chan membershipCheck // membership lookups finished

	slots []*slot
	// inflight stops a channel's running turn; the cause says why (owner cancel, rotate, leave).
	inflight map[string]context.CancelCauseFunc
	// resumeRetried marks channels whose resume already failed indeterminately once.
	resumeRetried map[string]bool
	heartbeatBusy bool
	profileCache  profileCache
	results       chan turnResult
	spawns        chan spawnResult
	wake          chan struct{}

	watermark time.Time // taken before connecting: the first subscription's since
	now       func() time.Time
	shutdown  context.CancelFunc
}

// channel is a subscribed channel and what we know about it.
type channel struct {
	ID    string
	Name  string
	Type  string // stream | private | dm | unknown
	About string
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
	h := &Harness{
		cfg:           cfg,
		log:           cfg.Logger,
		bus:           cfg.Observer,
		agent:         pk,
		bridge:        client.NewBridge(cfg.RelayURL, cfg.SecretKey),
		queue:         NewQueue(),
		gate:          Gate{Mode: cfg.RespondTo, Owner: cfg.Owner, Allowlist: cfg.Allowlist},
		channels:      map[string]*channel{},
		removed:       map[string]bool{},
		memberSeq:     map[string]int{},
		metas:         make(chan membershipCheck, 16),
		seen:          client.NewIDSet(10000),
		inflight:      map[string]context.CancelCauseFunc{},
		resumeRetried: map[string]bool{},
		results:       make(chan turnResult, 64),
		spawns:        make(chan spawnResult, 64),
		wake:          make(chan struct{}, 1),
		now:           time.Now,
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
	return h, nil
}

// Run connects, discovers channels, starts the agent pool and serves until ctx ends or the owner
// sends !shutdown. Subscriptions come up (and events queue) before the pool is ready, so a slow
// agent start never drops a mention.
func (h *Harness) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	h.shutdown = cancel
	defer h.store.Close()
	defer h.jrnl.Close()

	// Ask the relay for everything since the last event the journal saw (a little before it, as
	// created_at has one-second resolution), so mentions sent while we were down are answered.
	h.watermark = h.now()
	if w := h.jrnl.Watermark(); w > 0 {
		since := time.Unix(w-5, 0)
		if oldest := h.watermark.Add(-maxCatchUp); since.Before(oldest) {
			since = oldest
		}
		// Never from the future: one event dated ahead must not blind every subscription.
		if since.Before(h.watermark) {
			h.watermark = since
		}
	}
	h.live = client.NewLive(client.LiveConfig{RelayURL: h.cfg.RelayURL, SecretKey: h.cfg.SecretKey, Logger: h.log})
	liveErr := make(chan error, 1)
	go func() { liveErr <- h.live.Run(ctx) }()

	if err := h.discover(ctx); err != nil {
		return err
	}
	h.live.Subscribe(subMembership, nostr.Filter{
		Kinds: []int{protocol.KindMemberAdded, protocol.KindMemberRemoved},
		Tags:  nostr.TagMap{"p": {h.agent}},
		Since: ptrTS(h.watermark),
	})
	h.reapOrphans()
	h.replayJournal(ctx)
	h.log.Info("buzz-acp ready", "agent", h.agent, "channels", len(h.channels), "relay", h.cfg.RelayURL)

	h.slots = make([]*slot, h.cfg.Agents)
	for i := range h.slots {
		h.slots[i] = &slot{idx: i}
		h.startSpawn(ctx, h.slots[i])
	}

	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var heartbeats <-chan time.Time
	if h.cfg.HeartbeatInterval > 0 {
		hb := time.NewTicker(h.cfg.HeartbeatInterval)
		defer hb.Stop()
		heartbeats = hb.C
	}
	defer h.stopAll()
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
		case s := <-h.spawns:
			h.finishSpawn(ctx, s)
		case m := <-h.metas:
			h.applyMembership(m)
		case <-tick.C:
			h.maintain(ctx)
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

// stopAll cancels running turns and stops every agent process.
func (h *Harness) stopAll() {
	for _, stop := range h.inflight {
		stop(errShutdown)
	}
	for _, s := range h.slots {
		if s.proc != nil {
			_ = s.proc.Kill()
		}
	}
}

var errShutdown = errors.New("harness shutting down")

// maxCatchUp bounds how far back a restarted harness asks the relay for missed events.
const maxCatchUp = 7 * 24 * time.Hour

func ptrTS(t time.Time) *nostr.Timestamp {
	ts := nostr.Timestamp(t.Unix())
	return &ts
}
