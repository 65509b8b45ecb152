package harness_test

import (
	"strings"
	"testing"
	"time"

	"github.com/buzz-harness/buzz/internal/harness"
)

// TestSteerAndInterruptInProcess runs the harness in this process (so -race sees the loop, the
// turn goroutines and the native steer calls together): a colleague's message is steered into a
// running turn natively, and the owner's interrupts another turn, which is cancelled and merged.
func TestSteerAndInterruptInProcess(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	otherSK, otherPK := newKey(t)
	s.relay.AddMember(t, s.ownerSK, s.channel, otherPK, "member")
	cancel, ran := s.runInProcess(t, harness.Config{RespondTo: harness.RespondAnyone, MultipleEventHandling: harness.HandleOwnerInterrupt},
		"TESTAGENT_HANG_ON=1,2", "TESTAGENT_STEERING=1", replyEvents)
	defer cancel()

	a := s.mention(s.ownerSK, "first job")
	s.waitRecorded("session/prompt", 1)
	b := s.mention(otherSK, "a detail for it", replyTo(a.ID))
	if r := s.waitNewReply(a.ID); !strings.Contains(r.Content, a.ID) || !strings.Contains(r.Content, b.ID) {
		t.Fatalf("steered reply %q", r.Content)
	}

	c := s.mention(s.ownerSK, "second job")
	s.waitRecorded("session/prompt", 2)
	d := s.mention(s.ownerSK, "no, do this instead", replyTo(c.ID))
	if r := s.waitNewReply(c.ID); !strings.Contains(r.Content, c.ID) || !strings.Contains(r.Content, d.ID) {
		t.Fatalf("merged reply %q", r.Content)
	}
	if n := len(s.methods("_session/steering")); n != 1 {
		t.Fatalf("%d native steers, want the colleague's one", n)
	}
	if ps := s.prompts(); len(ps) != 3 || !strings.Contains(ps[2], "[New request — it replaces the earlier one]") {
		t.Fatalf("%d prompts; the third must be the owner's interrupt", len(ps))
	}

	cancel()
	select {
	case err := <-ran:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}
