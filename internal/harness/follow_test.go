package harness

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/subrules"
)

const followChannel = "3f1e2d4c-5b6a-4789-8abc-def012345678"

func rootN(n int) string { return fmt.Sprintf("%064x", n) }

func newFollowSet(t *testing.T, ttl time.Duration) (*followSet, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "follow.json")
	f := loadFollowSet(path, ttl, slog.New(slog.DiscardHandler))
	t.Cleanup(f.close)
	return f, path
}

func TestFollowSetForgetsAThreadPastTheTTLSinceTheAgentsLastReply(t *testing.T) {
	f, _ := newFollowSet(t, DefaultThreadFollowTTL)
	t0 := time.Unix(1_800_000_000, 0)
	f.note(followChannel, rootN(1), t0, t0)
	f.note(followChannel, rootN(1), t0.Add(time.Hour), t0.Add(time.Hour)) // a later reply there
	if !f.follows(followChannel, rootN(1), t0.Add(25*time.Hour)) {
		t.Fatal("forgot a thread 24 h after its first reply but within 24 h of its last")
	}
	if f.follows(followChannel, rootN(1), t0.Add(25*time.Hour+time.Second)) {
		t.Fatal("still follows a thread more than 24 h after the agent's last reply there")
	}
	if gone := f.expired(t0.Add(26 * time.Hour)); !slices.Equal(gone, []string{rootN(1)}) {
		t.Fatalf("expired %v, want the thread", gone)
	}
	if added, _ := f.note(followChannel, rootN(2), t0, t0.Add(25*time.Hour)); added {
		t.Fatal("an agent reply older than the TTL (history) started a follow")
	}
}

func TestFollowSetDropsTheLongestQuietThreadAtTheCap(t *testing.T) {
	f, _ := newFollowSet(t, DefaultThreadFollowTTL)
	t0 := time.Unix(1_800_000_000, 0)
	for i := range maxFollowed {
		// Thread 0 is the oldest but was replied in again last.
		at := t0.Add(time.Duration(i) * time.Second)
		f.note(followChannel, rootN(i), at, at)
	}
	late := t0.Add(time.Hour)
	f.note(followChannel, rootN(0), late, late)
	added, evicted := f.note(followChannel, rootN(maxFollowed), late, late)
	if !added || evicted != rootN(1) {
		t.Fatalf("added %v evicted %q, want the new thread in and thread 1 (quiet longest) out", added, evicted)
	}
	if len(f.list()) != maxFollowed || f.follows(followChannel, rootN(1), late) || !f.follows(followChannel, rootN(0), late) {
		t.Fatalf("%d threads followed; want %d, without thread 1 and with thread 0", len(f.list()), maxFollowed)
	}
}

func TestFollowSetIsKeptInTheStateDirAndReadBack(t *testing.T) {
	f, path := newFollowSet(t, DefaultThreadFollowTTL)
	if !f.fresh {
		t.Fatal("a set without a file is not marked fresh (to rebuild from the relay)")
	}
	now := time.Now()
	f.note(followChannel, rootN(7), now, now)
	f.close()
	g := loadFollowSet(path, DefaultThreadFollowTTL, slog.New(slog.DiscardHandler))
	defer g.close()
	if g.fresh || !g.follows(followChannel, rootN(7), now) {
		t.Fatalf("read back fresh=%v follows=%v, want the thread from the file", g.fresh, g.follows(followChannel, rootN(7), now))
	}
	if g.follows("00000000-0000-4000-8000-000000000000", rootN(7), now) {
		t.Fatal("a thread root followed in one channel counts in another")
	}
}

func TestFollowSetStartsFreshFromAnUnreadableFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "follow.json")
	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := loadFollowSet(path, DefaultThreadFollowTTL, slog.New(slog.DiscardHandler))
	defer f.close()
	if !f.fresh || len(f.list()) != 0 {
		t.Fatalf("fresh=%v threads=%d, want an empty set rebuilt from the relay", f.fresh, len(f.list()))
	}
}

func TestAgentMarkedEventsAreTheOnesThatSayAnAgentWroteThem(t *testing.T) {
	for name, c := range map[string]struct {
		tags nostr.Tags
		want bool
	}{
		"NIP-OA auth tag":  {nostr.Tags{{"auth", "owner", "", "sig"}}, true},
		"failure notice":   {nostr.Tags{{FailureMarker, "1"}}, true},
		"fallback reply":   {nostr.Tags{{FallbackMarker, "1"}}, true},
		"a person's reply": {nostr.Tags{{"h", followChannel}, {"e", rootN(1), "", "reply"}}, false},
	} {
		if got := agentMarked(&nostr.Event{Tags: c.tags}); got != c.want {
			t.Errorf("%s: agentMarked = %v, want %v", name, got, c.want)
		}
	}
}

func TestSiblingVerdictLetsAFollowUpInOnlyFromAPerson(t *testing.T) {
	for name, c := range map[string]struct {
		v                 siblingVerdict
		mention, followed bool
	}{
		"person":       {siblingVerdict{}, false, true},
		"sibling":      {siblingVerdict{sibling: true, agent: true}, true, false},
		"other agent":  {siblingVerdict{agent: true}, false, false},
		"lookup error": {siblingVerdict{failed: true}, false, false},
	} {
		if got := c.v.admits(false); got != c.mention {
			t.Errorf("%s: a mention admitted = %v, want %v", name, got, c.mention)
		}
		if got := c.v.admits(true); got != c.followed {
			t.Errorf("%s: a follow-up admitted = %v, want %v", name, got, c.followed)
		}
	}
}

func TestThreadSubscriptionsCarryNoPFilterWhileChannelOnesKeepIt(t *testing.T) {
	h := &Harness{cfg: Config{Kinds: DefaultKinds, Rules: subrules.ForMode(subrules.ModeMentions, DefaultKinds, false)}, agent: rootN(99)}
	th := h.threadFilter([]string{rootN(1)})
	if _, ok := th.Tags["p"]; ok || !slices.Equal(th.Tags["e"], []string{rootN(1)}) || !slices.Equal(th.Kinds, []int{9}) {
		t.Fatalf("thread filter %v: want #e of the roots, kind 9 only, and no #p", th)
	}
	if ch := h.channelFilter([]string{followChannel}); !slices.Equal(ch.Tags["p"], []string{rootN(99)}) {
		t.Fatalf("channel filter %v lost its #p", ch)
	}
}
