package relay

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/relay/store"
	"github.com/buzz-harness/buzz/internal/relay/store/postgres"
)

// shared is what a store several relay nodes use at once (PostgreSQL) adds to store.Store:
// the per-node state (acl mirror, stamps, admin lock, sockets) is kept right across nodes
// through it. Nil for SQLite, which has one node.
type shared interface {
	// LockChannel serializes one channel's admin check-then-write across nodes.
	LockChannel(ctx context.Context, id string) (unlock func(), err error)
	Channel(ctx context.Context, id string) (store.Channel, bool, error)
	// Publish passes an ephemeral event to the other nodes.
	Publish(ctx context.Context, ev *nostr.Event, channelID string) error
	// Follow hands other nodes' changes to p until ctx ends.
	Follow(ctx context.Context, p postgres.Peer)
	// Live reports whether this node currently receives other nodes' changes.
	Live() bool
}

// errNoDatabase answers writes while the node is cut off from the shared database: it would
// act on channel state other nodes may have changed. Clients retry.
var errNoDatabase = rejected(http.StatusServiceUnavailable, protocol.ReasonError.Msg("relay lost its database connection; retry in a few seconds"))

// followTimeout bounds how long Open waits for the change feed's first connection.
const followTimeout = 30 * time.Second

// startFollowing subscribes to other nodes' changes and waits until the feed is up.
func (r *Relay) startFollowing() error {
	ctx, cancel := context.WithCancel(context.Background())
	done, up := make(chan struct{}), make(chan struct{}, 1)
	go func() {
		defer close(done)
		r.shared.Follow(ctx, postgres.Peer{
			Stored:         r.broadcast,
			Ephemeral:      r.broadcast,
			ChannelChanged: func(id string) { _ = r.reloadChannel(ctx, id) },
			Resync:         func() { r.reloadChannels(ctx) },
			Up: func() {
				select {
				case up <- struct{}{}:
				default:
				}
			},
			Log:   r.log,
			Retry: r.cfg.ReconnectDelay,
		})
	}()
	r.stopFollow = func() { cancel(); <-done }
	select {
	case <-up:
		return nil
	case <-time.After(followTimeout):
		r.stopFollow()
		return fmt.Errorf("relay: no change feed from the database after %s", followTimeout)
	}
}

// reloadChannel refreshes the acl mirror of one channel from the database, and ends the live
// subscriptions of members a private channel lost (as the node that removed them does).
func (r *Relay) reloadChannel(ctx context.Context, id string) error {
	c, ok, err := r.shared.Channel(ctx, id)
	if err != nil {
		r.log.Error("reload channel", "channel", id, "err", err)
		return err
	}
	if ok {
		r.applyChannel(c)
	}
	return nil
}

func (r *Relay) reloadChannels(ctx context.Context) {
	chans, err := r.st.Channels(ctx)
	if err != nil {
		r.log.Error("reload channels", "err", err)
		return
	}
	for _, c := range chans {
		r.applyChannel(c)
	}
}

func (r *Relay) applyChannel(c store.Channel) {
	old, had := r.acl.get(c.ID)
	r.acl.put(c)
	if !had || c.Visibility != protocol.VisibilityPrivate {
		return
	}
	for pk := range old.Members {
		if _, still := c.Members[pk]; !still || c.Deleted {
			r.revoke(pk, c.ID)
		}
	}
}
