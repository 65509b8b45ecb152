package relay

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/protocol/turnmetric"
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

// refuse is a rejection as check returns it: nothing to store.
func refuse(status int, msg string) (result, *storeWrite) { return rejected(status, msg), nil }

// clientKinds are the kinds clients may publish (Buzz's allow-list, trimmed to what we serve).
var clientKinds = map[int]bool{
	0: true, 1: true, 5: true, 7: true, 9: true,
	9000: true, 9001: true, 9002: true, 9005: true, 9007: true, 9008: true, 9021: true, 9022: true,
	10100: true, 20001: true, 20002: true, 24200: true,
	30023: true, 30078: true, 30174: true, 30315: true,
	44200: true,
	40002: true, 40003: true, 40007: true, 40008: true, 40099: true, 40100: true,
	45001: true, 45002: true, 45003: true,
	41010: true, 41011: true, // DM open / add member (docs/dms.md)
}

// relayOnlyKinds are signed by the relay itself; clients may not publish them.
var relayOnlyKinds = map[int]bool{
	13534: true, 30622: true, 39000: true, 39001: true, 39002: true, 39003: true,
	39005: true, 39006: true, 40901: true, 40902: true, 44100: true, 44101: true,
}

// channelKinds must carry an h tag naming an existing channel.
var channelKinds = map[int]bool{
	9: true, 20002: true, 40002: true, 40003: true, 40007: true, 40008: true, 40099: true, 40100: true,
	45001: true, 45002: true, 45003: true,
	9000: true, 9001: true, 9002: true, 9005: true, 9007: true, 9008: true, 9021: true, 9022: true,
}

// storageChannel is the channel an event is stored (and access-checked) under; "" = global.
// 39000-series are scoped by their d tag; membership notices are global so #p subs get them.
func storageChannel(ev *nostr.Event) string {
	switch {
	case ev.Kind >= 39000 && ev.Kind <= 39002:
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

// submit runs one client event through validation, access rules, storage and fan-out.
// authed is the pubkey the connection (or NIP-98 header) proved; overHTTP marks the bridge.
func (r *Relay) submit(ctx context.Context, ev *nostr.Event, authed string, overHTTP bool) result {
	return r.submitChecked(ctx, ev, protocol.CheckEvent(ev), authed, overHTTP)
}

// submitChecked is submit with the id/signature check already done (checkErr is its result).
func (r *Relay) submitChecked(ctx context.Context, ev *nostr.Event, checkErr error, authed string, overHTTP bool) result {
	res, w := r.check(ctx, ev, checkErr, authed, overHTTP)
	if w == nil {
		return res
	}
	return r.finishWrite(w, r.st.Update(ctx, w.fn))
}

// storeWrite is a checked event's store write, not yet run.
type storeWrite struct {
	ev    *nostr.Event
	scope string
	fn    func(store.Tx) error
}

// finishWrite answers a store write that has run: on success the event fans out.
func (r *Relay) finishWrite(w *storeWrite, err error) result {
	if res, done := r.storeOutcome(err); done {
		return res
	}
	r.broadcast(w.ev, w.scope)
	return accepted("")
}

// pipelined reports whether a connection may run an event's store write without waiting for the
// writes before it to finish. Admin events (and DM opens, applied like them) change what later
// events are checked against, a deletion or an edit must follow the event it names, and
// ephemeral events fan out at once: those wait.
func pipelined(ev *nostr.Event) bool {
	switch ev.Kind {
	case protocol.KindDeletion, protocol.KindEdit, protocol.KindDMOpen, protocol.KindDMAddMember:
		return false
	}
	return !protocol.IsChannelAdmin(ev.Kind) && !protocol.IsEphemeral(ev.Kind)
}

// check validates an event and applies the access rules. It returns the answer, or for an event
// to store, the write to run (res is then unset); admin and ephemeral events are applied here.
func (r *Relay) check(ctx context.Context, ev *nostr.Event, checkErr error, authed string, overHTTP bool) (result, *storeWrite) {
	if err := checkErr; err != nil {
		return refuse(http.StatusBadRequest, "invalid: "+err.Error())
	}
	if authed == "" {
		return refuse(http.StatusUnauthorized, "auth-required: authenticate before publishing")
	}
	if ev.PubKey != authed {
		return refuse(http.StatusForbidden, "restricted: event pubkey does not match the authenticated pubkey")
	}
	switch {
	case relayOnlyKinds[ev.Kind]:
		return refuse(http.StatusBadRequest, "restricted: relay-only kind")
	case !clientKinds[ev.Kind]:
		return refuse(http.StatusBadRequest, "restricted: unknown event kind")
	case overHTTP && protocol.IsEphemeral(ev.Kind):
		return refuse(http.StatusBadRequest, "invalid: ephemeral events must be sent over WebSocket")
	}
	chID, hasCh := protocol.ChannelID(ev.Tags)
	for _, t := range ev.Tags {
		if len(t) >= 2 && t[0] == "h" && !protocol.IsUUID(t[1]) {
			return refuse(http.StatusBadRequest, "invalid: channel id (h tag) must be a UUID")
		}
		// One spelling per channel: an uppercase twin would be a second channel with the same
		// id to a human (or a case-insensitive client), created by someone else.
		if len(t) >= 2 && t[0] == "h" && t[1] != strings.ToLower(t[1]) {
			return refuse(http.StatusBadRequest, "invalid: channel id (h tag) must be a lowercase UUID")
		}
		// One event, one channel: a second h tag would let a write checked against one channel
		// match readers' #h filters of another.
		if len(t) >= 2 && t[0] == "h" && t[1] != chID {
			return refuse(http.StatusBadRequest, "invalid: an event belongs to one channel (several h tags)")
		}
	}
	if channelKinds[ev.Kind] && !hasCh {
		return refuse(http.StatusBadRequest, "invalid: missing h tag with the channel id")
	}
	if ev.Kind == protocol.KindTurnMetric {
		if res, ok := checkTurnMetric(ev, hasCh); !ok {
			return res, nil
		}
	}
	if r.shared != nil && !r.shared.Live() {
		return errNoDatabase, nil
	}
	if protocol.IsChannelAdmin(ev.Kind) {
		return r.submitAdmin(ctx, ev, chID), nil
	}
	if ev.Kind == protocol.KindDMOpen || ev.Kind == protocol.KindDMAddMember {
		target, err := r.dmTarget(ev)
		if err != nil {
			return refuse(http.StatusBadRequest, err.Error())
		}
		return r.submitAdmin(ctx, ev, target), nil
	}
	scope := storageChannel(ev)
	// Globally stored kinds (profiles, say) that name a channel still need the right to write there.
	if target := cmp.Or(scope, chID); target != "" {
		if res, ok := r.checkWrite(ev.PubKey, target); !ok {
			// Another node may have created the channel or added the member a moment ago,
			// before its notice reached this node: ask the database before refusing.
			if r.shared == nil || r.reloadChannel(ctx, target) != nil {
				return res, nil
			}
			if res, ok := r.checkWrite(ev.PubKey, target); !ok {
				return res, nil
			}
		}
	}
	if ev.Kind == protocol.KindEdit {
		if res, ok := r.checkEdit(ctx, ev, chID); !ok {
			return res, nil
		}
	}
	// A system row speaks for the channel: anyone could post one into an open channel, so only
	// its members may (the relay signs its own rows and never comes through here).
	if ev.Kind == protocol.KindSystemMessage && !r.isMember(ctx, ev.PubKey, chID) {
		return refuse(http.StatusForbidden, "restricted: only channel members may post system rows (kind 40099)")
	}
	if protocol.IsEphemeral(ev.Kind) {
		r.broadcast(ev, scope)
		if r.shared != nil {
			if err := r.shared.Publish(ctx, ev, scope); err != nil {
				r.log.Warn("ephemeral event not passed to other nodes", "id", ev.ID, "err", err)
			}
		}
		return accepted(""), nil
	}
	return result{}, &storeWrite{ev: ev, scope: scope, fn: func(tx store.Tx) error {
		if err := tx.SaveEvent(ev, scope); err != nil {
			return err
		}
		if ev.Kind == protocol.KindDeletion {
			// NIP-09: only the author's own events are deleted (soft delete).
			var ids []string
			for t := range ev.Tags.FindAll("e") {
				if protocol.IsHex64(t[1]) {
					ids = append(ids, t[1])
				}
			}
			if _, err := tx.SoftDelete(ids, ev.PubKey, int64(ev.CreatedAt)); err != nil {
				return err
			}
		}
		return nil
	}}
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

var errStoreRetry = rejected(http.StatusServiceUnavailable, "error: could not store event; retry in a few seconds")

// storeResult maps a store error to a result; done is false when the write succeeded.
func storeResult(err error) (result, bool) {
	switch {
	case err == nil:
		return result{}, false
	case errors.Is(err, store.ErrDuplicate), errors.Is(err, store.ErrNewerExists):
		return accepted(err.Error()), true
	}
	return rejected(http.StatusInternalServerError, "error: could not store event"), true
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

// checkTurnMetric is NIP-AM's envelope: a global event (no channel) for exactly one reader, the
// p-tagged owner, naming its author as the agent. Its content is NIP-44 the relay cannot read.
func checkTurnMetric(ev *nostr.Event, hasCh bool) (result, bool) {
	if hasCh {
		return rejected(http.StatusBadRequest, "invalid: turn metrics (kind 44200) are global and carry no h tag"), false
	}
	ps, agents := turnmetric.Addressing(ev.Tags)
	if len(ps) != 1 || !protocol.IsHex64(ps[0]) {
		return rejected(http.StatusBadRequest, "invalid: a turn metric needs exactly one p tag naming its owner"), false
	}
	if len(agents) != 1 || agents[0] != ev.PubKey {
		return rejected(http.StatusBadRequest, "invalid: a turn metric needs exactly one agent tag equal to its author"), false
	}
	return result{}, true
}

// checkWrite applies the write rule for channel-scoped events: the channel must exist and be
// live, and the author must be a member unless the channel is open.
func (r *Relay) checkWrite(pubkey, chID string) (result, bool) {
	ch, ok := r.acl.get(chID)
	switch {
	case !ok || ch.Deleted:
		return rejected(http.StatusBadRequest, "invalid: unknown channel"), false
	case ch.Archived:
		return rejected(http.StatusBadRequest, "restricted: channel is archived"), false
	}
	if _, member := ch.Members[pubkey]; !member && ch.Visibility == protocol.VisibilityPrivate {
		return rejected(http.StatusBadRequest, "restricted: not a channel member"), false
	}
	return result{}, true
}

// checkEdit applies the edit rule (kind 40003): the e tag names a message of the same channel
// written by the signer. Without it anyone could publish "edits" of others' messages that a
// client would show in place of the original.
func (r *Relay) checkEdit(ctx context.Context, ev *nostr.Event, chID string) (result, bool) {
	target := protocol.TagValue(ev.Tags, "e")
	if !protocol.IsHex64(target) {
		return rejected(http.StatusBadRequest, "invalid: an edit needs an e tag naming the message"), false
	}
	old, oldCh, err := r.st.Event(ctx, target)
	switch {
	case err != nil:
		return rejected(http.StatusInternalServerError, "error: lookup failed"), false
	case old == nil:
		return rejected(http.StatusBadRequest, "invalid: edit target event not found"), false
	case oldCh != chID:
		return rejected(http.StatusBadRequest, "invalid: target event belongs to a different channel"), false
	case old.PubKey != ev.PubKey:
		return rejected(http.StatusBadRequest, "invalid: must be event author to edit"), false
	}
	return result{}, true
}
