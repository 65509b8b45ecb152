package harness_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/buzz-harness/buzz/internal/testbin"
	"github.com/buzz-harness/buzz/internal/testwait"
)

// BenchmarkPoolSleep runs buzz-acp with ten scripted agents and --idle-pool-sleep 5 and reports
// the resident memory of buzz-acp alone and of its whole process tree (with the agents) while
// all ten idle, and again once all ten sleep; then mention → prompt written for a warm agent and
// for a slept one (the woken agent reloads the channel's session). -benchtime=1x; -count=3.
func BenchmarkPoolSleep(b *testing.B) {
	for range b.N {
		s := newStack(b)
		activity := filepath.Join(b.TempDir(), "activity.jsonl")
		s.start([]string{"--agents", "10", "--idle-pool-sleep", "5", "--activity-log", activity, "--log-level", "info",
			"--session-policy", "channel"}, "TESTAGENT_NO_CLI=1")
		pid := s.harness.Process.Pid
		s.logs.WaitLines(b, "agent ready", 10, 2*time.Minute)
		time.Sleep(time.Second) // let the starts settle before reading memory
		selfAwake, treeAwake := testbin.RSSKiB(pid), testbin.TreeRSSKiB(pid)

		s.mention(s.ownerSK, "warm up")
		s.waitRecordedFor(1, time.Minute)
		time.Sleep(1200 * time.Millisecond) // the channel's next turn waits out its last one's second
		s.mention(s.ownerSK, "warm sample")
		s.waitRecordedFor(2, time.Minute)

		s.logs.WaitLines(b, "agent idle; stopping it", 10, 2*time.Minute)
		testwait.Eventually(b, time.Minute, func() bool { return len(testbin.Children(pid)) == 0 }, "every slept agent to exit")
		selfAsleep, treeAsleep := testbin.RSSKiB(pid), testbin.TreeRSSKiB(pid)

		s.mention(s.ownerSK, "wake sample")
		s.waitRecordedFor(3, time.Minute)
		lat := promptLatencies(b, activity)
		if len(lat) != 3 {
			b.Fatalf("%d latencies, want 3", len(lat))
		}
		s.kill()
		b.ReportMetric(float64(selfAwake)/1024, "acp-awake-MiB")
		b.ReportMetric(float64(treeAwake)/1024, "tree-awake-MiB")
		b.ReportMetric(float64(selfAsleep)/1024, "acp-asleep-MiB")
		b.ReportMetric(float64(treeAsleep)/1024, "tree-asleep-MiB")
		b.ReportMetric(float64(lat[1].Microseconds())/1000, "warm-ms")
		b.ReportMetric(float64(lat[2].Microseconds())/1000, "wake-ms")
	}
}
