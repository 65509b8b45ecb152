package harness

import (
	"context"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/client"
	"github.com/buzz-harness/buzz/internal/clock"
	"github.com/buzz-harness/buzz/internal/observer"
	"github.com/buzz-harness/buzz/internal/protocol"
)

// Catch-up that never stops short. A group subscription asks for up to groupHistoryLimit stored
// events per filter; after a long downtime a busy filter has more, and the relay sends only the
// newest. The live session says which filters filled their limit (Incoming.Older, with the
// EOSE); for each, a goroutine pages backwards through the relay's (created_at, id) cursor, a
// bounded page at a time, down to where the subscription asked from, and hands every page to
// the loop, which takes its events as if they had come live (the seen set and the journal drop
// what it already has).

// catchUpPage is how many events one history query asks for.
var catchUpPage = 500

// maxCatchUpPages bounds one filter's paging (catchUpPage × this events).
const maxCatchUpPages = 1000

// A history query may take catchUpTimeout (a relay busy with the same catch-up from many
// harnesses is slow, not gone); a failed one is tried again after a backoff up to catchUpRetryCap,
// for as long as the run lasts: giving up would leave the older mentions unanswered.
const (
	catchUpTimeout  = 30 * time.Second
	catchUpRetryCap = 30 * time.Second
)

// catchUp is where the pagers hand their pages to the loop.
type catchUp struct {
	pages chan []nostr.Event
}

func newCatchUp() catchUp { return catchUp{pages: make(chan []nostr.Event, 4)} }

// pageOlder starts paging back through the history each of filters left out.
func (h *Harness) pageOlder(ctx context.Context, sub string, filters []client.Filter) {
	h.log.Info("subscription history filled its limit; paging back for older events", "sub", sub, "filters", len(filters))
	h.tasks.Go(func() {
		for _, f := range filters {
			h.pageBack(ctx, f)
		}
	})
}

// pageBack queries f page by page, newest first, until a page comes back short.
func (h *Harness) pageBack(ctx context.Context, f client.Filter) {
	f.Limit = catchUpPage
	for n := 0; n < maxCatchUpPages; n++ {
		evs, err := h.historyPage(ctx, f)
		if err != nil {
			return // the run is over
		}
		if checked := verified(evs); len(checked) > 0 {
			select {
			case h.catchUp.pages <- checked:
			case <-ctx.Done():
				return
			}
		}
		if len(evs) < catchUpPage {
			return
		}
		last := evs[len(evs)-1]
		until := last.CreatedAt
		f.Until, f.BeforeID = &until, last.ID
	}
	h.log.Warn("catch-up stopped at its page bound", "pages", maxCatchUpPages)
}

// historyPage runs one history query, trying again with backoff until it works or ctx ends.
func (h *Harness) historyPage(ctx context.Context, f client.Filter) ([]nostr.Event, error) {
	for wait := time.Second; ; wait = min(2*wait, catchUpRetryCap) {
		qctx, cancel := context.WithTimeout(ctx, catchUpTimeout)
		evs, err := h.relay.bridge.Query(qctx, f)
		cancel()
		if err == nil || ctx.Err() != nil {
			return evs, err
		}
		h.log.Warn("catch-up query failed; trying again", "err", err, "in", wait)
		select {
		case <-clock.After(h.clock, wait):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// verified keeps the events whose id and signature check (the live session checks its own; the
// bridge does not), off the loop.
func verified(evs []nostr.Event) []nostr.Event {
	out := evs[:0]
	for i := range evs {
		if protocol.CheckEvent(&evs[i]) == nil {
			out = append(out, evs[i])
		}
	}
	return out
}

// takePage handles a page of older events on the loop, oldest first.
func (h *Harness) takePage(ctx context.Context, evs []nostr.Event) {
	now := h.clock.Now()
	for i := len(evs) - 1; i >= 0; i-- {
		ev := &evs[i]
		chID, _ := protocol.ChannelID(ev.Tags)
		h.bus.Publish(observer.Scope{ChannelID: chID}, observer.EventReceived{EventID: ev.ID, ReceivedAt: now})
		h.handleEvent(ctx, ev, false)
	}
}
