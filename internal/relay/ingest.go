package relay

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/relay/store"
)

// result is the pipeline's answer: an OK over WS, a JSON body over HTTP.
type result struct {
	OK     bool
	Msg    string
	Status int // HTTP status for the bridge
}

func accepted(msg string) result { return result{OK: true, Msg: msg, Status: http.StatusOK} }
func rejected(status int, msg string) result {
	return result{OK: false, Msg: msg, Status: status}
}

// route is the way an event reached the relay.
type route uint8

const (
	viaWebSocket route = iota // an EVENT frame
	viaBridge                 // POST /events
)

// origin is where an event came from: the route, and the pubkey that connection (NIP-42) or
// request (NIP-98) proved; "" when none was proved (a socket before AUTH).
type origin struct {
	via    route
	pubkey string
}

func fromWebSocket(pubkey string) origin { return origin{via: viaWebSocket, pubkey: pubkey} }
func fromBridge(pubkey string) origin    { return origin{via: viaBridge, pubkey: pubkey} }

// ingest is one client event on its way through ingestRules, with what several rules read.
type ingest struct {
	ev      *nostr.Event
	sigErr  error // the id/signature check's result
	from    origin
	channel string    // the channel its h tag names ("" = none)
	scope   string    // the channel it is stored and access-checked under (storageChannel)
	start   time.Time // when it reached the rules (buzz_event_processing_seconds)
}

func newIngest(ev *nostr.Event, sigErr error, from origin) *ingest {
	ch, _ := protocol.ChannelID(ev.Tags)
	return &ingest{ev: ev, sigErr: sigErr, from: from, channel: ch, scope: storageChannel(ev), start: time.Now()}
}

// storageChannel is the channel an event is stored (and access-checked) under; "" = global.
// 39000-series are scoped by their d tag; membership notices are global so #p subs get them.
func storageChannel(ev *nostr.Event) string {
	switch {
	case ev.Kind >= protocol.KindGroupMetadata && ev.Kind <= protocol.KindGroupMembers:
		if d := protocol.TagValue(ev.Tags, "d"); protocol.IsUUID(d) {
			return d
		}
		return ""
	case ev.Kind == protocol.KindMemberAdded || ev.Kind == protocol.KindMemberRemoved,
		protocol.IsReplaceable(ev.Kind):
		return ""
	}
	id, _ := protocol.ChannelID(ev.Tags)
	return id
}

// submit runs one client event through the rules, storage and fan-out.
func (r *Relay) submit(ctx context.Context, ev *nostr.Event, from origin) result {
	return r.submitChecked(ctx, ev, protocol.CheckEvent(ev), from)
}

// submitChecked is submit with the id/signature check already done (sigErr is its result).
func (r *Relay) submitChecked(ctx context.Context, ev *nostr.Event, sigErr error, from origin) result {
	res, w := r.check(ctx, newIngest(ev, sigErr, from))
	if w == nil {
		return res
	}
	return r.finishWrite(w, r.st.Update(ctx, w.fn))
}

// check runs the event through ingestRules. It returns the answer, or for an event to store,
// the write to run (res is then unset); admin and ephemeral events are applied by their rules.
func (r *Relay) check(ctx context.Context, in *ingest) (result, *storeWrite) {
	r.metrics.received.Inc()
	for _, rule := range ingestRules {
		if res := rule(ctx, r, in); res != nil {
			r.metrics.answered(in, *res)
			return *res, nil
		}
	}
	return result{}, storeEvent(in)
}

// storeWrite is a checked event's store write, not yet run.
type storeWrite struct {
	in    *ingest
	ev    *nostr.Event
	scope string
	fn    func(store.Tx) error
}

// storeEvent is the write of an event that passed every rule: the event, and for a NIP-09
// deletion, the soft delete of the author's own events it names.
func storeEvent(in *ingest) *storeWrite {
	ev, scope := in.ev, in.scope
	return &storeWrite{in: in, ev: ev, scope: scope, fn: func(tx store.Tx) error {
		if err := tx.SaveEvent(ev, scope); err != nil {
			return err
		}
		if ev.Kind != protocol.KindDeletion {
			return nil
		}
		var ids []string
		for t := range ev.Tags.FindAll("e") {
			if protocol.IsHex64(t[1]) {
				ids = append(ids, t[1])
			}
		}
		_, err := tx.SoftDelete(ids, ev.PubKey, int64(ev.CreatedAt))
		return err
	}}
}

// finishWrite answers a store write that has run: on success the event fans out.
func (r *Relay) finishWrite(w *storeWrite, err error) result {
	res, done := r.storeOutcome(err)
	if !done {
		r.metrics.storedKind(w.ev.Kind)
		r.broadcast(w.ev, w.scope)
		res = accepted("")
	}
	r.metrics.answered(w.in, res)
	return res
}

// pipelined reports whether a connection may run an event's store write without waiting for the
// writes before it to finish. Admin events (and DM opens, applied like them) change what later
// events are checked against, a deletion or an edit must follow the event it names, and
// ephemeral events fan out at once: those wait.
func pipelined(ev *nostr.Event) bool {
	switch ev.Kind {
	case protocol.KindDeletion, protocol.KindEdit, protocol.KindDMOpen, protocol.KindDMAddMember, protocol.KindDMHide:
		return false
	}
	return !protocol.IsChannelAdmin(ev.Kind) && !protocol.IsEphemeral(ev.Kind)
}

// storeOutcome is storeResult, except that on a shared database a failed write is answered as
// retryable: it fails from a lost connection or a contended lock, both passing.
func (r *Relay) storeOutcome(err error) (result, bool) {
	res, done := storeResult(err)
	if done && !res.OK && r.shared != nil && !errors.Is(err, store.ErrClosed) {
		return errStoreRetry, true
	}
	return res, done
}

var errStoreRetry = rejected(http.StatusServiceUnavailable, protocol.ReasonError.Msg("could not store event; retry in a few seconds"))

// storeResult maps a store error to a result; done is false when the write succeeded.
func storeResult(err error) (result, bool) {
	switch {
	case err == nil:
		return result{}, false
	case errors.Is(err, store.ErrDuplicate), errors.Is(err, store.ErrNewerExists):
		return accepted(err.Error()), true
	}
	return rejected(http.StatusInternalServerError, protocol.ReasonError.Msg("could not store event")), true
}

// isMember reports whether pubkey is a member of channel chID, asking the database once (on a
// shared one) before saying no, as a member added on another node may not have reached us yet.
func (r *Relay) isMember(ctx context.Context, pubkey, chID string) bool {
	member := func() bool {
		ch, ok := r.acl.get(chID)
		_, in := ch.Members[pubkey]
		return ok && in
	}
	if member() {
		return true
	}
	return r.shared != nil && r.reloadChannel(ctx, chID) == nil && member()
}
