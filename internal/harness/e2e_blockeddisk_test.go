package harness_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/atomicfile"
	"github.com/buzz-harness/buzz/internal/harness"
	"github.com/buzz-harness/buzz/internal/sessionstore"
)

// TestLoopAnswersOtherConversationsWhileStateWritesBlock stalls every state-file rewrite (the
// session store, the agent record, the permission questions) on a disk that does not answer.
// The loop never waits for one: three threads are answered and an owner command is carried out
// while the writes hang; once the disk answers, the store holds every session.
func TestLoopAnswersOtherConversationsWhileStateWritesBlock(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	stalled, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var cfg harness.Config
	harness.SetStateWriteOptions(&cfg, atomicfile.BeforeRename(func(string) error {
		once.Do(func() { close(stalled) })
		select {
		case <-release:
		case <-time.After(2 * time.Minute): // never outlive the test
		}
		return nil
	}))
	cancel, ran := s.runInProcess(t, cfg)
	defer cancel()

	first := s.mention(s.ownerSK, "first thread")
	s.waitReply(first.ID)
	select {
	case <-stalled:
	case <-time.After(30 * time.Second):
		t.Fatal("no state write reached the disk")
	}
	second := s.mention(s.ownerSK, "second thread, while the disk hangs")
	s.waitReply(second.ID)
	status := s.mention(s.ownerSK, "!status")
	if row := s.waitOutcome(status.ID); row["type"] != "status" {
		t.Fatalf("!status answered %v", row)
	}
	third := s.mention(s.ownerSK, "third thread")
	s.waitReply(third.ID)

	close(release)
	cancel()
	if err := <-ran; err != nil {
		t.Fatalf("Run: %v", err)
	}
	raw, err := os.ReadFile(filepath.Join(s.stateDir, sessionstore.FileName(s.agentPK)))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Sessions map[string]json.RawMessage `json:"sessions"`
	}
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	for _, m := range []nostr.Event{first, second, third} {
		if _, ok := file.Sessions[s.channel+":"+m.ID]; !ok {
			t.Errorf("thread %s has no session on file once the disk answered: %s", m.ID, raw)
		}
	}
}
