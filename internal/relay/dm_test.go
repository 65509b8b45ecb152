package relay_test

import (
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
)

// openDM publishes a 41010 from u naming others and returns the relay's channel id and created flag.
func openDM(t *testing.T, u user, others ...string) (string, bool) {
	t.Helper()
	tags := nostr.Tags{{"d", uuid.NewString()}} // as the CLI does: each open is its own event
	for _, pk := range others {
		tags = append(tags, nostr.Tag{"p", pk})
	}
	status, res := sharedRelay.TryPublish(t, u.sk, &nostr.Event{Kind: protocol.KindDMOpen, Tags: tags})
	body, ok := strings.CutPrefix(res.Message, "response:")
	var reply struct {
		ChannelID string `json:"channel_id"`
		Created   *bool  `json:"created"`
	}
	if status != 200 || !res.Accepted || !ok || json.Unmarshal([]byte(body), &reply) != nil || !protocol.IsUUID(reply.ChannelID) || reply.Created == nil {
		t.Fatalf("DM open: %d %+v", status, res)
	}
	return reply.ChannelID, *reply.Created
}

func TestDMOpenCreatesOnePrivateDMChannelPerParticipantSet(t *testing.T) {
	alice, bob := newUser(), newUser()
	id, created := openDM(t, alice, bob.pk)
	again, createdAgain := openDM(t, bob, strings.ToUpper(alice.pk), alice.pk) // either case, duplicates folded
	if !created || createdAgain || again != id {
		t.Fatalf("opens gave %s (created %v) then %s (created %v), want one DM", id, created, again, createdAgain)
	}
	// The very same signed open again (a retry) is a duplicate that still names the DM.
	dup := nostr.Event{Kind: protocol.KindDMOpen, Tags: nostr.Tags{{"p", bob.pk}}}
	for range 2 {
		if _, res := sharedRelay.TryPublish(t, alice.sk, &dup); !res.Accepted || !strings.Contains(res.Message, id) {
			t.Fatalf("repeated open: %+v, want the DM %s named", res, id)
		}
	}
	meta := latest(t, sharedRelay, bob.sk, nostr.Filter{Kinds: []int{protocol.KindGroupMetadata}, Tags: nostr.TagMap{"d": {id}}})
	if meta == nil {
		t.Fatal("no 39000 for the DM")
	}
	m := protocol.ParseChannelMeta(meta)
	var ps []string
	for _, tg := range meta.Tags {
		if len(tg) >= 2 && tg[0] == "p" {
			ps = append(ps, tg[1])
		}
	}
	want := []string{alice.pk, bob.pk}
	sort.Strings(want)
	if m.Type != protocol.TypeDM || !m.Private || !protocol.HasTag(meta.Tags, "hidden") || !slices.Equal(ps, want) || m.Name != "DM" {
		t.Fatalf("DM metadata %+v tags %v", m, meta.Tags)
	}
	// Each participant gets a member-added notice, so a harness joins the DM live.
	for _, u := range []user{alice, bob} {
		notes := sharedRelay.Query(t, u.sk, nostr.Filter{Kinds: []int{protocol.KindMemberAdded}, Tags: nostr.TagMap{"p": {u.pk}, "h": {id}}})
		if len(notes) != 1 {
			t.Fatalf("%s got %d member-added notices", u.pk[:8], len(notes))
		}
	}
	// The system message names the participants.
	sys := sharedRelay.Query(t, alice.sk, nostr.Filter{Kinds: []int{protocol.KindSystemMessage}, Tags: nostr.TagMap{"h": {id}}})
	if len(sys) != 1 || !strings.Contains(sys[0].Content, `"type":"dm_created"`) || !strings.Contains(sys[0].Content, bob.pk) {
		t.Fatalf("system messages %+v", sys)
	}
}

func TestDMIsReadableAndWritableOnlyByParticipants(t *testing.T) {
	alice, bob, eve := newUser(), newUser(), newUser()
	id, _ := openDM(t, alice, bob.pk)
	sharedRelay.Publish(t, alice.sk, msg(id, "psst"))
	if got := sharedRelay.Query(t, bob.sk, nostr.Filter{Kinds: []int{9}, Tags: nostr.TagMap{"h": {id}}}); len(got) != 1 {
		t.Fatalf("bob reads %d messages", len(got))
	}
	if got := sharedRelay.Query(t, eve.sk, nostr.Filter{Kinds: []int{9, protocol.KindGroupMetadata}, Tags: nostr.TagMap{"h": {id}}}); len(got) != 0 {
		t.Fatalf("eve reads %v", got)
	}
	ev := msg(id, "me too")
	// To eve the DM is answered as a channel that does not exist (its id is computable).
	if status, res := sharedRelay.TryPublish(t, eve.sk, &ev); res.Accepted || !strings.Contains(res.Error+res.Message, "unknown channel") {
		t.Fatalf("eve writes: %d %+v", status, res)
	}
	join := nostr.Event{Kind: protocol.KindJoinRequest, Tags: nostr.Tags{{"h", id}}}
	if _, res := sharedRelay.TryPublish(t, eve.sk, &join); res.Accepted {
		t.Fatal("eve joined a DM")
	}
}

func TestDMOpenRefusesBadParticipantLists(t *testing.T) {
	alice := newUser()
	var nine nostr.Tags
	for range 9 {
		nine = append(nine, nostr.Tag{"p", newUser().pk})
	}
	for name, c := range map[string]struct {
		tags nostr.Tags
		want string
	}{
		"nobody":     {nostr.Tags{}, "at least 1 other participant"},
		"only self":  {nostr.Tags{{"p", alice.pk}}, "at least 1 other participant"},
		"nine":       {nine, "at most 8 other participants"},
		"not hex":    {nostr.Tags{{"p", strings.Repeat("z", 64)}}, "bad pubkey hex"},
		"short key":  {nostr.Tags{{"p", "abcd"}}, "must be 32 bytes"},
		"odd digits": {nostr.Tags{{"p", "abc"}}, "bad pubkey hex"},
	} {
		_, res := sharedRelay.TryPublish(t, alice.sk, &nostr.Event{Kind: protocol.KindDMOpen, Tags: c.tags})
		if res.Accepted || !strings.Contains(res.Error+res.Message, c.want) {
			t.Errorf("%s: %+v, want %q", name, res, c.want)
		}
	}
}

func TestDMAddMemberOpensTheDMOfTheMergedSetAndNeedsAParticipant(t *testing.T) {
	alice, bob, carol, eve := newUser(), newUser(), newUser(), newUser()
	pair, _ := openDM(t, alice, bob.pk)
	add := &nostr.Event{Kind: protocol.KindDMAddMember, Tags: nostr.Tags{{"h", pair}, {"p", carol.pk}}}
	_, res := sharedRelay.TryPublish(t, alice.sk, add)
	body, _ := strings.CutPrefix(res.Message, "response:")
	var reply map[string]any
	if !res.Accepted || json.Unmarshal([]byte(body), &reply) != nil {
		t.Fatalf("add member: %+v", res)
	}
	trio, _ := openDM(t, carol, alice.pk, bob.pk)
	if reply["channel_id"] != trio || trio == pair {
		t.Fatalf("add member gave %v, want the three-person DM %s (not the pair %s)", reply, trio, pair)
	}
	if _, has := reply["created"]; has {
		t.Fatalf("add member reply %v carries created; upstream's does not", reply)
	}
	// The pair is unchanged.
	if got := sharedRelay.Query(t, carol.sk, nostr.Filter{Kinds: []int{protocol.KindGroupMetadata}, Tags: nostr.TagMap{"d": {pair}}}); len(got) != 0 {
		t.Fatalf("carol can read the pair DM: %v", got)
	}
	byEve := &nostr.Event{Kind: protocol.KindDMAddMember, Tags: nostr.Tags{{"h", pair}, {"p", eve.pk}}}
	if _, res := sharedRelay.TryPublish(t, eve.sk, byEve); res.Accepted || !strings.Contains(res.Error+res.Message, "not a member of this DM") {
		t.Fatalf("eve adds herself: %+v", res)
	}
	stream := sharedRelay.CreateChannel(t, alice.sk, "stream", false)
	notDM := &nostr.Event{Kind: protocol.KindDMAddMember, Tags: nostr.Tags{{"h", stream}, {"p", eve.pk}}}
	if _, res := sharedRelay.TryPublish(t, alice.sk, notDM); res.Accepted || !strings.Contains(res.Error+res.Message, "not a DM") {
		t.Fatalf("add member to a stream: %+v", res)
	}
}

func TestDMReopenRestoresAParticipantWhoLeft(t *testing.T) {
	alice, bob := newUser(), newUser()
	id, _ := openDM(t, alice, bob.pk)
	sharedRelay.Publish(t, bob.sk, nostr.Event{Kind: protocol.KindLeaveRequest, Tags: nostr.Tags{{"h", id}}})
	if got := sharedRelay.Query(t, bob.sk, nostr.Filter{Kinds: []int{protocol.KindGroupMetadata}, Tags: nostr.TagMap{"d": {id}}}); len(got) != 0 {
		t.Fatal("bob still reads the DM after leaving")
	}
	// Bob, no longer a participant, cannot reopen it himself; alice can, and he is back.
	_, res := sharedRelay.TryPublish(t, bob.sk, &nostr.Event{Kind: protocol.KindDMOpen, Tags: nostr.Tags{{"p", alice.pk}}})
	if res.Accepted {
		t.Fatalf("bob reopened a DM he left: %+v", res)
	}
	if again, created := openDM(t, alice, bob.pk); again != id || created {
		t.Fatalf("reopen gave %s created=%v", again, created)
	}
	if got := sharedRelay.Query(t, bob.sk, nostr.Filter{Kinds: []int{protocol.KindGroupMetadata}, Tags: nostr.TagMap{"d": {id}}}); len(got) == 0 {
		t.Fatal("bob cannot read the DM after alice reopened it")
	}
}

// hiddenDMs is the viewer's 30622 snapshot's h tags, read as the viewer.
func hiddenDMs(t *testing.T, viewer user) []string {
	t.Helper()
	evs := sharedRelay.Query(t, viewer.sk, nostr.Filter{Kinds: []int{protocol.KindDMVisibility}, Tags: nostr.TagMap{"p": {viewer.pk}}, Limit: 1})
	if len(evs) == 0 {
		return nil
	}
	if d := protocol.TagValue(evs[0].Tags, "d"); d != viewer.pk {
		t.Fatalf("snapshot d = %q, want the viewer", d)
	}
	var out []string
	for tg := range evs[0].Tags.FindAll("h") {
		out = append(out, tg[1])
	}
	return out
}

func TestDMHideRepublishesTheViewersHiddenSnapshotOnlyForThemUntilTheyReopen(t *testing.T) {
	alice, bob, carol := newUser(), newUser(), newUser()
	ab, _ := openDM(t, alice, bob.pk)
	ac, _ := openDM(t, alice, carol.pk)
	hide := func(u user, dm string) (int, string) {
		status, res := sharedRelay.TryPublish(t, u.sk, &nostr.Event{Kind: protocol.KindDMHide, Tags: nostr.Tags{{"h", dm}}})
		return status, res.Message + res.Error
	}
	if status, msg := hide(alice, ab); status != 200 || msg != "response:{}" {
		t.Fatalf("hide: %d %q", status, msg)
	}
	hide(alice, ac)
	hide(alice, ab) // again: no change
	want := []string{ab, ac}
	sort.Strings(want)
	if got := hiddenDMs(t, alice); !slices.Equal(got, want) {
		t.Fatalf("alice's hidden DMs = %v, want %v", got, want)
	}
	// Bob hid nothing, and cannot read alice's snapshot (p-gated).
	if got := hiddenDMs(t, bob); got != nil {
		t.Fatalf("bob's hidden DMs = %v", got)
	}
	status, raw := sharedRelay.Post(t, bob.sk, "/query", []byte(`[{"kinds":[30622],"#p":["`+alice.pk+`"]}]`))
	if status == 200 && strings.Contains(string(raw), ab) {
		t.Fatalf("bob read alice's snapshot: %d %s", status, raw)
	}
	// The DM is still there for alice to write in.
	sharedRelay.Publish(t, alice.sk, nostr.Event{Kind: protocol.KindStreamMessage, Content: "still here", Tags: nostr.Tags{{"h", ab}}})
	// Only a participant hides a DM; only DMs are hidden.
	if status, msg := hide(carol, ab); status != 403 || msg != "forbidden: not a member of this DM" {
		t.Fatalf("a non-participant's hide: %d %q", status, msg)
	}
	stream := sharedRelay.CreateChannel(t, alice.sk, "general", false)
	if status, msg := hide(alice, stream); status != 400 || msg != "invalid: channel is not a DM" {
		t.Fatalf("hide of a stream channel: %d %q", status, msg)
	}
	if status, res := sharedRelay.TryPublish(t, alice.sk, &nostr.Event{Kind: protocol.KindDMHide, Tags: nostr.Tags{}}); status != 400 || res.Error != "invalid: missing h tag (channel_id)" {
		t.Fatalf("hide without h: %d %+v", status, res)
	}
	// Reopening a hidden DM brings it back; bob's open of it changes nothing for alice.
	openDM(t, bob, alice.pk)
	if got := hiddenDMs(t, alice); !slices.Equal(got, want) {
		t.Fatalf("after bob's open, alice's hidden DMs = %v, want %v", got, want)
	}
	openDM(t, alice, bob.pk)
	if got := hiddenDMs(t, alice); !slices.Equal(got, []string{ac}) {
		t.Fatalf("after alice reopened it, her hidden DMs = %v, want only %s", got, ac)
	}
	// Nobody publishes a snapshot themselves.
	if status, res := sharedRelay.TryPublish(t, bob.sk, &nostr.Event{Kind: protocol.KindDMVisibility, Tags: nostr.Tags{{"d", bob.pk}, {"p", bob.pk}}}); status == 200 && res.Accepted {
		t.Fatal("a client published a 30622")
	}
}
