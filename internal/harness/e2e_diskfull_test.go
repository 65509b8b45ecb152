package harness_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A full disk under the state dir: the mention cannot be journaled, so it is not accepted (not
// prompted, nothing marked done) and the log says why in one line. Once space is back, a restart
// asks the relay for everything since the journal's watermark and the mention is answered.
func TestDiskFullStateDirRefusesToAcceptThenRecoversAfterRestart(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.stateDir = filepath.Join(t.TempDir(), "state")
	if err := os.MkdirAll(s.stateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", s.stateDir).CombinedOutput(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("mount tmpfs: %v %s", err, out)
		}
		t.Skipf("cannot mount a small tmpfs here (%v %s); CI runs this as root", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", s.stateDir).Run() })

	s.start(nil)
	first := s.mention(s.ownerSK, "before the disk fills")
	s.waitReply(first.ID)

	filler := filepath.Join(s.stateDir, "filler")
	_ = exec.Command("dd", "if=/dev/zero", "of="+filler, "bs=4k").Run() // runs until ENOSPC
	// The journal's last page may still have room for a record or two; keep mentioning until a
	// write fails. The ones refused are the ones that must not be prompted now.
	var sent []string
	for i := 0; !strings.Contains(s.logs.String(), "cannot journal event"); i++ {
		if i == 20 {
			t.Fatalf("journal writes kept succeeding on a full disk; output:\n%s", s.logs.String())
		}
		id := s.mention(s.ownerSK, fmt.Sprintf("while the disk is full %d", i)).ID
		s.waitLog("event="+id, 10*time.Second) // queued, or refused
		sent = append(sent, id)
	}
	refused := refusedIDs(s.logs.String())
	if len(refused) == 0 {
		t.Fatal("no refused event id in the log")
	}
	// !status is handled after the refused mention: once its row exists, a wrongly accepted
	// mention would be queued already. (The row itself may fail to journal; it is still sent.)
	s.waitOutcome(s.mention(s.ownerSK, "!status").ID)
	for _, p := range s.prompts() {
		for _, id := range refused {
			if strings.Contains(p, id) {
				t.Fatal("an event that could not be journaled was prompted")
			}
		}
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	s.kill()
	s.start(nil)
	for _, id := range refused {
		s.waitPrompted(id)
	}
	_ = sent
}

// refusedIDs reads the event ids of "cannot journal event" log lines.
func refusedIDs(logs string) []string {
	var out []string
	for _, line := range strings.Split(logs, "\n") {
		if !strings.Contains(line, "cannot journal event") {
			continue
		}
		if _, rest, ok := strings.Cut(line, " event="); ok {
			out = append(out, strings.Fields(rest)[0])
		}
	}
	return out
}
