package harness_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/buzz-harness/buzz/internal/testwait"
)

// A reply's created_at has one-second resolution, so a conversation's next turn starts only once
// the second in which its previous turn ended has passed: then a reply dated in a batch's
// in-flight second can only be that batch's, and a crash cannot make it answer the batch twice or
// take the previous turn's reply for it.
func TestNextTurnOfAConversationStartsInALaterSecondThanThePreviousEnded(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	activity := filepath.Join(t.TempDir(), "activity.jsonl")
	s.start([]string{"--activity-log", activity, "--session-policy", "channel"})
	for _, text := range []string{"first", "second", "third"} {
		m := s.mention(s.ownerSK, text)
		s.waitReply(m.ID)
	}
	// The last turn ends after its reply is posted: wait for its turn_ended.
	var started, ended []time.Time
	testwait.Eventually(t, 20*time.Second, func() bool {
		lines, err := readActivity(activity)
		if err != nil {
			t.Fatal(err)
		}
		started, ended = nil, nil
		for _, e := range lines {
			switch e.Type {
			case "turn_started":
				started = append(started, e.Time)
			case "turn_ended":
				ended = append(ended, e.Time)
			}
		}
		return len(ended) >= 3
	}, "the third turn_ended in the activity log")
	if len(started) != 3 || len(ended) != 3 {
		t.Fatalf("%d turns started and %d ended, want 3 each", len(started), len(ended))
	}
	for i := 1; i < 3; i++ {
		if started[i].Unix() <= ended[i-1].Unix() {
			t.Errorf("turn %d started at %s, in the second turn %d ended (%s)", i+1,
				started[i].Format("15:04:05.000"), i, ended[i-1].Format("15:04:05.000"))
		}
	}
}
