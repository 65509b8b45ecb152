package cli_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/relay/relaytest"
	"github.com/nbd-wtf/go-nostr"
)

const unknownChannel = "11111111-2222-4333-8444-555555555555"

var unknownEvent = strings.Repeat("ab", 32)

func TestBinaryUnknownIDsAreNotFoundWithExitOneEverywhere(t *testing.T) {
	t.Parallel()
	s := relaytest.Start(t)
	alice, mallory := newUser(t, s.URL), newUser(t, s.URL)
	private := alice.createChannel("secret", true)
	for _, args := range [][]string{
		{"messages", "get", "--channel", unknownChannel},
		{"messages", "send", "--channel", unknownChannel, "--content", "hello?"},
		{"messages", "thread", "--channel", unknownChannel, "--event", unknownEvent},
		{"messages", "edit", "--event", unknownEvent, "--content", "x"},
		{"messages", "delete", "--event", unknownEvent},
		{"channels", "get", "--channel", unknownChannel},
		{"channels", "members", "--channel", unknownChannel},
		{"channels", "topic", "--channel", unknownChannel, "--topic", "t"},
		{"canvas", "get", "--channel", unknownChannel},
		{"canvas", "set", "--channel", unknownChannel, "--content", "plan"},
		{"reactions", "add", "--event", unknownEvent},
		{"reactions", "list", "--event", unknownEvent},
		{"reactions", "remove", "--event", unknownEvent},
		{"dms", "send", "--channel", unknownChannel, "--content", "hi"},
		// A private channel is unknown to someone who may not read it.
		{"messages", "get", "--channel", private},
		{"channels", "get", "--channel", private},
	} {
		if e := mallory.fails(1, args...); e.Error != "not_found" {
			t.Errorf("buzz %v: %+v, want not_found", args, e)
		}
	}
}

func TestBinaryMessagesSearchFindsWordsAcrossChannelsAndByAuthor(t *testing.T) {
	t.Parallel()
	s := relaytest.Start(t)
	alice, bob := newUser(t, s.URL), newUser(t, s.URL)
	bob.ok(nil, "", "users", "set-profile", "--name", "Bob Builder")
	one, two := alice.createChannel("one", false), alice.createChannel("two", false)
	alice.ok(nil, "", "messages", "send", "--channel", one, "--content", "the honey harvest is ready")
	bob.ok(nil, "", "messages", "send", "--channel", two, "--content", "more honey in the second channel")
	bob.ok(nil, "", "messages", "send", "--channel", two, "--content", "unrelated words")

	var hits []msg
	alice.ok(&hits, "", "messages", "search", "--query", "honey")
	if len(hits) != 2 {
		t.Fatalf("search honey = %+v, want the two honey messages", hits)
	}
	alice.ok(&hits, "", "messages", "search", "--author", "Bob Builder")
	if len(hits) != 2 || hits[0].Pubkey != bob.pk || hits[1].Pubkey != bob.pk || hits[0].CreatedAt < hits[1].CreatedAt {
		t.Fatalf("search by author name = %+v, want bob's two, newest first", hits)
	}
	alice.ok(&hits, "", "messages", "search", "--query", "honey", "--author", protocol.Npub(alice.pk))
	if len(hits) != 1 || hits[0].Pubkey != alice.pk {
		t.Fatalf("search honey by alice = %+v", hits)
	}
	if e := alice.fails(1, "messages", "search"); e.Error != "user_error" {
		t.Fatalf("search without query or author: %+v", e)
	}
	if e := alice.fails(1, "messages", "search", "--author", "Nobody Here"); e.Error != "not_found" {
		t.Fatalf("search by unknown name: %+v", e)
	}
}

func TestBinaryMessagesEditIsTheAuthorsOnly(t *testing.T) {
	t.Parallel()
	s := relaytest.Start(t)
	alice, bob := newUser(t, s.URL), newUser(t, s.URL)
	ch := alice.createChannel("edits", false)
	var m, ed sent
	alice.ok(&m, "", "messages", "send", "--channel", ch, "--content", "teh plan")
	alice.ok(&ed, "the plan\n", "messages", "edit", "--event", m.EventID, "--content", "-")
	evs := s.Query(t, alice.sk, nostr.Filter{IDs: []string{ed.EventID}})
	if len(evs) != 1 || evs[0].Kind != protocol.KindEdit || evs[0].Content != "the plan\n" ||
		protocol.TagValue(evs[0].Tags, "e") != m.EventID || protocol.TagValue(evs[0].Tags, "h") != ch {
		t.Fatalf("edit event = %+v", evs)
	}
	if e := bob.fails(1, "messages", "edit", "--event", m.EventID, "--content", "hijacked"); e.Error != "user_error" {
		t.Fatalf("bob edits alice's message: %+v", e)
	}
	// The relay enforces it too, for clients that do not check.
	forged := &nostr.Event{Kind: protocol.KindEdit, Content: "hijacked", Tags: nostr.Tags{{"h", ch}, {"e", m.EventID}}}
	if status, res := s.TryPublish(t, bob.sk, forged); status == 200 && res.Accepted || !strings.Contains(res.Error+res.Message, "not found among your messages") {
		t.Fatalf("relay took bob's edit of alice's message: %d %+v", status, res)
	}
}

func TestBinaryMessagesDeleteHidesTheMessageAndNeedsAuthorOrAdmin(t *testing.T) {
	t.Parallel()
	s := relaytest.Start(t)
	alice, bob := newUser(t, s.URL), newUser(t, s.URL)
	ch := alice.createChannel("cleanup", false)
	bob.ok(nil, "", "channels", "join", "--channel", ch)
	var a1, a2 sent
	alice.ok(&a1, "", "messages", "send", "--channel", ch, "--content", "oops")
	alice.ok(&a2, "", "messages", "send", "--channel", ch, "--content", "keep")
	if e := bob.fails(2, "messages", "delete", "--event", a1.EventID); !strings.Contains(e.Message, "restricted") {
		t.Fatalf("bob deletes alice's message: %+v", e)
	}
	alice.ok(nil, "", "messages", "delete", "--event", a1.EventID, "--reason-code", "typo")
	var got []msg
	bob.ok(&got, "", "messages", "get", "--channel", ch)
	if len(got) != 1 || got[0].ID != a2.EventID {
		t.Fatalf("after delete = %+v, want only the kept message", got)
	}
}

type reactionList struct {
	Reactions []struct {
		Emoji   string   `json:"emoji"`
		Count   int      `json:"count"`
		Pubkeys []string `json:"pubkeys"`
	} `json:"reactions"`
}

func TestBinaryReactionsListCountsPerEmojiAndRemoveTakesOneBack(t *testing.T) {
	t.Parallel()
	s := relaytest.Start(t)
	alice, bob := newUser(t, s.URL), newUser(t, s.URL)
	ch := alice.createChannel("emoji", false)
	var m sent
	alice.ok(&m, "", "messages", "send", "--channel", ch, "--content", "ship it")
	alice.ok(nil, "", "reactions", "add", "--event", m.EventID, "--emoji", "🚀")
	bob.ok(nil, "", "reactions", "add", "--event", m.EventID, "--emoji", "🚀")
	bob.ok(nil, "", "reactions", "add", "--event", m.EventID)

	var l reactionList
	alice.ok(&l, "", "reactions", "list", "--event", m.EventID)
	if len(l.Reactions) != 2 || l.Reactions[0].Emoji != "+" || l.Reactions[0].Count != 1 ||
		l.Reactions[1].Emoji != "🚀" || l.Reactions[1].Count != 2 || !slices.Contains(l.Reactions[1].Pubkeys, bob.pk) {
		t.Fatalf("reactions = %+v", l)
	}
	bob.ok(nil, "", "reactions", "remove", "--event", m.EventID, "--emoji", "🚀")
	alice.ok(&l, "", "reactions", "get", "--event", m.EventID) // upstream's name
	if len(l.Reactions) != 2 || l.Reactions[1].Count != 1 || l.Reactions[1].Pubkeys[0] != alice.pk {
		t.Fatalf("after bob's remove = %+v", l)
	}
	if e := bob.fails(1, "reactions", "remove", "--event", m.EventID, "--emoji", "🚀"); e.Error != "not_found" {
		t.Fatalf("removing a reaction twice: %+v", e)
	}
}

func TestBinaryChannelsTopicPurposeAndArchive(t *testing.T) {
	t.Parallel()
	s := relaytest.Start(t)
	alice, bob := newUser(t, s.URL), newUser(t, s.URL)
	ch := alice.createChannel("meta", false)
	bob.ok(nil, "", "channels", "join", "--channel", ch)
	bob.ok(nil, "", "channels", "topic", "--channel", ch, "--topic", "release week")
	alice.ok(nil, "", "channels", "purpose", "--channel", ch, "--purpose", "ship 1.0")
	var info map[string]any
	alice.ok(&info, "", "channels", "get", "--channel", ch)
	if info["topic"] != "release week" || info["purpose"] != "ship 1.0" {
		t.Fatalf("channels get = %v", info)
	}
	if e := bob.fails(2, "channels", "archive", "--channel", ch); !strings.Contains(e.Message, "owners and admins") {
		t.Fatalf("member archives: %+v", e)
	}
	alice.ok(nil, "", "channels", "archive", "--channel", ch)
	alice.ok(&info, "", "channels", "get", "--channel", ch)
	if info["archived"] != true {
		t.Fatalf("after archive = %v", info)
	}
	if e := bob.fails(2, "messages", "send", "--channel", ch, "--content", "anyone?"); !strings.Contains(e.Message, "archived") {
		t.Fatalf("send to archived channel: %+v", e)
	}
	alice.ok(nil, "", "channels", "unarchive", "--channel", ch)
	bob.ok(nil, "", "messages", "send", "--channel", ch, "--content", "back")
}

type feedEntry struct {
	ID       string     `json:"id"`
	Pubkey   string     `json:"pubkey"`
	Content  string     `json:"content"`
	Tags     nostr.Tags `json:"tags"`
	FeedType string     `json:"feed_type"`
}

func TestBinaryFeedPutsUnansweredMentionsUnderNeedsAction(t *testing.T) {
	t.Parallel()
	s := relaytest.Start(t)
	alice, agent := newUser(t, s.URL), newUser(t, s.URL)
	ch := alice.createChannel("work", false)
	agent.ok(nil, "", "channels", "join", "--channel", ch)
	var answered, open sent
	alice.ok(&answered, "", "messages", "send", "--channel", ch, "--content", "please build", "--mention", agent.pk)
	alice.ok(&open, "", "messages", "send", "--channel", ch, "--content", "please test", "--mention", agent.pk)
	alice.ok(nil, "", "messages", "send", "--channel", ch, "--content", "chatter, no mention")
	agent.ok(nil, "", "messages", "send", "--channel", ch, "--content", "built", "--reply-to", answered.EventID)

	var feed []feedEntry
	agent.ok(&feed, "", "feed", "get")
	types := map[string]string{}
	for _, f := range feed {
		types[f.ID] = f.FeedType
	}
	if len(feed) != 2 || types[open.EventID] != "needs_action" || types[answered.EventID] != "mentions" {
		t.Fatalf("feed = %+v, want the open request as needs_action and the answered one as mentions", feed)
	}
	agent.ok(&feed, "", "feed", "get", "--types", "needs_action")
	if len(feed) != 1 || feed[0].ID != open.EventID || protocol.TagValue(feed[0].Tags, "h") != ch {
		t.Fatalf("needs_action feed = %+v", feed)
	}
	agent.ok(&feed, "", "feed", "get", "--types", "activity")
	if len(feed) != 4 {
		t.Fatalf("activity feed = %+v, want all four messages", feed)
	}
	agent.ok(&feed, "", "feed", "get", "--since", "4102444800") // 2100-01-01
	if len(feed) != 0 {
		t.Fatalf("feed since the future = %+v", feed)
	}
	if e := agent.fails(1, "feed", "get", "--types", "gossip"); e.Error != "user_error" {
		t.Fatalf("bad feed type: %+v", e)
	}
}

type dmOpened struct {
	EventID  string `json:"event_id"`
	Accepted bool   `json:"accepted"`
	Message  string `json:"message"`
	DMID     string `json:"dm_id"`
	Created  bool   `json:"created"`
}

type dmListed struct {
	DMID         string   `json:"dm_id"`
	Participants []string `json:"participants"`
}

func TestBinaryDMsOpenOnceListForParticipantsAndStayPrivate(t *testing.T) {
	t.Parallel()
	s := relaytest.Start(t)
	alice, bob, carol := newUser(t, s.URL), newUser(t, s.URL), newUser(t, s.URL)
	var first, again, fromBob dmOpened
	alice.ok(&first, "", "dms", "open", "--pubkey", bob.pk)
	alice.ok(&again, "", "dms", "open", "--pubkey", protocol.Npub(bob.pk))
	bob.ok(&fromBob, "", "dms", "open", "--pubkey", alice.pk)
	if !first.Created || !protocol.IsUUID(first.DMID) || again.Created || again.DMID != first.DMID || fromBob.DMID != first.DMID {
		t.Fatalf("opens = %+v / %+v / %+v, want one DM created once", first, again, fromBob)
	}
	var group dmOpened
	alice.ok(&group, "", "dms", "open", "--pubkey", bob.pk, "--pubkey", carol.pk)
	if group.DMID == first.DMID || !group.Created {
		t.Fatalf("group DM = %+v", group)
	}

	var bobs, carols []dmListed
	bob.ok(&bobs, "", "dms", "list")
	carol.ok(&carols, "", "dms", "list")
	if len(bobs) != 2 || len(carols) != 1 || carols[0].DMID != group.DMID || len(carols[0].Participants) != 3 {
		t.Fatalf("bob's DMs %+v, carol's %+v", bobs, carols)
	}

	var m sent
	alice.ok(&m, "", "dms", "send", "--pubkey", bob.pk, "--content", "psst")
	var got []msg
	bob.ok(&got, "", "messages", "get", "--channel", first.DMID)
	if len(got) != 1 || got[0].ID != m.EventID || !protocol.Mentioned(got[0].Tags, bob.pk) {
		t.Fatalf("bob reads the DM = %+v, want alice's message p-tagging him", got)
	}
	bob.ok(nil, "", "dms", "send", "--channel", first.DMID, "--content", "hi back", "--reply-to", m.EventID)

	// Outsiders neither read nor write, and cannot join: to them the DM does not exist (its id
	// is computable, so any other answer would tell who has a DM with whom).
	if e := carol.fails(1, "messages", "get", "--channel", first.DMID); e.Error != "not_found" {
		t.Fatalf("carol reads alice+bob's DM: %+v", e)
	}
	if e := carol.fails(1, "messages", "send", "--channel", first.DMID, "--content", "me too"); e.Error != "not_found" {
		t.Fatalf("carol writes to alice+bob's DM: %+v", e)
	}
	carol.fails(1, "channels", "join", "--channel", first.DMID)

	var trio struct {
		Accepted bool   `json:"accepted"`
		DMID     string `json:"dm_id"`
	}
	bob.ok(&trio, "", "dms", "add-member", "--channel", first.DMID, "--pubkey", carol.pk)
	if !trio.Accepted || trio.DMID != group.DMID {
		t.Fatalf("add-member = %+v, want the existing three-person DM %s", trio, group.DMID)
	}

	general := alice.createChannel("general", false)
	if e := alice.fails(1, "dms", "send", "--channel", general, "--content", "x"); e.Error != "user_error" {
		t.Fatalf("dms send to a stream channel: %+v", e)
	}
	if e := alice.fails(1, "dms", "open"); e.Error != "user_error" {
		t.Fatalf("dms open without --pubkey: %+v", e)
	}
}

// setPresence publishes kind 20001 as u over a WebSocket (the bridge refuses ephemeral kinds),
// answering the relay's AUTH challenge first.
func (u *user) setPresence(status string) {
	u.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, u.relay, nil)
	if err != nil {
		u.t.Fatal(err)
	}
	defer ws.CloseNow()
	read := func(label string) []any {
		for {
			_, b, err := ws.Read(ctx)
			if err != nil {
				u.t.Fatalf("read: %v", err)
			}
			var m []any
			if json.Unmarshal(b, &m) == nil && len(m) > 1 && m[0] == label {
				return m
			}
		}
	}
	send := func(v ...any) {
		b, _ := json.Marshal(v)
		if err := ws.Write(ctx, websocket.MessageText, b); err != nil {
			u.t.Fatal(err)
		}
	}
	challenge := read("AUTH")[1].(string)
	auth, err := protocol.NewAuthEvent(u.sk, u.relay, challenge, time.Now())
	if err != nil {
		u.t.Fatal(err)
	}
	send("AUTH", auth)
	if ok := read("OK"); ok[2] != true {
		u.t.Fatalf("AUTH refused: %v", ok)
	}
	ev := nostr.Event{Kind: protocol.KindPresence, Content: status, CreatedAt: nostr.Now(), Tags: nostr.Tags{}}
	_ = ev.Sign(u.sk)
	send("EVENT", ev)
	if ok := read("OK"); ok[2] != true {
		u.t.Fatalf("presence refused: %v", ok)
	}
}

func TestBinaryUsersPresenceListsOnlineAndAwayAndOmitsOffline(t *testing.T) {
	t.Parallel()
	s := relaytest.Start(t)
	alice, bob, carol := newUser(t, s.URL), newUser(t, s.URL), newUser(t, s.URL)
	bob.setPresence("online")
	carol.setPresence("away")
	var got []struct {
		Pubkey    string `json:"pubkey"`
		Status    string `json:"status"`
		UpdatedAt int64  `json:"updated_at"`
	}
	alice.ok(&got, "", "users", "presence", "--pubkeys", bob.pk+","+protocol.Npub(carol.pk)+","+alice.pk)
	status := map[string]string{}
	for _, p := range got {
		status[p.Pubkey] = p.Status
	}
	if len(got) != 2 || status[bob.pk] != "online" || status[carol.pk] != "away" || got[0].UpdatedAt == 0 {
		t.Fatalf("presence = %+v, want bob online and carol away (alice absent: offline)", got)
	}
	bob.setPresence("offline")
	alice.ok(&got, "", "users", "presence", "--pubkeys", bob.pk)
	if len(got) != 0 {
		t.Fatalf("after bob went offline = %+v", got)
	}
	if e := alice.fails(1, "users", "presence", "--pubkeys", "bob"); e.Error != "user_error" {
		t.Fatalf("bad pubkey: %+v", e)
	}
}
