package harness

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/client"
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
//     running turn: one at turn start, then every typingEvery. No "stopped" event exists;
//     clients expire typing on their own.
//   - Presence (kind 20001, WebSocket): "online" once connected and every presenceEvery,
//     "offline" at shutdown (best effort).
//
// The loop calls the hooks (queued, replayed, turnStarted, turnEnded, finished); they never
// block: publishes run on goroutines joined by the harness's WaitGroup, bounded by a semaphore,
// each with a short timeout. A publish that fails is logged and forgotten.

const (
	ackEmoji          = "👀"
	typingEvery       = 3 * time.Second
	presenceEvery     = 60 * time.Second
	reactTimeout      = 3 * time.Second
	typingTimeout     = 2 * time.Second
	presenceTimeout   = 5 * time.Second
	offlineTimeout    = 2 * time.Second
	maxAckPublishes   = 10 // reaction adds/removes in flight at once
	maxTypingInFlight = 4  // typing publishes in flight; a tick finding none free is skipped
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

// acker is the acknowledgement part. Its hooks are called from the harness loop; its state is
// shared with the publish goroutines under mu.
type acker struct {
	reactions, typing, presence bool
	self                        string
	bridge                      bridgeClient
	log                         *slog.Logger
	tasks                       *sync.WaitGroup

	ctx  context.Context // the run's; set by start
	ws   wsPublisher
	sem  chan struct{}
	tsem chan struct{}

	mu      sync.Mutex
	seen    map[string]*ackReaction // target event id → our 👀 on it
	working map[scopeKey]nostr.Tags // conversations with a running turn → typing tags
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
		reactions: !cfg.NoReactions, typing: !cfg.NoTyping, presence: !cfg.NoPresence,
		self: self, bridge: bridge, log: log, tasks: tasks,
		sem:     make(chan struct{}, maxAckPublishes),
		tsem:    make(chan struct{}, maxTypingInFlight),
		seen:    map[string]*ackReaction{},
		working: map[scopeKey]nostr.Tags{},
	}
}

// start binds the run's context and WebSocket and starts the typing and presence loops.
func (a *acker) start(ctx context.Context, ws wsPublisher) {
	a.ctx, a.ws = ctx, ws
	if a.typing {
		a.tasks.Go(a.typingLoop)
	}
	if a.presence {
		a.tasks.Go(a.presenceLoop)
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
			ev := &nostr.Event{Kind: protocol.KindReaction, Content: ackEmoji, CreatedAt: nostr.Now(),
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

// turnStarted marks a conversation as working and sends its first typing event now. The tags
// follow the batch's last event: h, plus its thread's root and parent when it is a reply.
func (a *acker) turnStarted(k scopeKey, chID string, last *nostr.Event) {
	if !a.typing || a.ctx == nil {
		return
	}
	tags := nostr.Tags{{"h", chID}}
	if ref := protocol.ParseThread(last.Tags); ref.IsReply() {
		tags = append(tags, protocol.ReplyTags(ref.Root, ref.Parent)...)
	}
	a.mu.Lock()
	a.working[k] = tags
	a.mu.Unlock()
	a.sendTyping(tags)
}

// turnEnded stops a conversation's typing and removes 👀 from its batch.
func (a *acker) turnEnded(k scopeKey, ids []string) {
	a.mu.Lock()
	delete(a.working, k)
	a.mu.Unlock()
	a.finished(ids...)
}

func (a *acker) typingLoop() {
	t := time.NewTicker(typingEvery)
	defer t.Stop()
	for {
		select {
		case <-a.ctx.Done():
			return
		case <-t.C:
		}
		a.mu.Lock()
		all := make([]nostr.Tags, 0, len(a.working))
		for _, tags := range a.working {
			all = append(all, tags)
		}
		a.mu.Unlock()
		for _, tags := range all {
			a.sendTyping(tags)
		}
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
		ev := &nostr.Event{Kind: protocol.KindTyping, Content: "", CreatedAt: nostr.Now(), Tags: tags}
		if err := a.ws.Publish(ctx, ev); err != nil && a.ctx.Err() == nil {
			a.log.Debug("typing publish failed", "err", err)
		}
	})
}

func (a *acker) presenceLoop() {
	a.sendPresence(a.ctx, "online", presenceTimeout) // waits for the connection
	t := time.NewTicker(presenceEvery)
	defer t.Stop()
	for {
		select {
		case <-a.ctx.Done():
			return
		case <-t.C:
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
	ev := &nostr.Event{Kind: protocol.KindPresence, Content: status, CreatedAt: nostr.Now(), Tags: nostr.Tags{}}
	if err := a.ws.Publish(pctx, ev); err != nil && ctx.Err() == nil {
		a.log.Debug("presence publish failed", "status", status, "err", err)
	}
}

// async runs f on a harness goroutine once a publish slot is free (the loop never waits for one).
func (a *acker) async(f func(ctx context.Context)) {
	a.tasks.Go(func() {
		select {
		case a.sem <- struct{}{}:
		case <-a.ctx.Done():
			return
		}
		defer func() { <-a.sem }()
		ctx, cancel := context.WithTimeout(a.ctx, reactTimeout)
		defer cancel()
		f(ctx)
	})
}

// publish sends ev over the bridge and reports whether the relay took it.
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
	a.publish(ctx, &nostr.Event{Kind: protocol.KindDeletion, CreatedAt: nostr.Now(),
		Tags: nostr.Tags{{"e", id}, {"h", chID}}})
}
