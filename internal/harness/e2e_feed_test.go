package harness_test

import (
	"path/filepath"
	"testing"
)

// TestFirstTurnOfANewSessionNamesItsSessionInTheFeed: the turn that opens a session reports, in
// every event it makes, the session it opened — the console and observers place the turn's
// activity by it.
func TestFirstTurnOfANewSessionNamesItsSessionInTheFeed(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	activity := filepath.Join(t.TempDir(), "activity.jsonl")
	s.start([]string{"--activity-log", activity})
	m := s.mention(s.ownerSK, "hello")
	s.waitReply(m.ID)
	s.waitActivity(activity, "turn_ended", 1) // the reply can land before its turn has ended
	type scoped struct {
		Type      string `json:"type"`
		SessionID string `json:"sessionId"`
	}
	lines, err := readJSONLines[scoped](activity)
	if err != nil {
		t.Fatal(err)
	}
	session := ""
	seen := map[string]bool{}
	for _, l := range lines {
		switch l.Type {
		case "session_resolved", "turn_started", "prompt_context_delivery", "prompt", "turn_ended":
		default:
			continue
		}
		seen[l.Type] = true
		switch {
		case l.SessionID == "":
			t.Errorf("%s of the first turn names no session", l.Type)
		case session == "":
			session = l.SessionID
		case l.SessionID != session:
			t.Errorf("%s names session %q, the turn opened %q", l.Type, l.SessionID, session)
		}
	}
	for _, want := range []string{"session_resolved", "turn_started", "prompt", "turn_ended"} {
		if !seen[want] {
			t.Errorf("no %s in the feed", want)
		}
	}
}
