package relay

import (
	"errors"
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/relay/store"
)

// Fixed actors for the rule tables (valid 64-hex pubkeys).
var (
	pkOwner   = strings.Repeat("a", 64)
	pkOwner2  = strings.Repeat("b", 64)
	pkAdmin   = strings.Repeat("c", 64)
	pkMember  = strings.Repeat("d", 64)
	pkOutside = strings.Repeat("e", 64)
	pkAgent   = strings.Repeat("f", 64)
)

const testChannel = "6f1c1a52-3c0e-4b7e-9a43-8f5a7c1d2e3f"

// fakeLookup stands in for the store in rule tests.
type fakeLookup struct {
	events   map[string]*nostr.Event // id -> event
	channels map[string]string       // id -> channel
	policy   map[string][2]string    // pubkey -> (policy, owner)
}

func (f fakeLookup) event(id string) (*nostr.Event, string, error) {
	return f.events[id], f.channels[id], nil
}

func (f fakeLookup) addPolicy(pk string) (string, string, error) {
	if p, ok := f.policy[pk]; ok {
		return p[0], p[1], nil
	}
	return policyAnyone, "", nil
}

func channel(vis string, members map[string]string) store.Channel {
	return store.Channel{ID: testChannel, Name: "c", Visibility: vis, Type: protocol.TypeStream, Members: members}
}

func team() map[string]string {
	return map[string]string{pkOwner: protocol.RoleOwner, pkAdmin: protocol.RoleAdmin, pkMember: protocol.RoleMember}
}

type ruleCase struct {
	name  string
	actor string
	ch    store.Channel
	tags  nostr.Tags
	look  fakeLookup
	deny  string // "" = accepted; else a substring of the denial
	check func(t *testing.T, p adminPlan)
}

func runRule(t *testing.T, kind int, cases []ruleCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ev := &nostr.Event{Kind: kind, PubKey: tc.actor, Tags: append(nostr.Tags{{"h", testChannel}}, tc.tags...)}
			exists := tc.ch.ID != ""
			in := adminInput{ev: ev, ch: tc.ch, exists: exists, role: tc.ch.Members[tc.actor], look: tc.look}
			plan, err := decideAdmin(in)
			if tc.deny == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if tc.check != nil {
					tc.check(t, plan)
				}
				return
			}
			var d *denial
			if !errors.As(err, &d) || !strings.Contains(d.msg, tc.deny) {
				t.Fatalf("got %v, want a denial containing %q", err, tc.deny)
			}
		})
	}
}

func added(want string) func(*testing.T, adminPlan) {
	return func(t *testing.T, p adminPlan) {
		if len(p.added) != 1 || p.added[0] != want {
			t.Fatalf("added %v, want [%s]", p.added, want)
		}
	}
}

func TestRuleCreateGroup(t *testing.T) {
	runRule(t, protocol.KindCreateGroup, []ruleCase{
		{name: "signer becomes owner", actor: pkMember, tags: nostr.Tags{{"name", "x"}}, check: func(t *testing.T, p adminPlan) {
			if p.put[pkMember] != protocol.RoleOwner || p.ch.Visibility != protocol.VisibilityOpen || p.ch.Type != protocol.TypeStream {
				t.Fatalf("plan %+v", p)
			}
		}},
		{name: "existing id refused", actor: pkMember, ch: channel("open", team()), tags: nostr.Tags{{"name", "x"}}, deny: "already exists"},
		{name: "name required", actor: pkMember, deny: "name is required"},
		{name: "bad visibility", actor: pkMember, tags: nostr.Tags{{"name", "x"}, {"visibility", "secret"}}, deny: "visibility"},
		{name: "bad type", actor: pkMember, tags: nostr.Tags{{"name", "x"}, {"channel_type", "dm"}}, deny: "channel_type"},
		{name: "negative ttl", actor: pkMember, tags: nostr.Tags{{"name", "x"}, {"ttl", "-1"}}, deny: "ttl"},
	})
}

func TestRulePutUser(t *testing.T) {
	oneOwner := map[string]string{pkOwner: protocol.RoleOwner, pkAdmin: protocol.RoleAdmin}
	runRule(t, protocol.KindPutUser, []ruleCase{
		{name: "anyone adds a member to an open channel", actor: pkOutside, ch: channel("open", team()), tags: nostr.Tags{{"p", pkAgent}}, check: added(pkAgent)},
		{name: "member cannot add to a private channel", actor: pkMember, ch: channel("private", team()), tags: nostr.Tags{{"p", pkAgent}}, deny: "private channel"},
		{name: "admin adds to a private channel", actor: pkAdmin, ch: channel("private", team()), tags: nostr.Tags{{"p", pkAgent}}, check: added(pkAgent)},
		{name: "member cannot grant admin", actor: pkMember, ch: channel("open", team()), tags: nostr.Tags{{"p", pkAgent}, {"role", "admin"}}, deny: "change roles"},
		{name: "admin cannot grant owner", actor: pkAdmin, ch: channel("open", team()), tags: nostr.Tags{{"p", pkAgent}, {"role", "owner"}}, deny: "only owners can grant"},
		{name: "last owner cannot be demoted", actor: pkOwner, ch: channel("open", oneOwner), tags: nostr.Tags{{"p", pkOwner}, {"role", "member"}}, deny: "last owner"},
		{name: "bad role", actor: pkOwner, ch: channel("open", team()), tags: nostr.Tags{{"p", pkAgent}, {"role", "god"}}, deny: "role must be"},
		{name: "bad p tag", actor: pkOwner, ch: channel("open", team()), tags: nostr.Tags{{"p", "xyz"}}, deny: "p tag"},
		{name: "same role again changes nothing", actor: pkOwner, ch: channel("open", team()), tags: nostr.Tags{{"p", pkMember}}, check: func(t *testing.T, p adminPlan) {
			if p.state || len(p.put) != 0 {
				t.Fatalf("plan %+v", p)
			}
		}},
		{name: "archived channel refused", actor: pkOwner, ch: func() store.Channel { c := channel("open", team()); c.Archived = true; return c }(), tags: nostr.Tags{{"p", pkAgent}}, deny: "archived"},
		{name: "unknown channel refused", actor: pkOwner, tags: nostr.Tags{{"p", pkAgent}}, deny: "unknown channel"},
		// channel_add_policy (kind 10100) of the target.
		{name: "policy nobody refuses an owner", actor: pkOwner, ch: channel("open", team()), tags: nostr.Tags{{"p", pkAgent}},
			look: fakeLookup{policy: map[string][2]string{pkAgent: {policyNobody, pkOwner}}}, deny: "policy:nobody"},
		{name: "policy owner_only refuses a stranger", actor: pkOwner, ch: channel("open", team()), tags: nostr.Tags{{"p", pkAgent}},
			look: fakeLookup{policy: map[string][2]string{pkAgent: {policyOwnerOnly, pkOwner2}}}, deny: "only the agent owner"},
		{name: "policy owner_only without a proven owner refuses", actor: pkOwner, ch: channel("open", team()), tags: nostr.Tags{{"p", pkAgent}},
			look: fakeLookup{policy: map[string][2]string{pkAgent: {policyOwnerOnly, ""}}}, deny: "no owner set"},
		{name: "policy owner_only admits the owner", actor: pkOwner2, ch: channel("open", team()), tags: nostr.Tags{{"p", pkAgent}},
			look: fakeLookup{policy: map[string][2]string{pkAgent: {policyOwnerOnly, pkOwner2}}}, check: added(pkAgent)},
		{name: "policy does not stop a self add", actor: pkAgent, ch: channel("open", team()), tags: nostr.Tags{{"p", pkAgent}},
			look: fakeLookup{policy: map[string][2]string{pkAgent: {policyNobody, ""}}}, check: added(pkAgent)},
		{name: "policy does not gate a role change of a member", actor: pkOwner, ch: channel("open", team()), tags: nostr.Tags{{"p", pkMember}, {"role", "admin"}},
			look: fakeLookup{policy: map[string][2]string{pkMember: {policyNobody, ""}}}},
	})
}

func TestRuleRemoveUser(t *testing.T) {
	oneOwner := map[string]string{pkOwner: protocol.RoleOwner, pkAdmin: protocol.RoleAdmin, pkMember: protocol.RoleMember}
	twoOwners := map[string]string{pkOwner: protocol.RoleOwner, pkOwner2: protocol.RoleOwner, pkAdmin: protocol.RoleAdmin}
	runRule(t, protocol.KindRemoveUser, []ruleCase{
		{name: "member removes itself", actor: pkMember, ch: channel("open", oneOwner), tags: nostr.Tags{{"p", pkMember}}, check: func(t *testing.T, p adminPlan) {
			if p.system["type"] != "member_left" || len(p.remove) != 1 {
				t.Fatalf("plan %+v", p)
			}
		}},
		{name: "member cannot remove another", actor: pkMember, ch: channel("open", oneOwner), tags: nostr.Tags{{"p", pkAdmin}}, deny: "only owners and admins"},
		{name: "admin removes a member", actor: pkAdmin, ch: channel("open", oneOwner), tags: nostr.Tags{{"p", pkMember}}},
		{name: "admin cannot remove an owner", actor: pkAdmin, ch: channel("open", twoOwners), tags: nostr.Tags{{"p", pkOwner2}}, deny: "only owners can remove an owner"},
		{name: "last owner stays", actor: pkOwner, ch: channel("open", oneOwner), tags: nostr.Tags{{"p", pkOwner}}, deny: "last owner"},
		{name: "non-member target", actor: pkOwner, ch: channel("open", oneOwner), tags: nostr.Tags{{"p", pkOutside}}, deny: "not a channel member"},
	})
}

func TestRuleEditMetadata(t *testing.T) {
	archived := channel("open", team())
	archived.Archived = true
	runRule(t, protocol.KindEditMetadata, []ruleCase{
		{name: "admin renames", actor: pkAdmin, ch: channel("open", team()), tags: nostr.Tags{{"name", "new"}}, check: func(t *testing.T, p adminPlan) {
			if p.ch.Name != "new" {
				t.Fatalf("name %q", p.ch.Name)
			}
		}},
		{name: "member cannot rename", actor: pkMember, ch: channel("open", team()), tags: nostr.Tags{{"name", "new"}}, deny: "only owners and admins"},
		{name: "member sets topic", actor: pkMember, ch: channel("open", team()), tags: nostr.Tags{{"topic", "t"}}},
		{name: "outsider cannot set topic", actor: pkOutside, ch: channel("open", team()), tags: nostr.Tags{{"topic", "t"}}, deny: "not a channel member"},
		{name: "nothing to edit", actor: pkOwner, ch: channel("open", team()), deny: "nothing to edit"},
		{name: "topic on an archived channel refused", actor: pkMember, ch: archived, tags: nostr.Tags{{"topic", "t"}}, deny: "archived"},
		{name: "owner unarchives", actor: pkOwner, ch: archived, tags: nostr.Tags{{"archived", "false"}}, check: func(t *testing.T, p adminPlan) {
			if p.ch.Archived || p.system["type"] != "channel_unarchived" {
				t.Fatalf("plan %+v", p)
			}
		}},
		{name: "bad visibility", actor: pkOwner, ch: channel("open", team()), tags: nostr.Tags{{"visibility", "x"}}, deny: "visibility"},
	})
}

func TestRuleDeleteEvent(t *testing.T) {
	id := strings.Repeat("1", 64)
	elsewhere := strings.Repeat("2", 64)
	look := fakeLookup{
		events:   map[string]*nostr.Event{id: {ID: id, PubKey: pkMember}, elsewhere: {ID: elsewhere, PubKey: pkMember}},
		channels: map[string]string{id: testChannel, elsewhere: "other"},
	}
	runRule(t, protocol.KindDeleteEvent, []ruleCase{
		{name: "author deletes", actor: pkMember, ch: channel("open", team()), tags: nostr.Tags{{"e", id}}, look: look, check: func(t *testing.T, p adminPlan) {
			if p.deleteID != id {
				t.Fatalf("deleteID %q", p.deleteID)
			}
		}},
		{name: "admin deletes", actor: pkAdmin, ch: channel("open", team()), tags: nostr.Tags{{"e", id}}, look: look},
		{name: "other member cannot", actor: pkOutside, ch: channel("open", team()), tags: nostr.Tags{{"e", id}}, look: look, deny: "only the author"},
		{name: "event of another channel", actor: pkAdmin, ch: channel("open", team()), tags: nostr.Tags{{"e", elsewhere}}, look: look, deny: "not in this channel"},
		{name: "bad e tag", actor: pkAdmin, ch: channel("open", team()), tags: nostr.Tags{{"e", "x"}}, look: look, deny: "e tag"},
	})
}

func TestRuleDeleteGroup(t *testing.T) {
	runRule(t, protocol.KindDeleteGroup, []ruleCase{
		{name: "owner deletes", actor: pkOwner, ch: channel("open", team()), check: func(t *testing.T, p adminPlan) {
			if !p.ch.Deleted {
				t.Fatal("not deleted")
			}
		}},
		{name: "admin cannot", actor: pkAdmin, ch: channel("open", team()), deny: "only owners"},
	})
}

func TestRuleJoin(t *testing.T) {
	runRule(t, protocol.KindJoinRequest, []ruleCase{
		{name: "outsider joins an open channel", actor: pkOutside, ch: channel("open", team()), check: added(pkOutside)},
		{name: "private channel refused", actor: pkOutside, ch: channel("private", team()), deny: "private"},
		{name: "member joining again changes nothing", actor: pkMember, ch: channel("open", team()), check: func(t *testing.T, p adminPlan) {
			if p.state || len(p.put) != 0 {
				t.Fatalf("plan %+v", p)
			}
		}},
	})
}

func TestRuleLeave(t *testing.T) {
	archived := channel("open", team())
	archived.Archived = true
	runRule(t, protocol.KindLeaveRequest, []ruleCase{
		{name: "member leaves", actor: pkMember, ch: channel("open", team())},
		{name: "member leaves an archived channel", actor: pkMember, ch: archived},
		{name: "last owner cannot", actor: pkOwner, ch: channel("open", team()), deny: "last owner"},
		{name: "outsider cannot", actor: pkOutside, ch: channel("open", team()), deny: "not a channel member"},
	})
}

func TestRuleDMOpenJoinsAnExistingIDOnlyWhenItIsThisSetsDM(t *testing.T) {
	set := []string{pkAgent, pkOwner}
	id := dmChannelID(set)
	open := func(ch store.Channel) error {
		ev := &nostr.Event{Kind: protocol.KindDMOpen, PubKey: pkOwner, Tags: nostr.Tags{{"p", pkAgent}}}
		_, err := decideAdmin(adminInput{ev: ev, ch: ch, exists: true, role: ch.Members[pkOwner], look: fakeLookup{}})
		return err
	}
	squat := store.Channel{ID: id, Name: "dm", Visibility: protocol.VisibilityOpen, Type: protocol.TypeStream,
		Members: map[string]string{pkOutside: protocol.RoleOwner}}
	if err := open(squat); err == nil || !strings.Contains(err.Error(), "not this DM") {
		t.Fatalf("open onto a squatted stream channel: %v", err)
	}
	other := store.Channel{ID: id, Visibility: protocol.VisibilityPrivate, Type: protocol.TypeDM,
		Members: map[string]string{pkOwner: protocol.RoleMember, pkOutside: protocol.RoleMember}}
	if err := open(other); err == nil || !strings.Contains(err.Error(), "not this DM") {
		t.Fatalf("open onto a DM of another set: %v", err)
	}
	left := store.Channel{ID: id, Visibility: protocol.VisibilityPrivate, Type: protocol.TypeDM,
		Members: map[string]string{pkOwner: protocol.RoleMember}} // the agent left
	if err := open(left); err != nil {
		t.Fatalf("reopen restoring a participant: %v", err)
	}
}
