package harness

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/client"
	"github.com/buzz-harness/buzz/internal/clock"
	"github.com/buzz-harness/buzz/internal/protocol"
)

// Acknowledgement: what tells people the agent noticed them and is working.
//
//   - 👀 (kind 7, over the HTTP bridge) on every accepted event once it is queued; removed (kind 5
//     naming our reaction) when the event's turn ends, however it ends, or when the event leaves
//     the queue without a turn. Reaction ids are remembered in memory. After a restart, a
//     replayed event asks the relay for our own 👀 on it first and adopts it instead of adding a
//     second one (one query per replayed event, at startup only).
//   - Typing (kind 20002, over the WebSocket: the bridge refuses ephemeral kinds) for every
//     running turn: one at turn start, then every typingEvery (the loop's tick sends them, from
//     the running turns it owns). No "stopped" event exists; clients expire typing on their own.
//   - Presence (kind 20001, WebSocket): "online" once connected and every presenceEvery,
//     "offline" at shutdown (best effort).
//
// The loop calls the hooks (queued, replayed, typing, finished); they never block: reaction
// publishes go to a fixed set of workers through a bounded queue, typing publishes run on
// goroutines joined by the harness's WaitGroup (at most maxTypingInFlight), each with a short
// timeout. A publish that fails is logged and forgotten.

const (
	ackEmoji          = "👀"
	typingEvery       = 3 * time.Second
	presenceEvery     = 60 * time.Second
	reactTimeout      = 3 * time.Second
	typingTimeout     = 2 * time.Second
	presenceTimeout   = 5 * time.Second
	offlineTimeout    = 2 * time.Second
	maxAckPublishes   = 10   // reaction adds/removes in flight at once (the workers)
	maxAckQueued      = 4096 // reaction work waiting for a worker; past it, dropped with a warning
	maxTypingInFlight = 4    // typing publishes in flight; a tick finding none free is skipped
)

// wsPublisher publishes over the WebSocket (client.Live).
type wsPublisher interface {
	Publish(ctx context.Context, ev *nostr.Event) error
}

// bridgeClient is what the acknowledgements need of the HTTP bridge.
type bridgeClient interface {
	Publish(ctx context.Context, ev *nostr.Event) (client.PublishResult, error)
	Query(ctx context.Context, filters ...client.Filter) ([]nostr.Event, error)
}

// socketFirst is the bridge with its publishes going over the socket while it is up.
type socketFirst struct {
	*client.Bridge
	pub *client.SocketFirst
}

func (s socketFirst) Publish(ctx context.Context, ev *nostr.Event) (client.PublishResult, error) {
	return s.pub.Publish(ctx, ev)
}

// acker is the acknowledgement part. Its hooks are called from the harness loop; its state is
// shared with the publish goroutines under mu.
type acker struct {
	reactions, typingOn, presence bool
	self                          string
	bridge                        bridgeClient
	log                           *slog.Logger
	tasks                         *sync.WaitGroup

	ctx   context.Context // the run's; set by start
	clock clock.Clock
	ws    wsPublisher
	work  chan func(ctx context.Context) // reaction publishes, for the workers
	tsem  chan struct{}

	mu   sync.Mutex
	seen map[string]*ackReaction // target event id → our 👀 on it
}

// ackReaction is our 👀 on one event: id is empty while the add is still in flight; drop asks
// for removal as soon as the add lands.
type ackReaction struct {
	channel string
	id      string
	drop    bool
}

func newAcker(cfg *Config, self string, bridge bridgeClient, log *slog.Logger, tasks *sync.WaitGroup) *acker {
	return &acker{
		reactions: !cfg.NoReactions, typingOn: !cfg.NoTyping, presence: !cfg.NoPresence,
		self: self, bridge: bridge, log: log, tasks: tasks,
		work: make(chan func(context.Context), maxAckQueued),
		tsem: make(chan struct{}, maxTypingInFlight),
		seen: map[string]*ackReaction{},
	}
}

// start binds the run's context, clock and WebSocket, and starts the reaction workers and the
// presence loop, which end with ctx.
func (a *acker) start(ctx context.Context, ws wsPublisher, c clock.Clock) {
	a.ctx, a.ws, a.clock = ctx, ws, c
	if a.reactions {
		for range maxAckPublishes {
			a.tasks.Go(a.worker)
		}
	}
	if a.presence {
		a.tasks.Go(a.presenceLoop)
	}
}

// worker runs reaction publishes until the run ends; work still queued then is dropped.
func (a *acker) worker() {
	for {
		select {
		case <-a.ctx.Done():
			return
		case f := <-a.work:
			ctx, cancel := context.WithTimeout(a.ctx, reactTimeout)
			f(ctx)
			cancel()
		}
	}
}

// queued adds 👀 to an event just accepted into the queue.
func (a *acker) queued(chID string, ev *nostr.Event) { a.react(chID, ev.ID, false) }

// replayed adds 👀 to an event replayed from the journal, unless our 👀 from before the restart
// is still there (then it is adopted, so its turn's end removes it).
func (a *acker) replayed(chID string, ev *nostr.Event) { a.react(chID, ev.ID, true) }

func (a *acker) react(chID, target string, adopt bool) {
	if !a.reactions || a.ctx == nil {
		return
	}
	a.mu.Lock()
	if _, ok := a.seen[target]; ok {
		a.mu.Unlock()
		return
	}
	r := &ackReaction{channel: chID}
	a.seen[target] = r
	a.mu.Unlock()
	a.async(func(ctx context.Context) {
		id := ""
		if adopt {
			id = a.existing(ctx, target)
		}
		if id == "" {
			ev := &nostr.Event{Kind: protocol.KindReaction, Content: ackEmoji, CreatedAt: timestamp(a.clock),
				Tags: nostr.Tags{{"e", target}, {"h", chID}}}
			if a.publish(ctx, ev) {
				id = ev.ID
			}
		}
		a.mu.Lock()
		r.id = id
		drop := r.drop
		if drop || id == "" {
			delete(a.seen, target)
		}
		a.mu.Unlock()
		if drop && id != "" { // the turn ended while the add was in flight
			a.unpublish(ctx, chID, id)
		}
	})
}

// existing finds our 👀 on target left by an earlier run ("" if none, or the query failed).
func (a *acker) existing(ctx context.Context, target string) string {
	evs, err := a.bridge.Query(ctx, client.Filter{Filter: nostr.Filter{Kinds: []int{protocol.KindReaction},
		Authors: []string{a.self}, Tags: nostr.TagMap{"e": {target}}, Limit: 20}})
	if err != nil {
		return ""
	}
	for _, e := range evs {
		if e.Content == ackEmoji {
			return e.ID
		}
	}
	return ""
}

// finished removes our 👀 from events that reached their end (a turn ended, or they left the
// queue without one). Unknown ids are ignored.
func (a *acker) finished(ids ...string) {
	if !a.reactions || a.ctx == nil {
		return
	}
	for _, target := range ids {
		a.mu.Lock()
		r, ok := a.seen[target]
		if !ok {
			a.mu.Unlock()
			continue
		}
		if r.id == "" { // still being added: the add removes it when it lands
			r.drop = true
			a.mu.Unlock()
			continue
		}
		delete(a.seen, target)
		a.mu.Unlock()
		ch, id := r.channel, r.id
		a.async(func(ctx context.Context) { a.unpublish(ctx, ch, id) })
	}
}

// typingTags are a conversation's typing tags, following the batch's last event: h, plus its
// thread's root and parent when it is a reply.
func typingTags(chID string, last *nostr.Event) nostr.Tags {
	tags := nostr.Tags{{"h", chID}}
	if ref := protocol.ParseThread(last.Tags); ref.IsReply() {
		tags = append(tags, protocol.ReplyTags(ref.Root, ref.Parent)...)
	}
	return tags
}

// typing sends one typing event for a running turn (the loop calls it at turn start and every
// typingEvery).
func (a *acker) typing(tags nostr.Tags) {
	if a.typingOn && a.ctx != nil {
		a.sendTyping(tags)
	}
}

// sendTyping publishes one typing event, fire-and-forget: skipped when too many are in flight.
func (a *acker) sendTyping(tags nostr.Tags) {
	select {
	case a.tsem <- struct{}{}:
	default:
		return
	}
	a.tasks.Go(func() {
		defer func() { <-a.tsem }()
		ctx, cancel := context.WithTimeout(a.ctx, typingTimeout)
		defer cancel()
		ev := &nostr.Event{Kind: protocol.KindTyping, Content: "", CreatedAt: timestamp(a.clock), Tags: tags}
		if err := a.ws.Publish(ctx, ev); err != nil && a.ctx.Err() == nil {
			a.log.Debug("typing publish failed", "err", err)
		}
	})
}

func (a *acker) presenceLoop() {
	a.sendPresence(a.ctx, "online", presenceTimeout) // waits for the connection
	t := a.clock.NewTicker(presenceEvery)
	defer t.Stop()
	for {
		select {
		case <-a.ctx.Done():
			return
		case <-t.C():
			a.sendPresence(a.ctx, "online", presenceTimeout)
		}
	}
}

// offline announces the shutdown: best effort, bounded by offlineTimeout. ctx must outlive the
// run's (the run's is already cancelled at shutdown).
func (a *acker) offline(ctx context.Context) {
	if !a.presence || a.ws == nil {
		return
	}
	a.sendPresence(ctx, "offline", offlineTimeout)
}

func (a *acker) sendPresence(ctx context.Context, status string, timeout time.Duration) {
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ev := &nostr.Event{Kind: protocol.KindPresence, Content: status, CreatedAt: timestamp(a.clock), Tags: nostr.Tags{}}
	if err := a.ws.Publish(pctx, ev); err != nil && ctx.Err() == nil {
		a.log.Debug("presence publish failed", "status", status, "err", err)
	}
}

// async hands f to the reaction workers without waiting (the loop calls it): with the queue
// full, the acknowledgement is dropped, which costs a 👀, never a mention.
func (a *acker) async(f func(ctx context.Context)) {
	select {
	case a.work <- f:
	default:
		a.log.Warn("acknowledgement queue full; dropping one reaction publish")
	}
}

// publish sends ev (over the socket while it is up) and reports whether the relay took it.
func (a *acker) publish(ctx context.Context, ev *nostr.Event) bool {
	res, err := a.bridge.Publish(ctx, ev)
	switch {
	case err != nil:
		if a.ctx.Err() == nil {
			a.log.Warn("acknowledgement publish failed", "kind", ev.Kind, "err", err)
		}
		return false
	case !res.Accepted:
		a.log.Warn("relay refused acknowledgement", "kind", ev.Kind, "message", res.Message)
		return false
	}
	return true
}

// unpublish deletes our reaction id (NIP-09), in its channel.
func (a *acker) unpublish(ctx context.Context, chID, id string) {
	a.publish(ctx, &nostr.Event{Kind: protocol.KindDeletion, CreatedAt: timestamp(a.clock),
		Tags: nostr.Tags{{"e", id}, {"h", chID}}})
}
