package harness_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCorruptStateFilesAreSkippedWithOneLineEachAndServingContinues(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start(nil)
	s.waitReply(s.mention(s.ownerSK, "before").ID)
	s.kill()
	store := filepath.Join(s.stateDir, "sessions-"+s.agentPK+".json")
	if err := os.WriteFile(store, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	jpath := filepath.Join(s.stateDir, "journal-"+s.agentPK+".log")
	f, err := os.OpenFile(jpath, os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString(`deadbeef {"op":"accept","entry":{"channelId":"x`) // a torn last record
	f.Close()

	s.start(nil)
	reply := s.waitReply(s.mention(s.ownerSK, "after").ID)
	if !strings.Contains(reply.Content, "after") {
		t.Fatalf("reply %q", reply.Content)
	}
	logs := s.logs.String()
	for _, want := range []string{s.agentPK + ".json", "journal"} {
		if !strings.Contains(logs, want) || !strings.Contains(logs, "WARN") {
			t.Fatalf("no warning naming %s; output:\n%s", want, logs)
		}
	}
}

func TestMentionsSentWhileHarnessWasDownAreAnswered(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start(nil)
	first := s.mention(s.ownerSK, "first")
	s.waitReply(first.ID)
	s.kill()
	missed := s.mention(s.ownerSK, "sent while down")
	s.start(nil)
	s.waitReply(missed.ID)
	n := 0
	for _, p := range s.prompts() {
		if strings.Contains(p, "Event ID: "+first.ID) {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("the first mention was prompted %d times, want once (the restart replayed it)", n)
	}
}

func TestOwnerStatusReportsQueuedWork(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start(nil)
	out := s.waitOutcome(s.mention(s.ownerSK, "!status").ID)
	st, _ := out["status"].(map[string]any)
	chans, _ := st["channels"].(map[string]any)
	if _, ok := chans[s.channel]; out["type"] != "status" || !ok {
		t.Fatalf("status row %v", out)
	}
}
