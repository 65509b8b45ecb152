package client

import (
	"context"
	"errors"

	"github.com/nbd-wtf/go-nostr"
)

// SocketFirst publishes and queries over a Live session's socket while it is connected and over
// the HTTP bridge otherwise. The socket is the cheaper road: the bridge signs a NIP-98 header
// for every request and the relay checks it and records it against replays, a second curve
// operation on each side and a database write for every call, on the cores the harness and
// relay share with the agents. An event the socket lost on the way goes again over the bridge,
// which retries and fails over; the relay takes one event id once.
type SocketFirst struct {
	Live   *Live // nil until the session exists: the bridge only
	Bridge *Bridge
}

// Publish has Bridge.Publish's contract: a refusal is Accepted=false with a nil error.
func (p *SocketFirst) Publish(ctx context.Context, ev *nostr.Event) (PublishResult, error) {
	if l := p.Live; l != nil && l.connected() {
		if ev.Sig == "" {
			addAuthTag(ev, l.authTag)
		}
		if err := SignIfUnsigned(ev, l.cfg.SecretKey, p.Bridge.now()); err != nil {
			return PublishResult{}, err
		}
		err := l.publishNow(ctx, ev)
		var rej *RejectedError
		switch {
		case err == nil:
			return PublishResult{EventID: ev.ID, Accepted: true}, nil
		case errors.As(err, &rej):
			return PublishResult{EventID: ev.ID, Message: rej.Message}, nil
		case ctx.Err() != nil:
			return PublishResult{}, err
		}
		// No connection after all, or it went down before the OK: the bridge, which says
		// whether the relay has the event.
	}
	return p.Bridge.Publish(ctx, ev)
}

// Query has Bridge.Query's contract for plain filters: the stored events, per filter newest
// first. A query the socket could not finish (the connection went, the relay closed it) goes
// over the bridge, which says why it fails if it does.
func (p *SocketFirst) Query(ctx context.Context, filters ...nostr.Filter) ([]nostr.Event, error) {
	if l := p.Live; l != nil && l.connected() {
		evs, err := l.Query(ctx, filters...)
		if err == nil || ctx.Err() != nil {
			return evs, err
		}
	}
	fs := make([]Filter, len(filters))
	for i, f := range filters {
		fs[i] = Filter{Filter: f}
	}
	return p.Bridge.Query(ctx, fs...)
}

// connected reports whether a session is up now, without waiting for one.
func (l *Live) connected() bool {
	select {
	case <-l.Connected():
		return true
	default:
		return false
	}
}
