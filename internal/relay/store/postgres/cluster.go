package postgres

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/relay/store"
)

// Several relay nodes share one database. Every write transaction NOTIFYs what it changed
// (delivered to listeners only when it commits, in the order sent): a stored event by its seq,
// a channel by its id. Each node LISTENs on a connection of its own (Follow) and hands other
// nodes' changes to its relay, which fans events out to its own sockets and reloads channels.

// Notice kinds, the first field of a payload "<kind> <node> <rest>".
const (
	noticeEvent     = "e" // rest: seqs of stored events, comma-separated (one transaction's)
	noticeSaved     = "s" // rest: lines "<seq> <channel id or -> <event JSON>" of stored events
	noticeChannel   = "c" // rest: channel id whose row or members changed
	noticeEphemeral = "x" // rest: "<channel id or -> <event JSON>"
)

// maxNotifyBytes is under PostgreSQL's 8000-byte NOTIFY payload limit.
const maxNotifyBytes = 7900

// ErrTooLarge is Publish's answer for an ephemeral event too large to pass between nodes.
var ErrTooLarge = errors.New("postgres: event too large to pass to other nodes")

func newNodeID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func (t *pgTx) notify(kind, rest string) error {
	_, err := t.tx.Exec(t.ctx, `SELECT pg_notify($1, $2)`, t.s.topic, kind+" "+t.s.node+" "+rest)
	return err
}

// savedEvent is an event a transaction stored, by its seq.
type savedEvent struct {
	seq     int64
	ev      *nostr.Event
	channel string
}

// announce notifies the events the transaction saved, in as few notices as fit rather than one
// (and one round trip) per event: the events themselves (noticeSaved), so the other nodes fan
// them out without reading them back, and their seqs (noticeEvent), which a node that does not
// know noticeSaved (an older one, mid-upgrade) loads them by. A node that took an event from the
// first has its seq and skips it in the second. An event too large for a notice goes by seq
// only. All the notices go in one statement.
func (t *pgTx) announce() error {
	var notices []string
	pack := func(kind string, sep byte, items []string) {
		prefix := kind + " " + t.s.node + " "
		var b []byte
		for _, it := range items {
			if len(b) > 0 && len(prefix)+len(b)+1+len(it) > maxNotifyBytes {
				notices, b = append(notices, prefix+string(b)), b[:0]
			}
			if len(b) > 0 {
				b = append(b, sep)
			}
			b = append(b, it...)
		}
		if len(b) > 0 {
			notices = append(notices, prefix+string(b))
		}
	}
	inlineRoom := maxNotifyBytes - len(noticeSaved+" "+t.s.node+" ")
	var saved, seqs []string
	for _, e := range t.stored {
		seq := strconv.FormatInt(e.seq, 10)
		seqs = append(seqs, seq)
		body, err := json.Marshal(e.ev)
		if err != nil {
			continue
		}
		ch := cmp.Or(text(e.channel), "-")
		if line := seq + " " + ch + " " + string(body); len(line) <= inlineRoom {
			saved = append(saved, line)
		}
	}
	pack(noticeSaved, '\n', saved) // JSON holds no raw newline
	pack(noticeEvent, ',', seqs)
	if len(notices) == 0 {
		return nil
	}
	q, args := `SELECT`, []any{t.s.topic}
	for i, n := range notices {
		if i > 0 {
			q += ","
		}
		q += fmt.Sprintf(" pg_notify($1, $%d)", i+2)
		args = append(args, n)
	}
	_, err := t.tx.Exec(t.ctx, q, args...)
	return err
}

// Publish passes an ephemeral (never stored) event to the other nodes.
func (s *Store) Publish(ctx context.Context, ev *nostr.Event, channelID string) error {
	body, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	if channelID == "" {
		channelID = "-"
	}
	payload := noticeEphemeral + " " + s.node + " " + text(channelID) + " " + string(body)
	if len(payload) > maxNotifyBytes {
		return ErrTooLarge
	}
	_, err = s.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, s.topic, payload)
	return s.wrap(err)
}

// Live reports whether Follow's connection is up: while it is down this node misses other
// nodes' changes, so the relay refuses writes (they could act on stale channel state).
func (s *Store) Live() bool { return s.live.Load() }

// LockChannel takes the cluster-wide lock of one channel's admin actions (check, then write),
// held until the returned func runs. It holds a pooled connection meanwhile, so callers must
// take at most one at a time per node.
func (s *Store) LockChannel(ctx context.Context, id string) (func(), error) {
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, s.wrap(err)
	}
	key := s.topic + ":channel:" + text(id)
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(hashtextextended($1, 0))`, key); err != nil {
		conn.Release()
		return nil, s.wrap(err)
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := conn.Exec(ctx, `SELECT pg_advisory_unlock(hashtextextended($1, 0))`, key); err != nil {
			// A session lock goes with its session: closing the connection releases it.
			conn.Conn().Close(ctx)
		}
		conn.Release()
	}, nil
}

// Channel loads one channel with its members; ok is false when it does not exist.
func (s *Store) Channel(ctx context.Context, id string) (c store.Channel, ok bool, err error) {
	if s.closed.Load() {
		return c, false, store.ErrClosed
	}
	err = s.pool.QueryRow(ctx, `SELECT id, name, about, visibility, channel_type, topic, purpose, archived, ttl,
		created_by, created_at, deleted_at IS NOT NULL FROM channels WHERE id = $1`, text(id)).Scan(
		&c.ID, &c.Name, &c.About, &c.Visibility, &c.Type, &c.Topic, &c.Purpose, &c.Archived, &c.TTL,
		&c.CreatedBy, &c.CreatedAt, &c.Deleted)
	if errors.Is(err, pgx.ErrNoRows) {
		return c, false, nil
	}
	if err != nil {
		return c, false, s.wrap(err)
	}
	c.Members = map[string]string{}
	rows, err := s.pool.Query(ctx, `SELECT pubkey, role FROM members WHERE channel_id = $1`, text(id))
	if err != nil {
		return c, false, s.wrap(err)
	}
	defer rows.Close()
	for rows.Next() {
		var pk, role string
		if err := rows.Scan(&pk, &role); err != nil {
			return c, false, err
		}
		c.Members[pk] = role
	}
	return c, true, s.wrap(rows.Err())
}

// Peer is what Follow hands other nodes' changes to. Calls come from one goroutine, in commit
// order.
type Peer struct {
	// Stored is an event another node stored (channelID "" when global).
	Stored func(ev *nostr.Event, channelID string)
	// Ephemeral is an event another node accepted without storing.
	Ephemeral func(ev *nostr.Event, channelID string)
	// ChannelChanged names a channel whose row or members another node changed.
	ChannelChanged func(id string)
	// Resync runs after the connection came back: changes may have been missed, so every
	// channel should be reloaded. Stored then receives the events missed meanwhile.
	Resync func()
	// Up runs each time the feed is (again) connected and caught up.
	Up  func()
	Log *slog.Logger
	// Retry is the pause before reconnecting; 0 = one second.
	Retry time.Duration
}

// recentSeqs remembers the seqs already handed on, so catch-up (which looks back a little:
// seqs are assigned at insert, and a lower one may commit after a higher one) hands none twice.
type recentSeqs struct {
	set  map[int64]struct{}
	ring []int64
	next int
}

const (
	recentKeep    = 4096
	catchUpMargin = 1024
	catchUpBatch  = 500
)

func (r *recentSeqs) add(seq int64) bool {
	if _, ok := r.set[seq]; ok {
		return false
	}
	if len(r.ring) < recentKeep {
		r.ring = append(r.ring, seq)
	} else {
		delete(r.set, r.ring[r.next])
		r.ring[r.next] = seq
		r.next = (r.next + 1) % recentKeep
	}
	r.set[seq] = struct{}{}
	return true
}

// Follow listens for other nodes' changes until ctx ends, reconnecting when the connection is
// lost and then catching up from the database (events with a seq above the last one seen),
// not from notifications, which are gone with the connection.
func (s *Store) Follow(ctx context.Context, p Peer) {
	log := p.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	retry := p.Retry
	if retry == 0 {
		retry = time.Second
	}
	seen := &recentSeqs{set: map[int64]struct{}{}}
	last := int64(-1)
	for ctx.Err() == nil {
		err := s.follow(ctx, p, seen, &last)
		s.live.Store(false)
		if ctx.Err() != nil || s.closed.Load() {
			return
		}
		log.Warn("postgres: lost the change feed; reconnecting", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(retry):
		}
	}
}

func (s *Store) follow(ctx context.Context, p Peer, seen *recentSeqs, last *int64) error {
	cfg := s.pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = "buzz-relay-follow-" + s.node
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `LISTEN `+pgx.Identifier{s.topic}.Sanitize()); err != nil {
		return err
	}
	// Listening before reading: whatever commits from here on is either read now or notified.
	if *last < 0 {
		if err := conn.QueryRow(ctx, `SELECT COALESCE(MAX(seq), 0) FROM events`).Scan(last); err != nil {
			return err
		}
	} else {
		if p.Resync != nil {
			p.Resync()
		}
		if err := s.catchUp(ctx, conn, p, seen, last); err != nil {
			return err
		}
	}
	s.live.Store(true)
	if p.Up != nil {
		p.Up()
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		kind, rest, _ := strings.Cut(n.Payload, " ")
		node, rest, _ := strings.Cut(rest, " ")
		switch kind {
		case noticeSaved:
			for _, line := range strings.Split(rest, "\n") {
				f, body, _ := strings.Cut(line, " ")
				ch, body, _ := strings.Cut(body, " ")
				seq, err := strconv.ParseInt(f, 10, 64)
				var ev nostr.Event
				// Marked seen only once taken: otherwise the seq notice that follows loads it.
				if err != nil || node == s.node || p.Stored == nil || json.Unmarshal([]byte(body), &ev) != nil || !seen.add(seq) {
					continue
				}
				*last = max(*last, seq)
				if ch == "-" {
					ch = ""
				}
				p.Stored(&ev, ch)
			}
		case noticeEvent:
			var fresh []int64
			for _, f := range strings.Split(rest, ",") {
				if seq, err := strconv.ParseInt(f, 10, 64); err == nil && seen.add(seq) {
					*last = max(*last, seq)
					fresh = append(fresh, seq)
				}
			}
			if node == s.node || p.Stored == nil || len(fresh) == 0 {
				continue
			}
			if err := loadSeqs(ctx, conn, fresh, p.Stored); err != nil {
				return err
			}
		case noticeChannel:
			if node != s.node && p.ChannelChanged != nil {
				p.ChannelChanged(rest)
			}
		case noticeEphemeral:
			ch, body, _ := strings.Cut(rest, " ")
			var ev nostr.Event
			if node == s.node || p.Ephemeral == nil || json.Unmarshal([]byte(body), &ev) != nil {
				continue
			}
			if ch == "-" {
				ch = ""
			}
			p.Ephemeral(&ev, ch)
		}
	}
}

const eventCols = `e.id, e.pubkey, e.created_at, e.kind, e.tags, e.content, e.content_raw, e.sig, e.channel_id`

// loadSeqs hands the events stored as seqs to stored, in seq order; one replaced or deleted
// since is skipped: there is nothing to fan out.
func loadSeqs(ctx context.Context, conn *pgx.Conn, seqs []int64, stored func(*nostr.Event, string)) error {
	rows, err := conn.Query(ctx, `SELECT `+eventCols+` FROM events e WHERE e.seq = ANY($1) AND e.deleted_at IS NULL ORDER BY e.seq`, seqs)
	if err != nil {
		return err
	}
	var evs []nostr.Event
	var chans []string
	for rows.Next() {
		var ch string
		ev, err := scanEvent(rows, &ch)
		if err != nil {
			rows.Close()
			return err
		}
		evs, chans = append(evs, ev), append(chans, ch)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for i := range evs {
		stored(&evs[i], chans[i])
	}
	return nil
}

// catchUp hands on other nodes' events stored since last, looking back catchUpMargin seqs
// for transactions that committed out of seq order.
func (s *Store) catchUp(ctx context.Context, conn *pgx.Conn, p Peer, seen *recentSeqs, last *int64) error {
	from := max(*last-catchUpMargin, 0)
	for {
		rows, err := conn.Query(ctx, `SELECT e.seq, COALESCE(e.origin, ''), `+eventCols+` FROM events e
			WHERE e.seq > $1 AND e.deleted_at IS NULL ORDER BY e.seq LIMIT `+strconv.Itoa(catchUpBatch), from)
		if err != nil {
			return err
		}
		type found struct {
			ev     nostr.Event
			ch     string
			seq    int64
			origin string
		}
		var batch []found
		for rows.Next() {
			var f found
			var tags string
			var raw, ch *string
			var ca int64
			if err := rows.Scan(&f.seq, &f.origin, &f.ev.ID, &f.ev.PubKey, &ca, &f.ev.Kind, &tags, &f.ev.Content, &raw, &f.ev.Sig, &ch); err != nil {
				rows.Close()
				return err
			}
			f.ev.CreatedAt = nostr.Timestamp(ca)
			if err := json.Unmarshal([]byte(tags), &f.ev.Tags); err != nil {
				rows.Close()
				return fmt.Errorf("event %s: bad stored tags: %w", f.ev.ID, err)
			}
			if raw != nil {
				json.Unmarshal([]byte(*raw), &f.ev.Content)
			}
			if ch != nil {
				f.ch = *ch
			}
			batch = append(batch, f)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, f := range batch {
			from = f.seq
			*last = max(*last, f.seq)
			if seen.add(f.seq) && f.origin != s.node && p.Stored != nil {
				p.Stored(&f.ev, f.ch)
			}
		}
		if len(batch) < catchUpBatch {
			return nil
		}
	}
}

// Node is this Store's name in change notices (and, prefixed, its feed connection's
// application_name).
func (s *Store) Node() string { return s.node }
