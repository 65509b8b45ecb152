package store

import (
	"context"
	"sync"
)

// WriteQueue is a store's group commit: callers queue writes and go on (UpdateAsync), and one
// goroutine hands whatever requests are waiting, up to MaxBatch at once, to the store's commit,
// which runs them as one transaction: on SQLite and PostgreSQL alike the commit is the dominant
// cost of a small write. Requests queued one after another by one goroutine reach commit in that
// order.
type WriteQueue struct {
	writes chan *WriteReq // buffered: Send returns once its request is in
	quit   chan struct{}
	end    chan struct{}
	// mu makes Close wait for requests being queued, so none lands in the buffer after the
	// writer has answered what was left there.
	mu     sync.RWMutex
	closed bool
}

// WriteReq is one queued write; commit answers it on Done (buffered, once).
type WriteReq struct {
	Ctx  context.Context
	Fn   func(Tx) error
	Done chan error
}

// MaxBatch bounds the requests one commit gets.
const MaxBatch = 128

// NewWriteQueue starts the writer goroutine; after each batch it calls commit, then after (nil:
// nothing) on the same goroutine.
func NewWriteQueue(commit func([]*WriteReq), after func()) *WriteQueue {
	q := &WriteQueue{writes: make(chan *WriteReq, MaxBatch), quit: make(chan struct{}), end: make(chan struct{})}
	go q.run(commit, after)
	return q
}

// Send queues fn and returns at once; the channel gives its result (ErrClosed after Close).
func (q *WriteQueue) Send(ctx context.Context, fn func(Tx) error) <-chan error {
	req := &WriteReq{Ctx: ctx, Fn: fn, Done: make(chan error, 1)}
	q.mu.RLock()
	defer q.mu.RUnlock()
	if q.closed {
		req.Done <- ErrClosed
		return req.Done
	}
	select {
	case q.writes <- req: // the writer runs until Close, so a full buffer drains
	case <-ctx.Done():
		req.Done <- ctx.Err()
	}
	return req.Done
}

// Closed reports whether Close has been called.
func (q *WriteQueue) Closed() bool {
	q.mu.RLock()
	defer q.mu.RUnlock()
	return q.closed
}

// Close stops new writes, answers the queued ones with ErrClosed once the batch being committed
// is done, and waits for the writer to end. Call it once.
func (q *WriteQueue) Close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	close(q.quit)
	<-q.end
}

func (q *WriteQueue) run(commit func([]*WriteReq), after func()) {
	defer close(q.end)
	for {
		var first *WriteReq
		select {
		case first = <-q.writes:
		case <-q.quit:
			for { // Close has stopped new writes; answer the ones still queued
				select {
				case r := <-q.writes:
					r.Done <- ErrClosed
				default:
					return
				}
			}
		}
		batch := []*WriteReq{first}
	drain:
		for len(batch) < MaxBatch {
			select {
			case r := <-q.writes:
				batch = append(batch, r)
			default:
				break drain
			}
		}
		commit(batch)
		if after != nil {
			after()
		}
	}
}
