package harness_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/buzz-harness/buzz/internal/clock"
	"github.com/buzz-harness/buzz/internal/harness"
	"github.com/buzz-harness/buzz/internal/prompt"
	"github.com/buzz-harness/buzz/internal/testwait"
)

// TestHeartbeatSessionGetsBaseOnlyOnFirstTick runs the harness on a fake clock: two 10 s
// heartbeat ticks take no wall time.
func TestHeartbeatSessionGetsBaseOnlyOnFirstTick(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	clk := clock.NewFake(time.Now())
	cancel, _ := s.runInProcess(t, harness.Config{Clock: clk, HeartbeatInterval: 10 * time.Second, HeartbeatAlways: true, SystemPrompt: "You are Helper.", BasePrompt: prompt.DefaultBasePrompt()},
		"TESTAGENT_NO_CLI=1")
	defer cancel()
	s.waitLog("agent ready", 30*time.Second)
	tick := func(prompts int) {
		t.Helper()
		testwait.Eventually(t, 30*time.Second, func() bool {
			if len(s.methods("session/prompt")) >= prompts {
				return true
			}
			clk.Advance(10 * time.Second) // one heartbeat tick (skipped while one still runs)
			return false
		}, fmt.Sprintf("heartbeat prompt %d", prompts))
	}
	tick(1)
	tick(2)
	ps := s.prompts()
	if !strings.HasPrefix(ps[0], "[Base]\n") || !strings.Contains(ps[0], "[System: Heartbeat]") {
		t.Fatalf("first heartbeat:\n%.200s", ps[0])
	}
	if strings.Contains(ps[0], "You are Helper.") {
		t.Fatal("a heartbeat carried the persona")
	}
	if strings.Contains(ps[1], "[Base]") || !strings.Contains(ps[1], "[System: Heartbeat]") {
		t.Fatalf("second heartbeat re-sent [Base]:\n%.200s", ps[1])
	}
	news := s.methods("session/new")
	if len(news) != 1 {
		t.Fatalf("%d session/new for heartbeats, want 1 (reused)", len(news))
	}
	if p := decodeSession(t, news[0]); p.Meta["channelId"] != nil || p.Meta["channelType"] != nil {
		t.Fatalf("heartbeat session carries channel identity: %v", p.Meta)
	}
}
