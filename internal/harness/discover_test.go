package harness

import (
	"context"
	"log/slog"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/client"
	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/relay/relaytest"
)

func testKey(t testing.TB) (sk, pk string) {
	t.Helper()
	sk = nostr.GeneratePrivateKey()
	pk, err := protocol.PublicKey(sk)
	if err != nil {
		t.Fatal(err)
	}
	return sk, pk
}

// Discovery pages with a page far smaller than the channel count (as a relay capping its query
// limit would force): every channel is found, once, and the owner's are marked as shared.
func TestDiscoveryPagesPastTheQueryLimitAndFindsEveryChannel(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t)
	ownerSK, ownerPK := testKey(t)
	strangerSK, _ := testKey(t)
	agentSK, agentPK := testKey(t)
	want := map[string]bool{} // channel → owner shares it
	for i := range 23 {
		sk, owned := strangerSK, false
		if i%8 == 0 {
			sk, owned = ownerSK, true
		}
		id := r.CreateChannel(t, sk, "c", false)
		r.AddMember(t, sk, id, agentPK, "bot")
		want[id] = owned
	}
	r.CreateChannel(t, strangerSK, "not the agent's", false)

	rc := &relayClient{bridge: client.NewBridge(r.URL, agentSK), self: agentPK,
		cfg: &Config{Owner: ownerPK}, log: slog.New(slog.DiscardHandler), discoverPage: 4}
	chans, err := rc.memberChannels(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, c := range chans {
		if _, dup := got[c.ID]; dup {
			t.Fatalf("channel %s found twice", c.ID)
		}
		got[c.ID] = c.OwnerShared
		if c.Type != protocol.TypeStream {
			t.Fatalf("channel %s type %q: its metadata was not found", c.ID, c.Type)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("found %d channels, want %d", len(got), len(want))
	}
	for id, owned := range want {
		if shared, ok := got[id]; !ok || shared != owned {
			t.Fatalf("channel %s: found %v, owner-shared %v; want owner-shared %v", id, ok, shared, owned)
		}
	}
}

// Others added the agent to more channels than discovery reads (here 2 pages of 4): the
// channels the owner shares are found all the same.
func TestDiscoveryFindsTheOwnersChannelsPastItsPageBound(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t)
	ownerSK, ownerPK := testKey(t)
	strangerSK, _ := testKey(t)
	agentSK, agentPK := testKey(t)
	var owners []string
	for i := range 3 {
		id := r.CreateChannel(t, ownerSK, "mine", i == 1) // one of them private
		r.AddMember(t, ownerSK, id, agentPK, "bot")
		owners = append(owners, id)
	}
	for range 20 { // newer than the owner's: read first
		id := r.CreateChannel(t, strangerSK, "general", false)
		r.AddMember(t, strangerSK, id, agentPK, "member")
	}
	rc := &relayClient{bridge: client.NewBridge(r.URL, agentSK), self: agentPK,
		cfg: &Config{Owner: ownerPK}, log: slog.New(slog.DiscardHandler), discoverPage: 4, discoverPages: 2}
	chans, err := rc.memberChannels(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, c := range chans {
		found[c.ID] = c.OwnerShared
	}
	if len(found) >= 23 {
		t.Fatalf("found all %d channels: the page bound did not apply, so this proves nothing", len(found))
	}
	for _, id := range owners {
		if !found[id] {
			t.Fatalf("the owner's channel %s was not found (or not marked as shared); found %d channels", id, len(found))
		}
	}
}

// Past the cap the channels the owner shares are kept, whatever order discovery found them in.
func TestKeepChannelsPutsTheOwnersFirstPastTheCap(t *testing.T) {
	var chans []*channel
	for i := range 10 {
		chans = append(chans, &channel{ID: string(rune('a' + i)), OwnerShared: i >= 8})
	}
	keep, left := keepChannels(chans, 3)
	if left != 7 || len(keep) != 3 {
		t.Fatalf("kept %d, left %d; want 3 and 7", len(keep), left)
	}
	if !keep[0].OwnerShared || !keep[1].OwnerShared || keep[0].ID != "i" || keep[1].ID != "j" || keep[2].ID != "a" {
		t.Fatalf("kept %v %v %v, want i j (the owner's) then a", keep[0].ID, keep[1].ID, keep[2].ID)
	}
	if all, left := keepChannels(chans, 100); left != 0 || len(all) != 10 {
		t.Fatalf("under the cap: kept %d, left %d", len(all), left)
	}
}

// openDM publishes sk's 41010 naming others and returns the DM's id.
func openDM(t *testing.T, r *relaytest.Server, sk string, others ...string) string {
	t.Helper()
	ev := nostr.Event{Kind: protocol.KindDMOpen, CreatedAt: nostr.Now()}
	for _, pk := range others {
		ev.Tags = append(ev.Tags, nostr.Tag{"p", pk})
	}
	r.Publish(t, sk, ev)
	ev.PubKey, _ = protocol.PublicKey(sk) // Publish signed a copy
	id, ok := protocol.DMOpenChannel(&ev)
	if !ok {
		t.Fatal("bad DM open")
	}
	return id
}

// A stranger's group DMs naming the agent and the owner (issue 28: 10,100 of them pushed the
// owner's oldest channel out of discovery) are not the owner's: only what the owner created, or
// added the agent to, is. The owner's channels are found past the flood and marked; the DMs
// are not marked.
func TestGroupDMsNamingTheOwnerDoNotMakeAChannelTheOwners(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t)
	ownerSK, ownerPK := testKey(t)
	strangerSK, _ := testKey(t)
	agentSK, agentPK := testKey(t)
	mine := r.CreateChannel(t, ownerSK, "general", true)
	r.AddMember(t, ownerSK, mine, agentPK, "member")
	ownerDM := openDM(t, r, ownerSK, agentPK)
	flood := map[string]bool{}
	for range 20 { // newer than the owner's: read first
		_, throwaway := testKey(t)
		flood[openDM(t, r, strangerSK, agentPK, ownerPK, throwaway)] = true
	}
	rc := &relayClient{bridge: client.NewBridge(r.URL, agentSK), self: agentPK,
		cfg: &Config{Owner: ownerPK}, log: slog.New(slog.DiscardHandler), discoverPage: 4, discoverPages: 2}
	chans, err := rc.memberChannels(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, c := range chans {
		found[c.ID] = c.OwnerShared
		if flood[c.ID] && c.OwnerShared {
			t.Fatalf("a stranger's group DM %s counts as the owner's", c.ID)
		}
	}
	if !found[mine] || !found[ownerDM] {
		t.Fatalf("the owner's channel found+owned %v, the owner's DM %v; want both (found %d channels)", found[mine], found[ownerDM], len(found))
	}
}

// The home channel is found and comes first however many newer channels others added the agent
// to, even when the owner did not create it.
func TestDiscoveryPutsTheHomeChannelFirstPastItsPageBound(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t)
	_, ownerPK := testKey(t)
	strangerSK, _ := testKey(t)
	agentSK, agentPK := testKey(t)
	home := r.CreateChannel(t, strangerSK, "general", false)
	r.AddMember(t, strangerSK, home, agentPK, "member")
	for range 20 {
		id := r.CreateChannel(t, strangerSK, "noise", false)
		r.AddMember(t, strangerSK, id, agentPK, "member")
	}
	rc := &relayClient{bridge: client.NewBridge(r.URL, agentSK), self: agentPK,
		cfg: &Config{Owner: ownerPK, HomeChannel: home}, log: slog.New(slog.DiscardHandler), discoverPage: 4, discoverPages: 2}
	chans, err := rc.memberChannels(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(chans) == 0 || chans[0].ID != home || !chans[0].OwnerShared {
		t.Fatalf("home channel not first and pinned; got %d channels", len(chans))
	}
	for _, c := range chans[1:] {
		if c.OwnerShared {
			t.Fatalf("stranger's channel %s counts as the owner's", c.ID)
		}
	}
}
