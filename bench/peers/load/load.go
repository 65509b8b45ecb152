// Package load drives a Nostr relay over real WebSockets for the peer benchmark: pipelined
// ingest (events/s until every OK is back) and closed-loop fan-out latency to many
// subscribers. All events are signed and encoded up front (Prepare), so neither signing nor
// JSON encoding of what is sent is timed.
package load

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/nbd-wtf/go-nostr"
)

// Target is one relay under test.
type Target struct {
	URL string // ws://host:port
	// SubURL, when set, is where FanOut's subscribers connect (another node of the same relay);
	// publishers always use URL.
	SubURL string
	// Auth: the relay sends a NIP-42 challenge on connect and wants AUTH before EVENT/REQ.
	// Dial then waits for the challenge and answers it before returning.
	Auth bool
}

// Key is a keypair.
type Key struct{ SK, PK string }

// NewKey generates a random keypair.
func NewKey() Key {
	sk := nostr.GeneratePrivateKey()
	pk, _ := nostr.GetPublicKey(sk)
	return Key{sk, pk}
}

// Frame is one message received from the relay.
type Frame struct {
	Conn  int       // index given to Dial
	At    time.Time // when the read returned, before decoding
	Label string
	Body  []json.RawMessage
}

// Conn is a raw client connection; a reader goroutine decodes frames as they arrive.
type Conn struct {
	ws     *websocket.Conn
	ctx    context.Context
	cancel context.CancelFunc
	frames chan Frame // everything that is not routed to the event sink
}

// Dial connects as key; with t.Auth it completes NIP-42 first. EVENT frames go to events when
// it is non-nil (so many subscribers can share one channel), else to the connection's own queue.
func Dial(ctx context.Context, t Target, key Key, index int, events chan<- Frame) (*Conn, error) {
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(dctx, t.URL, nil)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", t.URL, err)
	}
	ws.SetReadLimit(4 << 20)
	cctx, ccancel := context.WithCancel(ctx)
	c := &Conn{ws: ws, ctx: cctx, cancel: ccancel, frames: make(chan Frame, 8192)}
	go c.readLoop(index, events)
	if t.Auth {
		if err := c.auth(t.URL, key); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

func (c *Conn) readLoop(index int, events chan<- Frame) {
	defer close(c.frames)
	for {
		_, data, err := c.ws.Read(c.ctx)
		if err != nil {
			return
		}
		f := Frame{Conn: index, At: time.Now()}
		if json.Unmarshal(data, &f.Body) != nil || len(f.Body) == 0 || json.Unmarshal(f.Body[0], &f.Label) != nil {
			continue
		}
		var dst chan<- Frame = c.frames
		if f.Label == "EVENT" && events != nil {
			dst = events
		}
		select {
		case dst <- f:
		case <-c.ctx.Done():
			return
		}
	}
}

// Close drops the connection.
func (c *Conn) Close() {
	c.cancel()
	c.ws.CloseNow()
}

// Write sends one pre-encoded frame.
func (c *Conn) Write(b []byte) error {
	return c.ws.Write(c.ctx, websocket.MessageText, b)
}

// Next returns the next frame with the given label, skipping others, or an error after timeout.
func (c *Conn) Next(label string, timeout time.Duration) (Frame, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		select {
		case f, ok := <-c.frames:
			if !ok {
				return Frame{}, fmt.Errorf("connection closed while waiting for %s", label)
			}
			if f.Label == label {
				return f, nil
			}
		case <-deadline.C:
			return Frame{}, fmt.Errorf("no %s within %s", label, timeout)
		}
	}
}

func (c *Conn) auth(url string, key Key) error {
	f, err := c.Next("AUTH", 10*time.Second)
	if err != nil {
		return fmt.Errorf("waiting for the AUTH challenge: %w", err)
	}
	var challenge string
	if len(f.Body) < 2 || json.Unmarshal(f.Body[1], &challenge) != nil {
		return errors.New("AUTH frame without a challenge string")
	}
	ev := nostr.Event{Kind: nostr.KindClientAuthentication, CreatedAt: nostr.Now(),
		Tags: nostr.Tags{{"relay", url}, {"challenge", challenge}}}
	if err := ev.Sign(key.SK); err != nil {
		return err
	}
	b, _ := json.Marshal([]any{"AUTH", ev})
	if err := c.Write(b); err != nil {
		return err
	}
	ok, err := c.Next("OK", 10*time.Second)
	if err != nil {
		return fmt.Errorf("waiting for the AUTH answer: %w", err)
	}
	return okErr(ok)
}

// okErr turns a refused ["OK", id, false, reason] into an error.
func okErr(f Frame) error {
	var accepted bool
	if len(f.Body) < 3 || json.Unmarshal(f.Body[2], &accepted) != nil {
		return fmt.Errorf("malformed OK frame")
	}
	if !accepted {
		var reason string
		if len(f.Body) > 3 {
			json.Unmarshal(f.Body[3], &reason)
		}
		return fmt.Errorf("relay refused: %s", reason)
	}
	return nil
}

// Publisher is one sender with its pre-encoded EVENT frames.
type Publisher struct {
	Key    Key
	Frames [][]byte
}

// Workload is everything a run sends, signed once and reusable against any fresh relay.
type Workload struct {
	Channel     string // the h tag of every message (a Buzz channel id)
	Owner       Key    // creates the channel; publishes the fan-out events
	CreateFrame []byte // the owner's kind-9007 create-group for Channel
	Ingest1     []Publisher
	Ingest4     []Publisher
	FanOut      [][]byte // warm-up events first, then the measured ones
	FanOutIDs   []string // FanOut's event ids
	Warmup      int
	Subscribers []Key
}

// Options sizes a workload.
type Options struct {
	IngestEvents int // per ingest configuration, split across its publishers
	FanOutEvents int // measured fan-out events (a few warm-up events are added)
	Subscribers  int
}

// Prepare signs and encodes a workload, using all cores.
func Prepare(o Options) (*Workload, error) {
	w := &Workload{Channel: newUUID(), Owner: NewKey(), Warmup: 10}
	create := nostr.Event{Kind: 9007, CreatedAt: nostr.Now(), Tags: nostr.Tags{
		{"h", w.Channel}, {"name", "peers"}, {"visibility", "open"}, {"channel_type", "stream"}}}
	if err := create.Sign(w.Owner.SK); err != nil {
		return nil, err
	}
	w.CreateFrame, _ = json.Marshal([]any{"EVENT", create})
	mk := func(n int) []Publisher {
		ps := make([]Publisher, n)
		for i := range ps {
			ps[i] = Publisher{Key: NewKey(), Frames: make([][]byte, o.IngestEvents/n)}
		}
		return ps
	}
	w.Ingest1, w.Ingest4 = mk(1), mk(4)
	w.FanOut = make([][]byte, w.Warmup+o.FanOutEvents)
	w.Subscribers = make([]Key, o.Subscribers)
	for i := range w.Subscribers {
		w.Subscribers[i] = NewKey()
	}
	w.FanOutIDs = make([]string, len(w.FanOut))
	type job struct {
		dst  *[]byte
		id   *string // optional
		key  Key
		text string
	}
	var jobs []job
	for name, ps := range map[string][]Publisher{"ingest1": w.Ingest1, "ingest4": w.Ingest4} {
		for i := range ps {
			for j := range ps[i].Frames {
				jobs = append(jobs, job{&ps[i].Frames[j], nil, ps[i].Key, fmt.Sprintf("%s p%d #%d", name, i, j)})
			}
		}
	}
	for i := range w.FanOut {
		jobs = append(jobs, job{&w.FanOut[i], &w.FanOutIDs[i], w.Owner, fmt.Sprintf("fan-out #%d", i)})
	}
	var wg sync.WaitGroup
	next := make(chan job)
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range next {
				ev := nostr.Event{Kind: 9, CreatedAt: nostr.Now(), Content: j.text, Tags: nostr.Tags{{"h", w.Channel}}}
				if err := ev.Sign(j.key.SK); err != nil {
					select {
					case errs <- err:
					default:
					}
					continue
				}
				*j.dst, _ = json.Marshal([]any{"EVENT", ev})
				if j.id != nil {
					*j.id = ev.ID
				}
			}
		}()
	}
	for _, j := range jobs {
		next <- j
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		return nil, fmt.Errorf("sign: %w", err)
	default:
	}
	return w, nil
}

// Setup creates the workload's channel on a fresh relay (a relay without channels just stores
// the 9007 as an ordinary event).
func Setup(ctx context.Context, t Target, w *Workload) error {
	c, err := Dial(ctx, t, w.Owner, 0, nil)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.Write(w.CreateFrame); err != nil {
		return err
	}
	ok, err := c.Next("OK", 10*time.Second)
	if err != nil {
		return fmt.Errorf("create channel: %w", err)
	}
	if err := okErr(ok); err != nil {
		return fmt.Errorf("create channel: %w", err)
	}
	return nil
}

// Ingest connects every publisher, then sends all their frames concurrently with at most
// window unanswered per connection, and returns accepted events per second from the first
// write to the last OK. Any refusal is an error: a relay that drops events is not faster.
func Ingest(ctx context.Context, t Target, pubs []Publisher, window int) (float64, error) {
	conns := make([]*Conn, len(pubs))
	for i, p := range pubs {
		c, err := Dial(ctx, t, p.Key, i, nil)
		if err != nil {
			return 0, err
		}
		defer c.Close()
		conns[i] = c
	}
	total := 0
	for _, p := range pubs {
		total += len(p.Frames)
	}
	errs := make(chan error, len(pubs))
	start := time.Now()
	var wg sync.WaitGroup
	for i, p := range pubs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- publish(conns[i], p.Frames, window)
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	for err := range errs {
		if err != nil {
			return 0, err
		}
	}
	return float64(total) / elapsed.Seconds(), nil
}

func publish(c *Conn, frames [][]byte, window int) error {
	slots := make(chan struct{}, window)
	acks := make(chan error, 1)
	go func() {
		for range frames {
			f, err := c.Next("OK", 30*time.Second)
			if err == nil {
				err = okErr(f)
			}
			if err != nil {
				acks <- err
				return
			}
			<-slots
		}
		acks <- nil
	}()
	for _, b := range frames {
		select {
		case slots <- struct{}{}:
		case err := <-acks:
			return err
		}
		if err := c.Write(b); err != nil {
			return err
		}
	}
	return <-acks
}

// FanOutResult holds delivery latencies, publish write → subscriber read, over all
// subscribers and measured events.
type FanOutResult struct {
	P50, P99 time.Duration
	Samples  int
}

// FanOut opens one subscription per subscriber (REQ for kind 9 in the channel, no stored
// events), then publishes the events one at a time as the owner: closed loop, the next event
// goes out once every subscriber has the previous one and the OK is back, so each sample is
// delivery latency rather than queueing behind earlier events.
func FanOut(ctx context.Context, t Target, w *Workload) (FanOutResult, error) {
	events := make(chan Frame, 4*len(w.Subscribers))
	req, _ := json.Marshal([]any{"REQ", "live", map[string]any{"kinds": []int{9}, "#h": []string{w.Channel}, "limit": 0}})
	sub := t
	if t.SubURL != "" {
		sub.URL = t.SubURL
	}
	for i, k := range w.Subscribers {
		c, err := Dial(ctx, sub, k, i, events)
		if err != nil {
			return FanOutResult{}, fmt.Errorf("subscriber %d: %w", i, err)
		}
		defer c.Close()
		if err := c.Write(req); err != nil {
			return FanOutResult{}, err
		}
		if _, err := c.Next("EOSE", 10*time.Second); err != nil {
			return FanOutResult{}, fmt.Errorf("subscriber %d: %w", i, err)
		}
	}
	pub, err := Dial(ctx, t, w.Owner, -1, nil)
	if err != nil {
		return FanOutResult{}, err
	}
	defer pub.Close()
	lat := make([]time.Duration, 0, (len(w.FanOut)-w.Warmup)*len(w.Subscribers))
	for n, b := range w.FanOut {
		sent := time.Now()
		if err := pub.Write(b); err != nil {
			return FanOutResult{}, err
		}
		timeout := time.NewTimer(10 * time.Second)
		for got := 0; got < len(w.Subscribers); {
			select {
			case f := <-events:
				// Closed loop: anything but the event just sent means the relay misdelivered —
				// except during warm-up, when a second node may still be passing on the ingest
				// phase's events (its subscribers joined after they were stored on the first).
				if len(f.Body) < 3 || !bytes.Contains(f.Body[2], []byte(w.FanOutIDs[n])) {
					if n < w.Warmup && t.SubURL != "" {
						continue
					}
					return FanOutResult{}, fmt.Errorf("fan-out event %d: subscriber %d got a different event", n, f.Conn)
				}
				got++
				if n >= w.Warmup {
					lat = append(lat, f.At.Sub(sent))
				}
			case <-timeout.C:
				return FanOutResult{}, fmt.Errorf("fan-out event %d: not every subscriber had it within 10s", n)
			}
		}
		timeout.Stop()
		ok, err := pub.Next("OK", 10*time.Second)
		if err == nil {
			err = okErr(ok)
		}
		if err != nil {
			return FanOutResult{}, fmt.Errorf("fan-out event %d: %w", n, err)
		}
	}
	slices.Sort(lat)
	pct := func(p float64) time.Duration { return lat[int(p*float64(len(lat)-1))] }
	return FanOutResult{P50: pct(0.50), P99: pct(0.99), Samples: len(lat)}, nil
}

func newUUID() string {
	sk := nostr.GeneratePrivateKey() // 64 random hex digits; shaped as a version-4 UUID
	return fmt.Sprintf("%s-%s-4%s-a%s-%s", sk[0:8], sk[8:12], sk[13:16], sk[17:20], sk[20:32])
}
