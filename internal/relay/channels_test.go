package relay_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/relay/relaytest"
)

func TestRelayCreateChannelPublishesRelaySignedState(t *testing.T) {
	s := relaytest.Start(t)
	alice := newUser()
	ch := s.CreateChannel(t, alice.sk, "general", false)

	meta := latest(t, s, alice.sk, nostr.Filter{Kinds: []int{39000}, Tags: nostr.TagMap{"d": {ch}}})
	if meta.PubKey != s.Relay.PublicKey() {
		t.Fatalf("39000 signed by %s, want relay %s", meta.PubKey, s.Relay.PublicKey())
	}
	if ok, _ := meta.CheckSignature(); !ok {
		t.Fatal("39000 signature does not verify")
	}
	want := nostr.Tags{{"d", ch}, {"name", "general"}, {"public"}, {"closed"}, {"t", "stream"}}
	if !tagsEqual(meta.Tags, want) {
		t.Fatalf("39000 tags = %v, want %v", meta.Tags, want)
	}
	admins := latest(t, s, alice.sk, nostr.Filter{Kinds: []int{39001}, Tags: nostr.TagMap{"d": {ch}}})
	if !tagsEqual(admins.Tags, nostr.Tags{{"d", ch}, {"p", alice.pk, "owner"}}) {
		t.Fatalf("39001 tags = %v", admins.Tags)
	}
	members := latest(t, s, alice.sk, nostr.Filter{Kinds: []int{39002}, Tags: nostr.TagMap{"d": {ch}}})
	if !tagsEqual(members.Tags, nostr.Tags{{"d", ch}, {"p", alice.pk, "", "owner"}}) {
		t.Fatalf("39002 tags = %v", members.Tags)
	}
	sys := latest(t, s, alice.sk, nostr.Filter{Kinds: []int{40099}, Tags: nostr.TagMap{"h": {ch}}})
	var content map[string]string
	json.Unmarshal([]byte(sys.Content), &content)
	if content["type"] != "channel_created" || content["actor"] != alice.pk {
		t.Fatalf("40099 content = %s", sys.Content)
	}
}

func TestRelayPrivateChannelMetadataHasPrivateTag(t *testing.T) {
	s := relaytest.Start(t)
	alice := newUser()
	ch := s.CreateChannel(t, alice.sk, "secret", true)
	meta := latest(t, s, alice.sk, nostr.Filter{Kinds: []int{39000}, Tags: nostr.TagMap{"d": {ch}}})
	if m := protocol.ParseChannelMeta(meta); !m.Private || m.Name != "secret" {
		t.Fatalf("meta = %+v", m)
	}
}

func TestRelayHidesPrivateChannelFromNonMembers(t *testing.T) {
	s := relaytest.Start(t)
	alice, eve := newUser(), newUser()
	ch := s.CreateChannel(t, alice.sk, "secret", true)
	s.Publish(t, alice.sk, msg(ch, "classified"))

	for _, f := range []nostr.Filter{
		{Kinds: []int{9}, Tags: nostr.TagMap{"h": {ch}}},
		{Kinds: []int{39000, 39001, 39002}},
		{Kinds: []int{9}},
	} {
		if got := s.Query(t, eve.sk, f); len(got) != 0 {
			t.Errorf("non-member /query %v returned %d events", f, len(got))
		}
	}
	if got := s.Query(t, alice.sk, nostr.Filter{Kinds: []int{9}, Tags: nostr.TagMap{"h": {ch}}}); len(got) != 1 {
		t.Fatalf("member sees %d messages, want 1", len(got))
	}
	c := dialRaw(t, s.URL)
	c.mustAuth(eve.sk, s.URL)
	c.send("REQ", "p", map[string]any{"kinds": []int{9}, "#h": []string{ch}})
	if m := c.read(); m[0] != "CLOSED" || m[2] != "restricted: not a channel member" {
		t.Fatalf("non-member REQ: %v", m)
	}
}

func TestRelayRefusesNonMemberWriteToPrivateChannel(t *testing.T) {
	s := relaytest.Start(t)
	alice, eve := newUser(), newUser()
	ch := s.CreateChannel(t, alice.sk, "secret", true)
	status, res := s.TryPublish(t, eve.sk, ptr(msg(ch, "let me in")))
	if status != http.StatusBadRequest || res.Error != "restricted: not a channel member" {
		t.Fatalf("got %d %+v", status, res)
	}
}

func TestRelayAcceptsNonMemberWriteToOpenChannel(t *testing.T) {
	s := relaytest.Start(t)
	alice, bob := newUser(), newUser()
	ch := s.CreateChannel(t, alice.sk, "lobby", false)
	s.Publish(t, bob.sk, msg(ch, "hi all"))
}

func TestRelayRefusesMessageToUnknownChannel(t *testing.T) {
	s := relaytest.Start(t)
	status, res := s.TryPublish(t, newUser().sk, ptr(msg(uuid.NewString(), "anyone?")))
	if status != http.StatusBadRequest || res.Error != "invalid: unknown channel" {
		t.Fatalf("got %d %+v", status, res)
	}
}

func TestRelayNotifiesAddedMemberLive(t *testing.T) {
	s := sharedRelay
	alice, bob := newUser(), newUser()
	ch := s.CreateChannel(t, alice.sk, "team", true)
	rb := s.Connect(t, bob.sk)
	sub := subscribe(t, rb, nostr.Filter{Kinds: []int{44100, 44101}, Tags: nostr.TagMap{"p": {bob.pk}}})

	s.AddMember(t, alice.sk, ch, bob.pk, "member")
	got := nextEvent(t, sub)
	if got.Kind != 44100 || got.PubKey != s.Relay.PublicKey() || protocol.TagValue(got.Tags, "h") != ch {
		t.Fatalf("notice = %v", got)
	}
	var raw map[string]string
	json.Unmarshal([]byte(got.Content), &raw)
	if raw["type"] != "member_added" || raw["channel_id"] != ch || raw["actor"] != alice.pk {
		t.Fatalf("notice content = %s", got.Content)
	}
	// The new member can now read the private channel.
	if evs := s.Query(t, bob.sk, nostr.Filter{Kinds: []int{39002}, Tags: nostr.TagMap{"d": {ch}}}); len(evs) != 1 {
		t.Fatalf("member sees %d member lists, want 1", len(evs))
	}

	s.Publish(t, alice.sk, nostr.Event{Kind: protocol.KindRemoveUser, Tags: nostr.Tags{{"h", ch}, {"p", bob.pk}}})
	if got := nextEvent(t, sub); got.Kind != 44101 {
		t.Fatalf("after removal got kind %d, want 44101", got.Kind)
	}
}

func TestRelayRefusesMembershipNoticeSubWithoutOwnPTag(t *testing.T) {
	s := relaytest.Start(t)
	bob := newUser()
	c := dialRaw(t, s.URL)
	c.mustAuth(bob.sk, s.URL)
	c.send("REQ", "n", map[string]any{"kinds": []int{44100}, "#p": []string{newUser().pk}})
	if m := c.read(); m[0] != "CLOSED" || !hasPrefix(m[2], "restricted:") {
		t.Fatalf("got %v, want CLOSED restricted:", m)
	}
	status, body := s.Post(t, bob.sk, "/query", []byte(`[{"kinds":[44100]}]`))
	if status != http.StatusForbidden {
		t.Fatalf("/query without #p: %d %s", status, body)
	}
}

func TestRelayLiveFanOutRechecksMembershipAtSendTime(t *testing.T) {
	s := sharedRelay
	alice, bob := newUser(), newUser()
	secret := s.CreateChannel(t, alice.sk, "secret", true)
	lobby := s.CreateChannel(t, alice.sk, "lobby", false)
	s.AddMember(t, alice.sk, secret, bob.pk, "member")

	// A global kind-9 sub: not scoped to the channel, so only the send-time check protects it.
	rb := s.Connect(t, bob.sk)
	sub := subscribe(t, rb, nostr.Filter{Kinds: []int{9}, Authors: []string{alice.pk}})
	s.Publish(t, alice.sk, msg(secret, "while a member"))
	if got := nextEvent(t, sub); got.Content != "while a member" {
		t.Fatalf("got %q", got.Content)
	}
	s.Publish(t, alice.sk, nostr.Event{Kind: protocol.KindRemoveUser, Tags: nostr.Tags{{"h", secret}, {"p", bob.pk}}})
	s.Publish(t, alice.sk, msg(secret, "after removal"))
	s.Publish(t, alice.sk, msg(lobby, "marker"))
	if got := nextEvent(t, sub); got.Content != "marker" {
		t.Fatalf("removed member received %q", got.Content)
	}
}

func TestRelayClosesChannelSubOnRemovalFromPrivateChannel(t *testing.T) {
	s := relaytest.Start(t)
	alice, bob := newUser(), newUser()
	ch := s.CreateChannel(t, alice.sk, "secret", true)
	s.AddMember(t, alice.sk, ch, bob.pk, "member")
	c := dialRaw(t, s.URL)
	c.mustAuth(bob.sk, s.URL)
	c.send("REQ", "ch", map[string]any{"kinds": []int{9}, "#h": []string{ch}})
	c.readUntil("EOSE")
	s.Publish(t, alice.sk, nostr.Event{Kind: protocol.KindRemoveUser, Tags: nostr.Tags{{"h", ch}, {"p", bob.pk}}})
	if m := c.readUntil("CLOSED"); m[1] != "ch" || m[2] != "restricted: channel access revoked" {
		t.Fatalf("got %v", m)
	}
}

func TestRelayJoinWorksForOpenChannelsOnly(t *testing.T) {
	s := relaytest.Start(t)
	alice, bob := newUser(), newUser()
	open := s.CreateChannel(t, alice.sk, "open", false)
	private := s.CreateChannel(t, alice.sk, "private", true)
	s.Publish(t, bob.sk, nostr.Event{Kind: protocol.KindJoinRequest, Tags: nostr.Tags{{"h", open}}})
	members := latest(t, s, bob.sk, nostr.Filter{Kinds: []int{39002}, Tags: nostr.TagMap{"d": {open}}})
	if !slices.ContainsFunc(protocol.ParseMembers(members), func(m protocol.Member) bool { return m.Pubkey == bob.pk && m.Role == "member" }) {
		t.Fatalf("joined member missing from 39002: %v", members.Tags)
	}
	status, res := s.TryPublish(t, bob.sk, &nostr.Event{Kind: protocol.KindJoinRequest, Tags: nostr.Tags{{"h", private}}})
	if status != http.StatusBadRequest || !hasPrefix(res.Error, "restricted:") {
		t.Fatalf("join private: %d %+v", status, res)
	}
}

func TestRelayLeaveRemovesMemberButNotLastOwner(t *testing.T) {
	s := relaytest.Start(t)
	alice, bob := newUser(), newUser()
	ch := s.CreateChannel(t, alice.sk, "open", false)
	s.Publish(t, bob.sk, nostr.Event{Kind: protocol.KindJoinRequest, Tags: nostr.Tags{{"h", ch}}})
	s.Publish(t, bob.sk, nostr.Event{Kind: protocol.KindLeaveRequest, Tags: nostr.Tags{{"h", ch}}})
	members := latest(t, s, alice.sk, nostr.Filter{Kinds: []int{39002}, Tags: nostr.TagMap{"d": {ch}}})
	if len(protocol.ParseMembers(members)) != 1 {
		t.Fatalf("members after leave: %v", members.Tags)
	}
	status, res := s.TryPublish(t, alice.sk, &nostr.Event{Kind: protocol.KindLeaveRequest, Tags: nostr.Tags{{"h", ch}}})
	if status != http.StatusBadRequest || !hasPrefix(res.Error, "restricted:") {
		t.Fatalf("last owner leaving: %d %+v", status, res)
	}
}

func TestRelayOnlyManagersAddToPrivateChannel(t *testing.T) {
	s := relaytest.Start(t)
	alice, bob, carol := newUser(), newUser(), newUser()
	ch := s.CreateChannel(t, alice.sk, "secret", true)
	s.AddMember(t, alice.sk, ch, bob.pk, "member")
	status, res := s.TryPublish(t, bob.sk, &nostr.Event{Kind: protocol.KindPutUser, Tags: nostr.Tags{{"h", ch}, {"p", carol.pk}}})
	if status != http.StatusBadRequest || !hasPrefix(res.Error, "restricted:") {
		t.Fatalf("member adding to private: %d %+v", status, res)
	}
}

func TestRelayStateEventsGetStrictlyIncreasingCreatedAt(t *testing.T) {
	s := relaytest.Start(t)
	alice := newUser()
	ch := s.CreateChannel(t, alice.sk, "busy", false)
	var added []string
	for i := 0; i < 5; i++ {
		u := newUser()
		added = append(added, u.pk)
		s.AddMember(t, alice.sk, ch, u.pk, "member") // several within the same second
	}
	members := latest(t, s, alice.sk, nostr.Filter{Kinds: []int{39002}, Tags: nostr.TagMap{"d": {ch}}})
	// Same-second lists must not tie: the newest one has to be the one naming all five.
	listed := map[string]bool{}
	for _, m := range protocol.ParseMembers(members) {
		listed[m.Pubkey] = true
	}
	if len(listed) != 6 || !listed[alice.pk] {
		t.Fatalf("latest 39002 lists %d members (owner listed: %v), want the owner and 5 added: %v", len(listed), listed[alice.pk], members.Tags)
	}
	for _, pk := range added {
		if !listed[pk] {
			t.Fatalf("latest 39002 misses added member %s: %v", pk, members.Tags)
		}
	}
	sys := s.Query(t, alice.sk, nostr.Filter{Kinds: []int{40099}, Tags: nostr.TagMap{"h": {ch}}})
	for i := 1; i < len(sys); i++ {
		if sys[i].CreatedAt >= sys[i-1].CreatedAt {
			t.Fatalf("40099 created_at not strictly increasing: %d then %d", sys[i].CreatedAt, sys[i-1].CreatedAt)
		}
	}
	if len(sys) != 6 {
		t.Fatalf("%d system messages, want 6", len(sys))
	}
}

func TestRelayEditMetadataNeedsManagerForName(t *testing.T) {
	s := relaytest.Start(t)
	alice, bob := newUser(), newUser()
	ch := s.CreateChannel(t, alice.sk, "old", false)
	s.Publish(t, bob.sk, nostr.Event{Kind: protocol.KindJoinRequest, Tags: nostr.Tags{{"h", ch}}})
	status, res := s.TryPublish(t, bob.sk, &nostr.Event{Kind: protocol.KindEditMetadata, Tags: nostr.Tags{{"h", ch}, {"name", "mine"}}})
	if status != http.StatusBadRequest || !hasPrefix(res.Error, "restricted:") {
		t.Fatalf("member renaming: %d %+v", status, res)
	}
	s.Publish(t, bob.sk, nostr.Event{Kind: protocol.KindEditMetadata, Tags: nostr.Tags{{"h", ch}, {"topic", "releases"}}})
	s.Publish(t, alice.sk, nostr.Event{Kind: protocol.KindEditMetadata, Tags: nostr.Tags{{"h", ch}, {"name", "new"}}})
	m := protocol.ParseChannelMeta(latest(t, s, alice.sk, nostr.Filter{Kinds: []int{39000}, Tags: nostr.TagMap{"d": {ch}}}))
	if m.Name != "new" || m.Topic != "releases" {
		t.Fatalf("meta = %+v", m)
	}
}

func TestRelayDeleteMessageByOwnerSoftDeletes(t *testing.T) {
	s := relaytest.Start(t)
	alice, bob := newUser(), newUser()
	ch := s.CreateChannel(t, alice.sk, "open", false)
	m := msg(ch, "oops")
	s.Publish(t, bob.sk, m)
	target := s.Query(t, alice.sk, nostr.Filter{Kinds: []int{9}, Tags: nostr.TagMap{"h": {ch}}})[0].ID
	s.Publish(t, alice.sk, nostr.Event{Kind: protocol.KindDeleteEvent, Tags: nostr.Tags{{"h", ch}, {"e", target}}})
	if got := s.Query(t, alice.sk, nostr.Filter{IDs: []string{target}}); len(got) != 0 {
		t.Fatal("deleted message still returned")
	}
}

func TestRelayKind5DeletesOnlyAuthorsOwnEvents(t *testing.T) {
	s := relaytest.Start(t)
	alice, bob := newUser(), newUser()
	ch := s.CreateChannel(t, alice.sk, "open", false)
	s.Publish(t, alice.sk, msg(ch, "alice's"))
	s.Publish(t, bob.sk, msg(ch, "bob's"))
	all := s.Query(t, alice.sk, nostr.Filter{Kinds: []int{9}, Tags: nostr.TagMap{"h": {ch}}})
	var ids []string
	for _, e := range all {
		ids = append(ids, e.ID)
	}
	del := nostr.Event{Kind: 5, Tags: nostr.Tags{{"h", ch}}}
	for _, id := range ids {
		del.Tags = append(del.Tags, nostr.Tag{"e", id})
	}
	s.Publish(t, bob.sk, del)
	left := s.Query(t, alice.sk, nostr.Filter{Kinds: []int{9}, Tags: nostr.TagMap{"h": {ch}}})
	if len(left) != 1 || left[0].PubKey != alice.pk {
		t.Fatalf("after bob's kind 5: %v", left)
	}
}

func TestRelayKind5IgnoresBareETagsAndKeysThatOnlyStartWithE(t *testing.T) {
	s := relaytest.Start(t)
	alice := newUser()
	ch := s.CreateChannel(t, alice.sk, "open", false)
	s.Publish(t, alice.sk, msg(ch, "keep me"))
	own := s.Query(t, alice.sk, nostr.Filter{Kinds: []int{9}, Tags: nostr.TagMap{"h": {ch}}})[0].ID
	status, res := s.TryPublish(t, alice.sk, &nostr.Event{Kind: 5, Tags: nostr.Tags{{"h", ch}, {"e"}, {"emoji", own}}})
	if status != http.StatusOK || !res.Accepted {
		t.Fatalf("kind 5 with a bare e tag: %d %+v", status, res)
	}
	if left := s.Query(t, alice.sk, nostr.Filter{IDs: []string{own}}); len(left) != 1 {
		t.Fatal("a tag whose key only starts with e deleted the message")
	}
}

func TestRelayReplaceableProfileKeepsNewest(t *testing.T) {
	s := relaytest.Start(t)
	u := newUser()
	now := nostr.Now()
	s.Publish(t, u.sk, nostr.Event{Kind: 0, Content: `{"name":"old"}`, CreatedAt: now - 10})
	s.Publish(t, u.sk, nostr.Event{Kind: 0, Content: `{"name":"new"}`, CreatedAt: now})
	status, res := s.TryPublish(t, u.sk, &nostr.Event{Kind: 0, Content: `{"name":"older"}`, CreatedAt: now - 20})
	if status != http.StatusOK || !hasPrefix(res.Message, "duplicate:") {
		t.Fatalf("stale profile: %d %+v", status, res)
	}
	got := s.Query(t, u.sk, nostr.Filter{Kinds: []int{0}, Authors: []string{u.pk}})
	if len(got) != 1 || got[0].Content != `{"name":"new"}` {
		t.Fatalf("profiles = %v", got)
	}
}

func TestRelayKeepsKeyAndDataAcrossRestart(t *testing.T) {
	s := relaytest.Start(t)
	alice := newUser()
	ch := s.CreateChannel(t, alice.sk, "durable", true)
	pk := s.Relay.PublicKey()
	url := s.URL
	s.Restart(t)
	if s.Relay.PublicKey() != pk || s.URL != url {
		t.Fatalf("after restart: key %s (was %s), url %s (was %s)", s.Relay.PublicKey(), pk, s.URL, url)
	}
	// Channel state survives: a new member can be added and the state chain continues.
	bob := newUser()
	s.AddMember(t, alice.sk, ch, bob.pk, "member")
	meta := latest(t, s, bob.sk, nostr.Filter{Kinds: []int{39000}, Tags: nostr.TagMap{"d": {ch}}})
	if ok, _ := meta.CheckSignature(); !ok || meta.PubKey != pk {
		t.Fatalf("39000 after restart: signer %s", meta.PubKey)
	}
	if members := protocol.ParseMembers(latest(t, s, bob.sk, nostr.Filter{Kinds: []int{39002}, Tags: nostr.TagMap{"d": {ch}}})); len(members) != 2 {
		t.Fatalf("members after restart = %v", members)
	}
}

func TestRelayWSPublishOfAdminEventWorks(t *testing.T) {
	s := sharedRelay
	alice := newUser()
	r := s.Connect(t, alice.sk)
	id := uuid.NewString()
	ev := nostr.Event{Kind: protocol.KindCreateGroup, CreatedAt: nostr.Now(), Tags: nostr.Tags{{"h", id}, {"name", "ws-made"}}}
	ev.Sign(alice.sk)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.Publish(ctx, ev); err != nil {
		t.Fatalf("publish 9007 over WS: %v", err)
	}
	m := protocol.ParseChannelMeta(latest(t, s, alice.sk, nostr.Filter{Kinds: []int{39000}, Tags: nostr.TagMap{"d": {id}}}))
	if m.Name != "ws-made" || m.Private {
		t.Fatalf("meta = %+v", m)
	}
}

func tagsEqual(a, b nostr.Tags) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !slices.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

func ptr[T any](v T) *T { return &v }
