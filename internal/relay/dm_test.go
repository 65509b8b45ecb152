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
