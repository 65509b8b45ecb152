package relay

import (
	"context"
	"sync"

	"github.com/buzz-harness/buzz/internal/relay/store"
)

// writeWindow is how many of one connection's events may wait for their commit at once. While
// they wait the connection goes on reading, so a publisher's events reach the store's writer
// together and commit in one batch, instead of one commit per round trip.
const writeWindow = 64

// asyncUpdater is a store that can queue a write and answer later, keeping the queue order
// (both stores: each batches what is queued into one commit). A store without it (a test's
// wrapper) runs each write on its own goroutine.
type asyncUpdater interface {
	UpdateAsync(ctx context.Context, fn func(store.Tx) error) <-chan error
}

func (r *Relay) updateAsync(ctx context.Context, fn func(store.Tx) error) <-chan error {
	if a, ok := r.st.(asyncUpdater); ok {
		return a.UpdateAsync(ctx, fn)
	}
	done := make(chan error, 1)
	go func() { done <- r.st.Update(ctx, fn) }()
	return done
}

// okQueue answers a connection's pipelined events with OKs in the order they arrived, each once
// its write has committed (and the event has fanned out).
type okQueue struct {
	c        *conn
	pending  chan pendingOK
	inFlight sync.WaitGroup
	stopped  chan struct{}
}

// pendingOK is one event's answer: res, or once done gives the store's verdict, w's outcome.
type pendingOK struct {
	id   string
	res  result
	w    *storeWrite
	done <-chan error
}

func newOKQueue(c *conn) *okQueue {
	q := &okQueue{c: c, pending: make(chan pendingOK, writeWindow), stopped: make(chan struct{})}
	go q.run()
	return q
}

func (q *okQueue) run() {
	defer close(q.stopped)
	for p := range q.pending {
		res := p.res
		if p.w != nil {
			res = q.c.r.finishWrite(p.w, <-p.done)
		}
		q.c.send([]any{"OK", p.id, res.OK, res.Msg})
		q.inFlight.Done()
	}
}

// submit checks a pipelined event and queues its write without waiting for the commit; it waits
// only when writeWindow events are already waiting.
func (q *okQueue) submit(j *job) {
	ev := j.f.Event
	res, w := q.c.r.check(q.c.ctx, newIngest(ev, j.checkErr, fromWebSocket(q.c.pubkey())))
	p := pendingOK{id: ev.ID, res: res, w: w}
	if w != nil {
		p.done = q.c.r.updateAsync(q.c.ctx, w.fn)
	}
	q.inFlight.Add(1)
	q.pending <- p
}

// drain waits until every queued event is answered: a frame that is not pipelined (a REQ must
// see the events before it; an admin event changes the rules later events are checked by) runs
// only after it.
func (q *okQueue) drain() { q.inFlight.Wait() }

// close answers what is queued and stops.
func (q *okQueue) close() {
	close(q.pending)
	<-q.stopped
}
