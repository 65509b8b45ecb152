package relay

import (
	"cmp"
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/protocol/observerframe"
	"github.com/buzz-harness/buzz/internal/protocol/turnmetric"
	"github.com/buzz-harness/buzz/internal/relay/store"
)

// ingestRule is one step of the ingest chain (see ingestRules). It returns nil to pass the event
// on, or the answer that ends the chain: a refusal, or for the steps that apply an event
// themselves, its outcome.
type ingestRule func(ctx context.Context, r *Relay, in *ingest) *result

// ingestRules is every client event's way in, in order; an event that passes them all is
// stored (storeEvent). First the rules on the event alone (and databaseLive), then the steps
// that take admin kinds and DM commands over (submitAdmin applies them, by the rules in
// admin_rules.go, so the write rules below never see them), then the write rules of stored and
// ephemeral events, and last the ephemeral fan-out. A new rule is a function here and its line
// in this list, placed where it must run (see the package doc).
var ingestRules = []ingestRule{
	validSignature,
	authenticated,
	signedAsAuthenticated,
	writeRate,
	servedKind,
	createdAtNotAhead,
	boundedTags,
	ephemeralOverWebSocket,
	oneLowercaseChannel,
	channelKindNamesChannel,
	turnMetricAddressing,
	turnMetricRate,
	observerFrameAddressing,
	reminderTags,
	databaseLive,

	createOutsideDMNamespace,
	applyAdmin,
	dmCommandRate,
	applyDMCommand,
	applyDMHide,

	writableChannel,
	forumPostInForum,
	voteOnForumPost,
	editOfOwnMessage,
	systemRowByMember,
	canvasByMember,
	observerBetweenAgentAndOwner,
	observerTelemetryRate,
	fanOutEphemeral,
}

func refuse(status int, msg string) *result {
	res := rejected(status, msg)
	return &res
}

// kinds is a set of event kinds.
type kinds map[int]bool

func kindSet(list ...int) kinds {
	s := kinds{}
	for _, k := range list {
		s[k] = true
	}
	return s
}

// clientKinds are the kinds clients may publish (Buzz's allow-list, trimmed to what we serve).
var clientKinds = kindSet(
	protocol.KindProfile, protocol.KindTextNote, protocol.KindDeletion, protocol.KindReaction,
	protocol.KindStreamMessage,
	protocol.KindPutUser, protocol.KindRemoveUser, protocol.KindEditMetadata, protocol.KindDeleteEvent,
	protocol.KindCreateGroup, protocol.KindDeleteGroup, protocol.KindJoinRequest, protocol.KindLeaveRequest,
	protocol.KindAgentProfile, protocol.KindPresence, protocol.KindTyping, protocol.KindObserverFrame,
	protocol.KindLongForm, protocol.KindReadState, protocol.KindEngram, protocol.KindUserStatus,
	protocol.KindTurnMetric,
	protocol.KindStreamMessageV2, protocol.KindEdit, protocol.KindReminder, protocol.KindDiffMessage,
	protocol.KindSystemMessage, protocol.KindCanvas,
	protocol.KindForumPost, protocol.KindForumVote, protocol.KindForumComment,
	protocol.KindDMOpen, protocol.KindDMAddMember, protocol.KindDMHide, // docs/dms.md
	protocol.KindPrivateReminder, // NIP-ER (reminders.go)
)

// relayOnlyKinds are signed by the relay itself; clients may not publish them.
var relayOnlyKinds = kindSet(
	protocol.KindRelayMembership, protocol.KindDMVisibility,
	protocol.KindGroupMetadata, protocol.KindGroupAdmins, protocol.KindGroupMembers, protocol.KindGroupRoles,
	protocol.KindThreadSummary, protocol.KindWindowBounds, protocol.KindRelayReserved, protocol.KindPresenceQuery,
	protocol.KindMemberAdded, protocol.KindMemberRemoved,
)

// channelKinds must carry an h tag naming an existing channel.
var channelKinds = kindSet(
	protocol.KindStreamMessage, protocol.KindTyping, protocol.KindStreamMessageV2, protocol.KindEdit,
	protocol.KindReminder, protocol.KindDiffMessage, protocol.KindSystemMessage, protocol.KindCanvas,
	protocol.KindForumPost, protocol.KindForumVote, protocol.KindForumComment,
	protocol.KindPutUser, protocol.KindRemoveUser, protocol.KindEditMetadata, protocol.KindDeleteEvent,
	protocol.KindCreateGroup, protocol.KindDeleteGroup, protocol.KindJoinRequest, protocol.KindLeaveRequest,
)

// validSignature: the id is the event's hash and the signature its author's.
func validSignature(_ context.Context, _ *Relay, in *ingest) *result {
	if in.sigErr != nil {
		return refuse(http.StatusBadRequest, protocol.ReasonInvalid.Msg(in.sigErr.Error()))
	}
	return nil
}

// authenticated: only a proven pubkey publishes (NIP-42 on a socket; NIP-98 always holds one).
func authenticated(_ context.Context, _ *Relay, in *ingest) *result {
	if in.from.pubkey == "" {
		return refuse(http.StatusUnauthorized, protocol.ReasonAuthRequired.Msg("authenticate before publishing"))
	}
	return nil
}

// signedAsAuthenticated: nobody relays another pubkey's events.
func signedAsAuthenticated(_ context.Context, _ *Relay, in *ingest) *result {
	if in.ev.PubKey != in.from.pubkey {
		return refuse(http.StatusForbidden, protocol.ReasonRestricted.Msg("event pubkey does not match the authenticated pubkey"))
	}
	return nil
}

// writeRate bounds the events one pubkey publishes a second (Config.MaxWritesPerSecond), so one
// client cannot take the store's single writer for itself.
func writeRate(_ context.Context, r *Relay, in *ingest) *result {
	if !r.writes.allow(in.ev.PubKey) {
		return refuse(http.StatusTooManyRequests, protocol.ReasonRateLimited.Msgf("more than %d events a second", r.cfg.MaxWritesPerSecond))
	}
	return nil
}

// createdAtNotAhead: an event dated far ahead would sort above everything real for as long as it
// stays ahead (a pinned canvas, history pushed out of every "newest N"). Upstream relays allow
// 15 minutes (Config.MaxFutureSkew).
func createdAtNotAhead(_ context.Context, r *Relay, in *ingest) *result {
	skew := r.cfg.MaxFutureSkew
	if skew > 0 && in.ev.CreatedAt.Time().After(r.now().Add(skew)) {
		return refuse(http.StatusBadRequest, protocol.ReasonInvalid.Msgf("created_at is more than %d s in the future", int64(skew.Seconds())))
	}
	return nil
}

// servedKind: a client kind, never one the relay signs.
func servedKind(_ context.Context, _ *Relay, in *ingest) *result {
	switch {
	case relayOnlyKinds[in.ev.Kind]:
		return refuse(http.StatusBadRequest, protocol.ReasonRestricted.Msg("relay-only kind"))
	case !clientKinds[in.ev.Kind]:
		return refuse(http.StatusBadRequest, protocol.ReasonRestricted.Msg("unknown event kind"))
	}
	return nil
}

// Tag caps (docs/security.md). Every indexed tag (a single-letter name, each name and value
// once, an imeta's file hash) is one row written with the event and deleted when it is
// replaced; a kind 0 with 34,134 t tags held the single SQLite writer for a second. Buzz's own
// events carry a handful: a message's mentions, thread refs and imeta, a DM's nine members.
const (
	maxEventTags   = 2000
	maxIndexedTags = 200
)

// boundedTags: at most maxEventTags tags, and maxIndexedTags of them indexed.
func boundedTags(_ context.Context, _ *Relay, in *ingest) *result {
	if n := len(in.ev.Tags); n > maxEventTags {
		return refuse(http.StatusBadRequest, protocol.ReasonInvalid.Msgf("event has %d tags (max %d)", n, maxEventTags))
	}
	if n := len(store.IndexedTags(in.ev.Tags, nil)); n > maxIndexedTags {
		return refuse(http.StatusBadRequest, protocol.ReasonInvalid.Msgf("event has %d indexed tags (single-letter names; max %d)", n, maxIndexedTags))
	}
	return nil
}

// ephemeralOverWebSocket: the bridge stores and answers; an ephemeral event has nowhere to go.
func ephemeralOverWebSocket(_ context.Context, _ *Relay, in *ingest) *result {
	if in.from.via == viaBridge && protocol.IsEphemeral(in.ev.Kind) {
		return refuse(http.StatusBadRequest, protocol.ReasonInvalid.Msg("ephemeral events must be sent over WebSocket"))
	}
	return nil
}

// oneLowercaseChannel: every h tag is the same lowercase UUID.
func oneLowercaseChannel(_ context.Context, _ *Relay, in *ingest) *result {
	for _, t := range in.ev.Tags {
		if len(t) < 2 || t[0] != "h" {
			continue
		}
		switch {
		case !protocol.IsUUID(t[1]):
			return refuse(http.StatusBadRequest, protocol.ReasonInvalid.Msg("channel id (h tag) must be a UUID"))
		// One spelling per channel: an uppercase twin would be a second channel with the same
		// id to a human (or a case-insensitive client), created by someone else.
		case t[1] != strings.ToLower(t[1]):
			return refuse(http.StatusBadRequest, protocol.ReasonInvalid.Msg("channel id (h tag) must be a lowercase UUID"))
		// One event, one channel: a second h tag would let a write checked against one channel
		// match readers' #h filters of another.
		case t[1] != in.channel:
			return refuse(http.StatusBadRequest, protocol.ReasonInvalid.Msg("an event belongs to one channel (several h tags)"))
		}
	}
	return nil
}

// channelKindNamesChannel: channel kinds carry their channel.
func channelKindNamesChannel(_ context.Context, _ *Relay, in *ingest) *result {
	if channelKinds[in.ev.Kind] && in.channel == "" {
		return refuse(http.StatusBadRequest, protocol.ReasonInvalid.Msg("missing h tag with the channel id"))
	}
	return nil
}

// turnMetricAddressing is NIP-AM's envelope: a global event (no channel) for exactly one reader,
// the p-tagged owner, naming its author as the agent. Its content is NIP-44 the relay cannot read.
func turnMetricAddressing(_ context.Context, _ *Relay, in *ingest) *result {
	ev := in.ev
	if ev.Kind != protocol.KindTurnMetric {
		return nil
	}
	if in.channel != "" {
		return refuse(http.StatusBadRequest, protocol.ReasonInvalid.Msg("turn metrics (kind 44200) are global and carry no h tag"))
	}
	ps, agents := turnmetric.Addressing(ev.Tags)
	if len(ps) != 1 || !protocol.IsHex64(ps[0]) {
		return refuse(http.StatusBadRequest, protocol.ReasonInvalid.Msg("a turn metric needs exactly one p tag naming its owner"))
	}
	if len(agents) != 1 || agents[0] != ev.PubKey {
		return refuse(http.StatusBadRequest, protocol.ReasonInvalid.Msg("a turn metric needs exactly one agent tag equal to its author"))
	}
	return nil
}

// Turn metrics an agent may publish: 60 a minute, as upstream.
const (
	turnMetricLimit  = 60
	turnMetricWindow = time.Minute
)

// turnMetricRate: an agent over its turn-metric rate is refused (rate-limited) and the refusal
// counted; a harness publishes one per turn, so only a runaway loop or a hostile key gets here.
func turnMetricRate(_ context.Context, r *Relay, in *ingest) *result {
	if in.ev.Kind != protocol.KindTurnMetric {
		return nil
	}
	ok, first := r.turnMetrics.allow(in.ev.PubKey, r.now())
	if ok {
		return nil
	}
	if first {
		r.log.Warn("agent over the turn-metric rate; refusing", "agent", in.ev.PubKey, "refused_total", r.turnMetrics.refused.Load())
	}
	return refuse(http.StatusTooManyRequests, protocol.ReasonRateLimited.Msg("more than 60 turn metrics a minute from this agent"))
}

// observerFrameAddressing is NIP-AO's envelope: a global frame (no channel) with one p, one agent
// and one frame tag, the agent being the author of telemetry and the recipient of control.
func observerFrameAddressing(_ context.Context, _ *Relay, in *ingest) *result {
	if in.ev.Kind != protocol.KindObserverFrame {
		return nil
	}
	if in.channel != "" {
		return refuse(http.StatusBadRequest, protocol.ReasonInvalid.Msg("observer frames (kind 24200) are global and carry no h tag"))
	}
	if _, err := observerframe.Addressing(in.ev); err != nil {
		return refuse(http.StatusBadRequest, protocol.ReasonInvalid.Msg(err.Error()))
	}
	return nil
}

// databaseLive: a node cut off from the shared database would act on channel state other nodes
// may have changed, so it takes no writes until its change feed is back.
func databaseLive(_ context.Context, r *Relay, _ *ingest) *result {
	if r.shared != nil && !r.shared.Live() {
		res := errNoDatabase
		return &res
	}
	return nil
}

// createOutsideDMNamespace: a DM's id is computable from its members, so a 9007 taking one
// would squat that pair's DM (their open would then land in a channel its creator controls).
// DM ids are version-8 UUIDs (dm.go); no 9007 may create one.
func createOutsideDMNamespace(_ context.Context, _ *Relay, in *ingest) *result {
	if in.ev.Kind == protocol.KindCreateGroup && isDMID(in.channel) {
		return refuse(http.StatusBadRequest, protocol.ReasonInvalid.Msg("channel ids that are version-8 UUIDs are reserved for DMs (kind 41010)"))
	}
	return nil
}

// applyAdmin applies a NIP-29 admin event (admin_rules.go decides it).
func applyAdmin(ctx context.Context, r *Relay, in *ingest) *result {
	if !protocol.IsChannelAdmin(in.ev.Kind) {
		return nil
	}
	res := r.submitAdmin(ctx, in.ev, in.channel)
	return &res
}

// dmCommandRate bounds the DM commands one pubkey sends a minute (Config.MaxDMOpensPerMinute):
// each may create a channel, and keys are free, but a flood from one key is cut short.
func dmCommandRate(_ context.Context, r *Relay, in *ingest) *result {
	if in.ev.Kind != protocol.KindDMOpen && in.ev.Kind != protocol.KindDMAddMember {
		return nil
	}
	if !r.dmOpens.allow(in.ev.PubKey) {
		return refuse(http.StatusTooManyRequests, protocol.ReasonRateLimited.Msgf("more than %d DM opens a minute", r.cfg.MaxDMOpensPerMinute))
	}
	return nil
}

// applyDMCommand opens a DM or adds to one (dm.go), applied like an admin event on the DM of
// the participant set.
func applyDMCommand(ctx context.Context, r *Relay, in *ingest) *result {
	if in.ev.Kind != protocol.KindDMOpen && in.ev.Kind != protocol.KindDMAddMember {
		return nil
	}
	target, err := r.dmTarget(in.ev)
	if err != nil {
		return refuse(http.StatusBadRequest, err.Error())
	}
	res := r.submitAdmin(ctx, in.ev, target)
	// Opening a DM you hid brings it back to your list, as upstream's reopen does.
	if res.OK && in.ev.Kind == protocol.KindDMOpen {
		if err := r.setDMHidden(ctx, in.ev.PubKey, target, false); err != nil {
			r.log.Warn("unhide reopened DM", "err", err)
		}
	}
	return &res
}

// writableChannel is the write rule for channel-scoped events: the channel exists and is live,
// and the author is a member unless it is open. Globally stored kinds (profiles, say) that name
// a channel still need the right to write there.
func writableChannel(ctx context.Context, r *Relay, in *ingest) *result {
	target := cmp.Or(in.scope, in.channel)
	if target == "" {
		return nil
	}
	res := r.checkWrite(in.ev.PubKey, target)
	if res == nil || r.shared == nil {
		return res
	}
	// Another node may have created the channel or added the member a moment ago, before its
	// notice reached this node: ask the database before refusing.
	if r.reloadChannel(ctx, target) != nil {
		return res
	}
	return r.checkWrite(in.ev.PubKey, target)
}

func (r *Relay) checkWrite(pubkey, chID string) *result {
	ch, ok := r.acl.get(chID)
	switch {
	case !ok || ch.Deleted || hidesDM(ch, pubkey):
		return refuse(http.StatusBadRequest, protocol.ReasonInvalid.Msg("unknown channel"))
	case ch.Archived:
		return refuse(http.StatusBadRequest, protocol.ReasonRestricted.Msg("channel is archived"))
	}
	if _, member := ch.Members[pubkey]; !member && ch.Visibility == protocol.VisibilityPrivate {
		return refuse(http.StatusBadRequest, protocol.ReasonRestricted.Msg("not a channel member"))
	}
	return nil
}

// editOfOwnMessage is the edit rule (kind 40003): the e tag names a message of the same channel
// written by the signer. Without it anyone could publish "edits" of others' messages that a
// client would show in place of the original.
func editOfOwnMessage(ctx context.Context, r *Relay, in *ingest) *result {
	ev := in.ev
	if ev.Kind != protocol.KindEdit {
		return nil
	}
	target := protocol.TagValue(ev.Tags, "e")
	if !protocol.IsHex64(target) {
		return refuse(http.StatusBadRequest, protocol.ReasonInvalid.Msg("an edit needs an e tag naming the message"))
	}
	old, oldCh, err := r.st.Event(ctx, target)
	if err != nil {
		return refuse(http.StatusInternalServerError, protocol.ReasonError.Msg("lookup failed"))
	}
	// One answer for absent, elsewhere and not yours: distinct ones told whether an event id
	// exists (a private message was recovered by probing ids).
	if old == nil || oldCh != in.channel || old.PubKey != ev.PubKey {
		return refuse(http.StatusBadRequest, protocol.ReasonInvalid.Msg("edit target not found among your messages in this channel"))
	}
	return nil
}

// systemRowByMember: a system row speaks for the channel; anyone could post one into an open
// channel, so only its members may (the relay signs its own rows and never comes through here).
func systemRowByMember(ctx context.Context, r *Relay, in *ingest) *result {
	if in.ev.Kind == protocol.KindSystemMessage && !r.isMember(ctx, in.ev.PubKey, in.channel) {
		return refuse(http.StatusForbidden, protocol.ReasonRestricted.Msg("only channel members may post system rows (kind 40099)"))
	}
	return nil
}

// canvasByMember: the canvas (kind 40100) is the channel's standing document, which the agent's
// standing prompt points at, so in an open channel too only members write it.
func canvasByMember(ctx context.Context, r *Relay, in *ingest) *result {
	if in.ev.Kind == protocol.KindCanvas && !r.isMember(ctx, in.ev.PubKey, in.channel) {
		return refuse(http.StatusForbidden, protocol.ReasonRestricted.Msg("only channel members may write the canvas (kind 40100)"))
	}
	return nil
}

// observerBetweenAgentAndOwner: telemetry goes from an agent to its owner, control from the
// owner to its agent, and nowhere else; the owner is the one the agent proved (observer.go). A
// frame could otherwise carry anyone's encrypted chatter to anyone, or let a stranger pose as an
// agent's controller.
func observerBetweenAgentAndOwner(ctx context.Context, r *Relay, in *ingest) *result {
	if in.ev.Kind != protocol.KindObserverFrame {
		return nil
	}
	env, _ := observerframe.Addressing(in.ev) // observerFrameAddressing passed it
	if env.Frame == observerframe.Telemetry {
		if o := frameOwner(in.ev); o != "" {
			r.observers.learn(in.ev.PubKey, o)
		}
	}
	owner, err := r.agentOwner(ctx, env.Agent)
	if err != nil {
		return refuse(http.StatusInternalServerError, protocol.ReasonError.Msg("owner lookup failed"))
	}
	switch {
	case owner == "":
		return refuse(http.StatusForbidden, protocol.ReasonRestricted.Msg("observer frames need the agent's owner proven by a NIP-OA auth tag"))
	case env.Frame == observerframe.Telemetry && env.Recipient != owner:
		return refuse(http.StatusForbidden, protocol.ReasonRestricted.Msg("telemetry frames go only to the agent's owner"))
	case env.Frame == observerframe.Control && in.ev.PubKey != owner:
		return refuse(http.StatusForbidden, protocol.ReasonRestricted.Msg("control frames come only from the agent's owner"))
	}
	return nil
}

// observerTelemetryRate bounds each agent's telemetry (ObserverTelemetryPerSecond): a frame over
// it is refused and counted, and the connection stays. Control is not limited.
func observerTelemetryRate(_ context.Context, r *Relay, in *ingest) *result {
	if in.ev.Kind != protocol.KindObserverFrame || protocol.TagValue(in.ev.Tags, "frame") != observerframe.Telemetry {
		return nil
	}
	if ok, _ := r.telemetry.allow(in.ev.PubKey, r.now()); !ok {
		return refuse(http.StatusTooManyRequests, protocol.ReasonRateLimited.Msgf("observer telemetry over %d frames/s per agent", ObserverTelemetryPerSecond))
	}
	return nil
}

// fanOutEphemeral delivers an ephemeral event to this node's subscribers and the other nodes',
// and answers at once: it is never stored.
func fanOutEphemeral(ctx context.Context, r *Relay, in *ingest) *result {
	if !protocol.IsEphemeral(in.ev.Kind) {
		return nil
	}
	r.broadcast(in.ev, in.scope)
	if r.shared != nil {
		if err := r.shared.Publish(ctx, in.ev, in.scope); err != nil {
			r.log.Warn("ephemeral event not passed to other nodes", "id", in.ev.ID, "err", err)
		}
	}
	res := accepted("")
	return &res
}
