package console_test

import (
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/console"
	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/relay/relaytest"
	"github.com/buzz-harness/buzz/internal/testwait"
)

// A stranger's "general" that the owner was added to must not pass for the stack's own: the
// home channel comes first and is marked, and every channel names its owners.
func TestConsoleListsHomeGeneralFirstAndNamesEachChannelsOwners(t *testing.T) {
	r := relaytest.Start(t)
	ownerSK, strangerSK := nostr.GeneratePrivateKey(), nostr.GeneratePrivateKey()
	ownerPK, _ := protocol.PublicKey(ownerSK)
	strangerPK, _ := protocol.PublicKey(strangerSK)
	lookalike := r.CreateChannel(t, strangerSK, "general", false)
	r.AddMember(t, strangerSK, lookalike, ownerPK, "member")
	r.CreateChannel(t, ownerSK, "alpha", false)
	home := r.CreateChannel(t, ownerSK, "general", true)

	s, err := console.New(console.Config{RelayURL: r.URL, OwnerKey: ownerSK, HomeChannel: home})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	for range 2 { // the same order on every load
		resp := get(t, ts.URL+"/api/state", map[string]string{"X-Buzz-Token": s.Token()})
		var st struct {
			Channels []struct {
				ID     string
				Name   string
				Home   bool
				Owners []struct{ Pubkey string }
			}
		}
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
			t.Fatal(err)
		}
		if len(st.Channels) != 3 {
			t.Fatalf("channels = %+v", st.Channels)
		}
		first, second, third := st.Channels[0], st.Channels[1], st.Channels[2]
		if first.ID != home || !first.Home || second.Name != "alpha" || third.ID != lookalike || third.Home || second.Home {
			t.Fatalf("order/marks = %+v", st.Channels)
		}
		if len(first.Owners) != 1 || first.Owners[0].Pubkey != ownerPK || len(third.Owners) != 1 || third.Owners[0].Pubkey != strangerPK {
			t.Fatalf("owners: home %+v, lookalike %+v", first.Owners, third.Owners)
		}
	}
}

// A stranger opening 500 group DMs naming the owner (issue 28) fills the console's newest-500
// channel list; the home channel is still listed, first: the console asks for it by id.
func TestConsoleListsHomeChannelPastFiveHundredNewerDMs(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 500 DMs")
	}
	r := relaytest.Start(t)
	ownerSK := nostr.GeneratePrivateKey()
	ownerPK, _ := protocol.PublicKey(ownerSK)
	home := r.CreateChannel(t, ownerSK, "general", true)
	var strangerSK string
	// The DMs' lists must be newer, not the same second (ties sort by id).
	made := time.Now().Unix()
	testwait.Eventually(t, 3*time.Second, func() bool { return time.Now().Unix() > made }, "the next second")
	for i := range 500 {
		throwaway, _ := protocol.PublicKey(nostr.GeneratePrivateKey())
		if i%50 == 0 { // keys are free: a new stranger whenever one reaches the relay's DM-open rate
			strangerSK = nostr.GeneratePrivateKey()
		}
		r.Publish(t, strangerSK, nostr.Event{Kind: protocol.KindDMOpen, CreatedAt: nostr.Now(),
			Tags: nostr.Tags{{"p", ownerPK}, {"p", throwaway}}})
	}
	s, err := console.New(console.Config{RelayURL: r.URL, OwnerKey: ownerSK, HomeChannel: home})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	resp := get(t, ts.URL+"/api/state", map[string]string{"X-Buzz-Token": s.Token()})
	var st struct {
		Channels []struct {
			ID   string
			Home bool
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	if len(st.Channels) == 0 || st.Channels[0].ID != home || !st.Channels[0].Home {
		t.Fatalf("home channel not listed first among %d channels", len(st.Channels))
	}
}
