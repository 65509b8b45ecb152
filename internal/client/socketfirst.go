package client

import (
	"context"
	"errors"

	"github.com/nbd-wtf/go-nostr"
)

// Publisher publishes over a Live session's socket while it is connected and over the HTTP
// bridge otherwise. The socket is the cheaper road: the bridge signs a NIP-98 header for every
// request and the relay checks it, a second curve operation on each side for every event, on
// the cores the harness and relay share with the agents. An event the socket lost on the way
// goes again over the bridge, which retries and fails over; the relay takes one event id once.
type Publisher struct {
	Live   *Live // nil until the session exists: the bridge only
	Bridge *Bridge
}

// Publish has Bridge.Publish's contract: a refusal is Accepted=false with a nil error.
func (p *Publisher) Publish(ctx context.Context, ev *nostr.Event) (PublishResult, error) {
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

// connected reports whether a session is up now, without waiting for one.
func (l *Live) connected() bool {
	select {
	case <-l.Connected():
		return true
	default:
		return false
	}
}
