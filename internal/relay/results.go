package relay

import (
	"context"
	"encoding/json"
	"sync/atomic"

	"github.com/nbd-wtf/go-nostr"
	"golang.org/x/sync/semaphore"

	"github.com/buzz-harness/buzz/internal/relay/store"
)

// Stored results in flight are bounded relay-wide: every REQ's history is read page by page
// (resultPageBytes of content and tag values at most, store.Filter.MaxBytes), each page's
// frames hold their bytes of the relay's result budget until they are written to the socket,
// and a connection reads its next page only once at most one page of it waits to be written.
// A client that asks for much and never reads holds two pages, and however many do so the
// relay holds at most MaxResultBytes of results: the rest wait for budget (up to the query
// deadline).
const (
	DefaultMaxResultBytes = 64 << 20
	resultPageBytes       = 512 << 10
	// pageTicket is what a page may take before it is read: the page, one event past it and
	// its frames' envelopes (ids, signatures). Escapes that grow frames past it take more.
	pageTicket = resultPageBytes + MaxFrameBytes + 64<<10
)

// resultBudget is the relay-wide byte budget of stored results in flight.
type resultBudget struct {
	sem  *semaphore.Weighted
	held atomic.Int64 // bytes taken now (tests, metrics)
	peak atomic.Int64
}

func newResultBudget(n int64) *resultBudget { return &resultBudget{sem: semaphore.NewWeighted(n)} }

// take waits for n bytes of budget until ctx ends.
func (b *resultBudget) take(ctx context.Context, n int64) error {
	if n <= 0 {
		return nil
	}
	if err := b.sem.Acquire(ctx, n); err != nil {
		return errBusy
	}
	now := b.held.Add(n)
	for p := b.peak.Load(); now > p && !b.peak.CompareAndSwap(p, now); p = b.peak.Load() {
	}
	return nil
}

func (b *resultBudget) give(n int64) {
	if n > 0 {
		b.held.Add(-n)
		b.sem.Release(n)
	}
}

// wrote gives back a written (or dropped) frame's share of the result budget.
func (c *conn) wrote(m outMsg) {
	if m.budget > 0 {
		c.history.Add(-m.budget)
		c.r.results.give(m.budget)
	}
}

// dropQueued gives back the budget of frames left unwritten when the connection ended, and
// settles the live events it will not deliver.
func (c *conn) dropQueued() {
	for {
		select {
		case le := <-c.fanout:
			c.live.Add(-le.size())
			le.settle(false)
		case m := <-c.out:
			c.wrote(m)
		default:
			return
		}
	}
}

// waitHistoryWritten waits until at most one page of this connection's history is queued, so
// the next page is read while the last one is written, and no more.
func (c *conn) waitHistoryWritten() error {
	for c.history.Load() > pageTicket {
		select {
		case <-c.drained:
		case <-c.ctx.Done():
			return c.ctx.Err()
		}
	}
	return nil
}

// sendHistory queues the stored events of filters (each event once), a page at a time within
// the result budget. Read slots are held only while a page is read: a client slow to take its
// history holds none meanwhile.
func (c *conn) sendHistory(pk string, subJSON []byte, filters []store.Filter) error {
	seen := map[string]bool{}
	for _, flt := range filters {
		limit := effectiveLimit(flt)
		page := flt
		page.MaxBytes = resultPageBytes
		for limit > 0 {
			if err := c.waitHistoryWritten(); err != nil {
				return err
			}
			evs, frames, budget, err := c.readPage(pk, subJSON, page, limit, seen)
			if err != nil {
				return err
			}
			for i, fr := range frames {
				share := int64(len(fr))
				if i == len(frames)-1 {
					share = budget // the last frame carries what is left of the page's budget
				}
				budget -= share
				c.sendBacklog(fr, share)
			}
			size := 0
			for i := range evs {
				size += store.EventBytes(&evs[i])
			}
			limit -= len(evs)
			if len(evs) == 0 || !page.Full(size) {
				break // a page the byte cap did not end is the last
			}
			last := evs[len(evs)-1]
			page.Until, page.BeforeID = &last.CreatedAt, last.ID
		}
	}
	return nil
}

// readPage reads one page under the read limits and the result budget, and frames the events
// not seen yet. budget is the page's share of the result budget, at least the frames' bytes.
func (c *conn) readPage(pk string, subJSON []byte, page store.Filter, limit int, seen map[string]bool) ([]nostr.Event, [][]byte, int64, error) {
	qctx, done, err := c.r.startRead(c.ctx, pk, []store.Filter{page})
	if err != nil {
		return nil, nil, 0, err
	}
	defer done()
	if err := c.r.results.take(qctx, pageTicket); err != nil {
		return nil, nil, 0, err
	}
	evs, err := c.r.st.Query(qctx, c.r.acl.access(pk), page, limit)
	if err != nil {
		c.r.results.give(pageTicket)
		return nil, nil, 0, err
	}
	var frames [][]byte
	var total int64
	for i := range evs {
		if seen[evs[i].ID] {
			continue
		}
		seen[evs[i].ID] = true
		evJSON, _ := json.Marshal(&evs[i])
		fr := eventFrameRaw(subJSON, evJSON)
		frames = append(frames, fr)
		total += int64(len(fr))
	}
	budget := int64(pageTicket)
	switch {
	case total < budget:
		c.r.results.give(budget - total)
		budget = total
	case total > budget: // escapes grew the frames past the ticket
		if err := c.r.results.take(qctx, total-budget); err != nil {
			c.r.results.give(budget)
			return nil, nil, 0, err
		}
		budget = total
	}
	return evs, frames, budget, nil
}
