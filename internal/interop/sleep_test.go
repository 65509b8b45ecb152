package interop

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/buzz-harness/buzz/internal/testbin"
	"github.com/buzz-harness/buzz/internal/testwait"
)

// TestClaudeAgentACPWokenFromSleepReloadsItsSession: claude-agent-acp idle past --idle-pool-sleep
// is stopped; the next mention starts a new process, which reopens the channel's session (the
// model still sees the first turn). With BUZZ_POOL_FIGURES=1 it runs ten agents and logs the
// memory of buzz-acp's process tree awake and asleep, and the slept agent's mention → prompt
// time (docs/benchmarks.md).
func TestClaudeAgentACPWokenFromSleepReloadsItsSession(t *testing.T) {
	node, script := claudeACP.command(t)
	agents := 1
	if os.Getenv("BUZZ_POOL_FIGURES") == "1" {
		agents = 10
	}
	m := startAnthropic(t, rememberCodeword)
	s := newStack(t)
	t.Cleanup(func() { dumpOnFailure(t, s, m.Requests()) })
	manualPermissions(t, s.home)
	s.start(node, []string{script}, append(claudeEnv(m), "BUZZ_ACP_IDLE_POOL_SLEEP=5", "BUZZ_ACP_AGENTS="+strconv.Itoa(agents))...)
	pid := s.harness.Process.Pid
	s.logs.WaitLines(t, "agent ready", agents, 2*time.Minute)
	time.Sleep(time.Second) // let the starts settle before reading memory
	treeAwake, selfAwake := testbin.TreeRSSKiB(pid), testbin.RSSKiB(pid)

	first := s.mention("codeword=KIWI")
	s.waitReply(first.ID, 60*time.Second)
	s.waitTurns(1, 30*time.Second)
	s.logs.WaitLines(t, "agent idle; stopping it", agents, 2*time.Minute)
	testwait.Eventually(t, time.Minute, func() bool { return len(testbin.Children(pid)) == 0 }, "every slept agent to exit")
	treeAsleep, selfAsleep := testbin.TreeRSSKiB(pid), testbin.RSSKiB(pid)

	second := s.mention("what was the codeword?")
	reply := s.waitReply(second.ID, 60*time.Second)
	if reply.Content != "the codeword is KIWI" {
		t.Fatalf("reply %q: the woken agent did not reopen the channel's session", reply.Content)
	}
	lines := s.acpLines(s.activity)
	if n := len(sent(lines, "session/new")); n != 1 {
		t.Fatalf("%d session/new, want 1 (the woken agent reopens the session)", n)
	}
	if n := len(sent(lines, "session/load")) + len(sent(lines, "session/resume")); n != 1 {
		t.Fatalf("%d session/load or session/resume, want 1", n)
	}
	t.Logf("agents=%d buzz-acp RSS %d → %d KiB, tree %d → %d KiB (awake → asleep); mention → prompt: awake agent, new session %v; slept agent %v",
		agents, selfAwake, selfAsleep, treeAwake, treeAsleep, promptDelay(t, s.activity, first.ID).Round(time.Millisecond),
		promptDelay(t, s.activity, second.ID).Round(time.Millisecond))
}

// promptDelay is, from an activity log, the time from event id's arrival to the session/prompt
// carrying it being written to the agent.
func promptDelay(t *testing.T, file, id string) time.Duration {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var received time.Time
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var ev struct {
			Time time.Time `json:"time"`
			Type string    `json:"type"`
			Data struct {
				EventID    string    `json:"eventId"`
				ReceivedAt time.Time `json:"receivedAt"`
				Dir, Line  string
			} `json:"data"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue
		}
		switch {
		case ev.Type == "event_received" && ev.Data.EventID == id:
			received = ev.Data.ReceivedAt
		case ev.Type == "acp_line" && ev.Data.Dir == "send" && !received.IsZero() &&
			strings.Contains(ev.Data.Line, `"session/prompt"`) && strings.Contains(ev.Data.Line, id):
			return ev.Time.Sub(received)
		}
	}
	t.Fatalf("no prompt carried %s", id)
	return 0
}
