package relay

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/clock"
	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/relay/store"
)

// Each ingest rule alone: ruleEvent builds the event a rule sees, wantPass and wantRefusal read
// its verdict. Rules that read relay state run against a real relay (openTestRelay) whose acl
// mirror the test sets directly.

const otherChannel = "0b5a3e1e-0a4c-4d7e-8b7e-5d3f2a1c9e8b"

func ruleEvent(kind int, pubkey string, tags ...nostr.Tag) *nostr.Event {
	return &nostr.Event{ID: strings.Repeat("1", 64), Kind: kind, PubKey: pubkey, Tags: tags, CreatedAt: 1_700_000_000}
}

func wsIngest(ev *nostr.Event) *ingest { return newIngest(ev, nil, fromWebSocket(ev.PubKey)) }

func wantPass(t *testing.T, got *result) {
	t.Helper()
	if got != nil {
		t.Fatalf("refused with %d %q, want passed on", got.Status, got.Msg)
	}
}

func wantRefusal(t *testing.T, got *result, status int, msg string) {
	t.Helper()
	if got == nil {
		t.Fatalf("passed on, want %d %q", status, msg)
	}
	if got.OK || got.Status != status || got.Msg != msg {
		t.Fatalf("got ok=%v %d %q, want refused %d %q", got.OK, got.Status, got.Msg, status, msg)
	}
}

func openTestRelay(t testing.TB) *Relay { t.Helper(); return openTestRelayWith(t, Config{}) }

func openTestRelayWith(t testing.TB, cfg Config) *Relay {
	t.Helper()
	cfg.DataDir = t.TempDir()
	if err := os.Chmod(cfg.DataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	r, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func TestKindTablesAreDisjointAndChannelKindsArePublishable(t *testing.T) {
	for k := range relayOnlyKinds {
		if clientKinds[k] {
			t.Errorf("kind %d is both relay-only and a client kind", k)
		}
	}
	for k := range channelKinds {
		if !clientKinds[k] {
			t.Errorf("channel kind %d is not a client kind", k)
		}
	}
}

func TestValidSignatureRefusesAFailedCheckAsInvalid(t *testing.T) {
	ev := ruleEvent(protocol.KindStreamMessage, pkMember)
	wantPass(t, validSignature(t.Context(), nil, wsIngest(ev)))
	in := newIngest(ev, errors.New("bad signature"), fromWebSocket(pkMember))
	wantRefusal(t, validSignature(t.Context(), nil, in), 400, "invalid: bad signature")
}

func TestAuthenticatedRefusesASocketThatHasNotAuthenticated(t *testing.T) {
	ev := ruleEvent(protocol.KindStreamMessage, pkMember)
	wantPass(t, authenticated(t.Context(), nil, wsIngest(ev)))
	wantRefusal(t, authenticated(t.Context(), nil, newIngest(ev, nil, fromWebSocket(""))),
		401, "auth-required: authenticate before publishing")
}

func TestSignedAsAuthenticatedRefusesAnotherPubkeysEvent(t *testing.T) {
	ev := ruleEvent(protocol.KindStreamMessage, pkMember)
	wantPass(t, signedAsAuthenticated(t.Context(), nil, newIngest(ev, nil, fromBridge(pkMember))))
	wantRefusal(t, signedAsAuthenticated(t.Context(), nil, newIngest(ev, nil, fromBridge(pkOutside))),
		403, "restricted: event pubkey does not match the authenticated pubkey")
}

func TestServedKindRefusesRelayOnlyAndUnknownKinds(t *testing.T) {
	for kind, want := range map[int]string{
		protocol.KindGroupMetadata: "restricted: relay-only kind",
		protocol.KindPresenceQuery: "restricted: relay-only kind",
		12345:                      "restricted: unknown event kind",
		protocol.KindDMVisibility:  "restricted: relay-only kind",
	} {
		wantRefusal(t, servedKind(t.Context(), nil, wsIngest(ruleEvent(kind, pkMember))), 400, want)
	}
	wantPass(t, servedKind(t.Context(), nil, wsIngest(ruleEvent(protocol.KindStreamMessage, pkMember))))
}

func TestBoundedTagsRefusesTooManyTagsOrIndexedTags(t *testing.T) {
	tags := func(n int, name string) nostr.Tags {
		out := make(nostr.Tags, n)
		for i := range out {
			out[i] = nostr.Tag{name, strconv.Itoa(i)}
		}
		return out
	}
	check := func(ts nostr.Tags) *result {
		return boundedTags(t.Context(), nil, wsIngest(ruleEvent(protocol.KindProfile, pkMember, ts...)))
	}
	wantRefusal(t, check(tags(maxEventTags+1, "alt")), 400, "invalid: event has 2001 tags (max 2000)")
	wantRefusal(t, check(tags(maxIndexedTags+1, "t")), 400, "invalid: event has 201 indexed tags (single-letter names; max 200)")
	// Unindexed (multi-letter) tags count only against the total, and a repeated pair is one row.
	wantPass(t, check(tags(maxEventTags, "alt")))
	wantPass(t, check(append(tags(maxIndexedTags, "t"), tags(maxIndexedTags, "t")...)))
}

func TestEphemeralOverWebSocketRefusesEphemeralEventsFromTheBridge(t *testing.T) {
	typing := ruleEvent(protocol.KindTyping, pkMember, nostr.Tag{"h", testChannel})
	wantPass(t, ephemeralOverWebSocket(t.Context(), nil, wsIngest(typing)))
	wantRefusal(t, ephemeralOverWebSocket(t.Context(), nil, newIngest(typing, nil, fromBridge(pkMember))),
		400, "invalid: ephemeral events must be sent over WebSocket")
	msg := ruleEvent(protocol.KindStreamMessage, pkMember, nostr.Tag{"h", testChannel})
	wantPass(t, ephemeralOverWebSocket(t.Context(), nil, newIngest(msg, nil, fromBridge(pkMember))))
}

func TestOneLowercaseChannelRefusesBadUppercaseAndSecondHTags(t *testing.T) {
	for name, tc := range map[string]struct {
		tags nostr.Tags
		want string
	}{
		"not a UUID":  {nostr.Tags{{"h", "general"}}, "invalid: channel id (h tag) must be a UUID"},
		"uppercase":   {nostr.Tags{{"h", strings.ToUpper(testChannel)}}, "invalid: channel id (h tag) must be a lowercase UUID"},
		"two":         {nostr.Tags{{"h", testChannel}, {"h", otherChannel}}, "invalid: an event belongs to one channel (several h tags)"},
		"second junk": {nostr.Tags{{"h", testChannel}, {"h", "x"}}, "invalid: channel id (h tag) must be a UUID"},
	} {
		t.Run(name, func(t *testing.T) {
			ev := ruleEvent(protocol.KindStreamMessage, pkMember, tc.tags...)
			wantRefusal(t, oneLowercaseChannel(t.Context(), nil, wsIngest(ev)), 400, tc.want)
		})
	}
	same := ruleEvent(protocol.KindStreamMessage, pkMember, nostr.Tag{"h", testChannel}, nostr.Tag{"h", testChannel}, nostr.Tag{"h"})
	wantPass(t, oneLowercaseChannel(t.Context(), nil, wsIngest(same)))
}

func TestChannelKindNamesChannelRefusesAChannelKindWithoutHTag(t *testing.T) {
	wantRefusal(t, channelKindNamesChannel(t.Context(), nil, wsIngest(ruleEvent(protocol.KindStreamMessage, pkMember))),
		400, "invalid: missing h tag with the channel id")
	wantPass(t, channelKindNamesChannel(t.Context(), nil, wsIngest(ruleEvent(protocol.KindReaction, pkMember))))
}

func TestTurnMetricAddressingRefusesAChannelOrAWrongEnvelope(t *testing.T) {
	for name, tc := range map[string]struct {
		tags nostr.Tags
		want string
	}{
		"h tag":        {nostr.Tags{{"p", pkOwner}, {"agent", pkAgent}, {"h", testChannel}}, "invalid: turn metrics (kind 44200) are global and carry no h tag"},
		"no owner":     {nostr.Tags{{"agent", pkAgent}}, "invalid: a turn metric needs exactly one p tag naming its owner"},
		"two owners":   {nostr.Tags{{"p", pkOwner}, {"p", pkOwner2}, {"agent", pkAgent}}, "invalid: a turn metric needs exactly one p tag naming its owner"},
		"other agent":  {nostr.Tags{{"p", pkOwner}, {"agent", pkMember}}, "invalid: a turn metric needs exactly one agent tag equal to its author"},
		"agent absent": {nostr.Tags{{"p", pkOwner}}, "invalid: a turn metric needs exactly one agent tag equal to its author"},
	} {
		t.Run(name, func(t *testing.T) {
			ev := ruleEvent(protocol.KindTurnMetric, pkAgent, tc.tags...)
			wantRefusal(t, turnMetricAddressing(t.Context(), nil, wsIngest(ev)), 400, tc.want)
		})
	}
	ok := ruleEvent(protocol.KindTurnMetric, pkAgent, nostr.Tag{"p", pkOwner}, nostr.Tag{"agent", pkAgent})
	wantPass(t, turnMetricAddressing(t.Context(), nil, wsIngest(ok)))
}

func TestTurnMetricRateRefusesTheSixtyFirstInAMinuteAndCountsIt(t *testing.T) {
	var now atomic.Int64 // the relay's reminder loop reads the clock too
	now.Store(1_700_000_000)
	r := openTestRelayWith(t, Config{Now: func() time.Time { return time.Unix(now.Load(), 0) }})
	metric := func(agent string) *ingest {
		return wsIngest(ruleEvent(protocol.KindTurnMetric, agent, nostr.Tag{"p", pkOwner}, nostr.Tag{"agent", agent}))
	}
	for i := range 60 {
		if got := turnMetricRate(t.Context(), r, metric(pkAgent)); got != nil {
			t.Fatalf("metric %d refused: %q", i+1, got.Msg)
		}
	}
	wantRefusal(t, turnMetricRate(t.Context(), r, metric(pkAgent)), 429, "rate-limited: more than 60 turn metrics a minute from this agent")
	wantRefusal(t, turnMetricRate(t.Context(), r, metric(pkAgent)), 429, "rate-limited: more than 60 turn metrics a minute from this agent")
	if n := r.turnMetrics.refused.Load(); n != 2 {
		t.Fatalf("refusals counted %d, want 2", n)
	}
	wantPass(t, turnMetricRate(t.Context(), r, metric(pkMember))) // another agent has its own budget
	wantPass(t, turnMetricRate(t.Context(), r, wsIngest(ruleEvent(protocol.KindStreamMessage, pkAgent))))
	now.Add(59) // still the same minute
	wantRefusal(t, turnMetricRate(t.Context(), r, metric(pkAgent)), 429, "rate-limited: more than 60 turn metrics a minute from this agent")
	now.Add(1) // a new minute
	wantPass(t, turnMetricRate(t.Context(), r, metric(pkAgent)))
}

func TestRateBookForgetsEndedWindowsPastItsBound(t *testing.T) {
	b := newRateBook(2, time.Second)
	now := time.Unix(0, 0)
	for i := range maxRateKeys {
		b.allow(strconv.Itoa(i), now)
	}
	b.allow("busy", now.Add(time.Second)) // every other key's window has ended by then
	if n := len(b.keys); n != 1 {
		t.Fatalf("%d keys kept, want 1", n)
	}
}

// feedDown is a shared database whose change feed is down (the only method the rule asks).
type feedDown struct{ shared }

func (feedDown) Live() bool { return false }

func TestDatabaseLiveRefusesWritesWhileTheFeedIsDown(t *testing.T) {
	ev := wsIngest(ruleEvent(protocol.KindStreamMessage, pkMember, nostr.Tag{"h", testChannel}))
	wantPass(t, databaseLive(t.Context(), &Relay{}, ev))
	wantRefusal(t, databaseLive(t.Context(), &Relay{shared: feedDown{}}, ev),
		503, "error: relay lost its database connection; retry in a few seconds")
}

func TestCreateOutsideDMNamespaceRefusesAChannelWithADMsID(t *testing.T) {
	dmID := dmChannelID([]string{pkAgent, pkOwner})
	create := func(id string) *result {
		return createOutsideDMNamespace(t.Context(), nil, wsIngest(ruleEvent(protocol.KindCreateGroup, pkOutside, nostr.Tag{"h", id})))
	}
	wantRefusal(t, create(dmID), 400, "invalid: channel ids that are version-8 UUIDs are reserved for DMs (kind 41010)")
	wantPass(t, create(testChannel))
	wantPass(t, createOutsideDMNamespace(t.Context(), nil, wsIngest(ruleEvent(protocol.KindStreamMessage, pkOwner, nostr.Tag{"h", dmID}))))
}

func TestApplyAdminAnswersAdminEventsItselfAndPassesOthersOn(t *testing.T) {
	r := openTestRelay(t)
	wantPass(t, applyAdmin(t.Context(), r, wsIngest(ruleEvent(protocol.KindStreamMessage, pkMember, nostr.Tag{"h", testChannel}))))
	// Joining a channel that does not exist is the admin rules' refusal, answered here.
	join := ruleEvent(protocol.KindJoinRequest, pkMember, nostr.Tag{"h", testChannel})
	wantRefusal(t, applyAdmin(t.Context(), r, wsIngest(join)), 400, "invalid: unknown channel")
}

func TestApplyDMCommandRefusesAnAddToADMTheSignerIsNotIn(t *testing.T) {
	r := openTestRelay(t)
	wantPass(t, applyDMCommand(t.Context(), r, wsIngest(ruleEvent(protocol.KindStreamMessage, pkMember))))
	r.acl.put(store.Channel{ID: testChannel, Visibility: protocol.VisibilityPrivate, Type: protocol.TypeDM,
		Members: map[string]string{pkOwner: protocol.RoleMember, pkAgent: protocol.RoleMember}})
	add := ruleEvent(protocol.KindDMAddMember, pkMember, nostr.Tag{"h", testChannel}, nostr.Tag{"p", pkOutside})
	wantRefusal(t, applyDMCommand(t.Context(), r, wsIngest(add)), 400, "forbidden: not a member of this DM")
}

func TestWritableChannelRefusesUnknownArchivedAndForeignPrivateChannels(t *testing.T) {
	r := openTestRelay(t)
	members := map[string]string{pkOwner: protocol.RoleOwner}
	open := store.Channel{ID: testChannel, Visibility: protocol.VisibilityOpen, Members: members}
	private := store.Channel{ID: otherChannel, Visibility: protocol.VisibilityPrivate, Members: members}
	r.acl.put(open)
	r.acl.put(private)
	write := func(pubkey, ch string) *result {
		return writableChannel(t.Context(), r, wsIngest(ruleEvent(protocol.KindStreamMessage, pubkey, nostr.Tag{"h", ch})))
	}
	wantPass(t, write(pkOutside, testChannel))
	wantPass(t, write(pkOwner, otherChannel))
	wantRefusal(t, write(pkOutside, otherChannel), 400, "restricted: not a channel member")
	wantRefusal(t, write(pkOwner, "7d8e9f00-1111-4222-8333-444455556666"), 400, "invalid: unknown channel")
	// A profile is stored globally, but naming a private channel still needs the right to write there.
	profile := ruleEvent(protocol.KindProfile, pkOutside, nostr.Tag{"h", otherChannel})
	wantRefusal(t, writableChannel(t.Context(), r, wsIngest(profile)), 400, "restricted: not a channel member")
	wantPass(t, writableChannel(t.Context(), r, wsIngest(ruleEvent(protocol.KindProfile, pkOutside))))

	open.Archived = true
	r.acl.put(open)
	wantRefusal(t, write(pkOwner, testChannel), 400, "restricted: channel is archived")
	private.Deleted = true
	r.acl.put(private)
	wantRefusal(t, write(pkOwner, otherChannel), 400, "invalid: unknown channel")
	// A DM is unknown to anyone outside it: its id is computable from its participants.
	dm := dmChannelID([]string{pkAgent, pkOwner})
	r.acl.put(store.Channel{ID: dm, Visibility: protocol.VisibilityPrivate, Type: protocol.TypeDM,
		Members: map[string]string{pkOwner: protocol.RoleMember, pkAgent: protocol.RoleMember}})
	wantPass(t, write(pkAgent, dm))
	wantRefusal(t, write(pkOutside, dm), 400, "invalid: unknown channel")
}

func TestEditOfOwnMessageRefusesEditsOfOthersMessagesOrOfAnotherChannel(t *testing.T) {
	// Absent, elsewhere and someone else's get one answer: an edit is no existence oracle.
	const notYours = "invalid: edit target not found among your messages in this channel"
	r := openTestRelay(t)
	original := &nostr.Event{ID: strings.Repeat("2", 64), PubKey: pkMember, Kind: protocol.KindStreamMessage,
		CreatedAt: 1_700_000_000, Tags: nostr.Tags{{"h", testChannel}}, Sig: strings.Repeat("0", 128)}
	if err := r.st.Update(t.Context(), func(tx store.Tx) error { return tx.SaveEvent(original, testChannel) }); err != nil {
		t.Fatal(err)
	}
	edit := func(pubkey, ch, target string) *result {
		ev := ruleEvent(protocol.KindEdit, pubkey, nostr.Tag{"h", ch}, nostr.Tag{"e", target})
		return editOfOwnMessage(t.Context(), r, wsIngest(ev))
	}
	wantPass(t, edit(pkMember, testChannel, original.ID))
	wantRefusal(t, edit(pkOutside, testChannel, original.ID), 400, notYours)
	wantRefusal(t, edit(pkMember, otherChannel, original.ID), 400, notYours)
	wantRefusal(t, edit(pkMember, testChannel, strings.Repeat("3", 64)), 400, notYours)
	wantRefusal(t, edit(pkMember, testChannel, "short"), 400, "invalid: an edit needs an e tag naming the message")
	wantPass(t, editOfOwnMessage(t.Context(), r, wsIngest(ruleEvent(protocol.KindStreamMessage, pkOutside))))
}

func TestSystemRowByMemberRefusesNonMembersOfAnOpenChannel(t *testing.T) {
	r := openTestRelay(t)
	r.acl.put(store.Channel{ID: testChannel, Visibility: protocol.VisibilityOpen, Members: map[string]string{pkOwner: protocol.RoleOwner}})
	row := func(pubkey string) *result {
		return systemRowByMember(t.Context(), r, wsIngest(ruleEvent(protocol.KindSystemMessage, pubkey, nostr.Tag{"h", testChannel})))
	}
	wantPass(t, row(pkOwner))
	wantRefusal(t, row(pkOutside), 403, "restricted: only channel members may post system rows (kind 40099)")
}

func TestCanvasByMemberRefusesNonMembersOfAnOpenChannel(t *testing.T) {
	r := openTestRelay(t)
	r.acl.put(store.Channel{ID: testChannel, Visibility: protocol.VisibilityOpen, Members: map[string]string{pkOwner: protocol.RoleOwner}})
	canvas := func(pubkey string) *result {
		return canvasByMember(t.Context(), r, wsIngest(ruleEvent(protocol.KindCanvas, pubkey, nostr.Tag{"h", testChannel})))
	}
	wantPass(t, canvas(pkOwner))
	wantRefusal(t, canvas(pkOutside), 403, "restricted: only channel members may write the canvas (kind 40100)")
	wantPass(t, canvasByMember(t.Context(), r, wsIngest(ruleEvent(protocol.KindStreamMessage, pkOutside, nostr.Tag{"h", testChannel}))))
}

func TestCreatedAtNotAheadRefusesEventsDatedPastTheSkew(t *testing.T) {
	clk := clock.NewFake(time.Unix(2_000_000_000, 0))
	now := clk.Now()
	r := openTestRelayWith(t, Config{Now: clk.Now})
	at := func(ts time.Time) *result {
		ev := ruleEvent(protocol.KindStreamMessage, pkMember)
		ev.CreatedAt = nostr.Timestamp(ts.Unix())
		return createdAtNotAhead(t.Context(), r, wsIngest(ev))
	}
	wantPass(t, at(now.Add(DefaultMaxFutureSkew)))
	wantPass(t, at(now.Add(-365*24*time.Hour))) // the past is history (imports, backfills)
	wantRefusal(t, at(now.Add(DefaultMaxFutureSkew+time.Second)), 400, "invalid: created_at is more than 900 s in the future")
	off := openTestRelayWith(t, Config{Now: clk.Now, MaxFutureSkew: -1})
	far := ruleEvent(protocol.KindStreamMessage, pkMember)
	far.CreatedAt = nostr.Timestamp(now.AddDate(80, 0, 0).Unix())
	wantPass(t, createdAtNotAhead(t.Context(), off, wsIngest(far)))
}

func TestWriteRateRefusesAPubkeyPastItsBurstUntilItRefills(t *testing.T) {
	clk := clock.NewFake(time.Unix(2_000_000_000, 0))
	r := openTestRelayWith(t, Config{Now: clk.Now, MaxWritesPerSecond: 2})
	write := func(pk string) *result {
		return writeRate(t.Context(), r, wsIngest(ruleEvent(protocol.KindStreamMessage, pk)))
	}
	for range 20 { // bursts of 10× the rate
		wantPass(t, write(pkMember))
	}
	wantRefusal(t, write(pkMember), 429, "rate-limited: more than 2 events a second")
	wantPass(t, write(pkOwner))
	clk.Advance(500 * time.Millisecond)
	wantPass(t, write(pkMember))
}

func TestDMCommandRateRefusesAPubkeyPastItsMinute(t *testing.T) {
	clk := clock.NewFake(time.Unix(2_000_000_000, 0))
	r := openTestRelayWith(t, Config{Now: clk.Now, MaxDMOpensPerMinute: 3})
	open := func(kind int) *result {
		return dmCommandRate(t.Context(), r, wsIngest(ruleEvent(kind, pkMember, nostr.Tag{"p", pkAgent})))
	}
	wantPass(t, open(protocol.KindDMOpen))
	wantPass(t, open(protocol.KindDMAddMember))
	wantPass(t, open(protocol.KindDMOpen))
	wantRefusal(t, open(protocol.KindDMOpen), 429, "rate-limited: more than 3 DM opens a minute")
	wantPass(t, open(protocol.KindStreamMessage)) // other kinds are not DM commands
	clk.Advance(20 * time.Second)
	wantPass(t, open(protocol.KindDMOpen))
}

func TestFanOutEphemeralAnswersAnEphemeralEventWithoutStoringIt(t *testing.T) {
	r := openTestRelay(t)
	wantPass(t, fanOutEphemeral(t.Context(), r, wsIngest(ruleEvent(protocol.KindStreamMessage, pkMember, nostr.Tag{"h", testChannel}))))
	typing := ruleEvent(protocol.KindTyping, pkMember, nostr.Tag{"h", testChannel})
	got := fanOutEphemeral(t.Context(), r, wsIngest(typing))
	if got == nil || !got.OK || got.Msg != "" {
		t.Fatalf("got %+v, want accepted with no message", got)
	}
	if ev, _, err := r.st.Event(context.Background(), typing.ID); err != nil || ev != nil {
		t.Fatalf("stored %v (err %v), want nothing stored", ev, err)
	}
}

func TestCheckHandsAnEventThatPassesEveryRuleToTheStore(t *testing.T) {
	r := openTestRelay(t)
	r.acl.put(store.Channel{ID: testChannel, Visibility: protocol.VisibilityOpen, Members: map[string]string{}})
	sk := nostr.GeneratePrivateKey()
	ev := &nostr.Event{Kind: protocol.KindStreamMessage, CreatedAt: nostr.Now(), Tags: nostr.Tags{{"h", testChannel}}, Content: "hi"}
	if err := ev.Sign(sk); err != nil {
		t.Fatal(err)
	}
	res, w := r.check(t.Context(), newIngest(ev, protocol.CheckEvent(ev), fromBridge(ev.PubKey)))
	if w == nil || w.ev != ev || w.scope != testChannel {
		t.Fatalf("got %+v and write %+v, want the write of the event under its channel", res, w)
	}
}

// BenchmarkIngestRules is the rule chain's cost for a message into an open channel, signature
// check excluded (the events/s of the whole path: BenchmarkIngestWS).
func BenchmarkIngestRules(b *testing.B) {
	r := openTestRelayWith(b, Config{MaxWritesPerSecond: -1}) // one key, b.N events
	r.acl.put(store.Channel{ID: testChannel, Visibility: protocol.VisibilityOpen, Members: map[string]string{}})
	ev := &nostr.Event{Kind: protocol.KindStreamMessage, CreatedAt: nostr.Now(), Tags: nostr.Tags{{"h", testChannel}}, Content: "hi"}
	if err := ev.Sign(nostr.GeneratePrivateKey()); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for b.Loop() {
		if _, w := r.check(ctx, newIngest(ev, nil, fromWebSocket(ev.PubKey))); w == nil {
			b.Fatal("refused")
		}
	}
}
