package harness_test

import (
	"strings"
	"testing"
	"time"
)

func TestHeartbeatSessionGetsBaseOnlyOnFirstTick(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("waits for two 10 s heartbeat ticks")
	}
	s := newStack(t)
	s.start([]string{"--heartbeat-interval", "10", "--system-prompt", "You are Helper."}, "TESTAGENT_NO_CLI=1")
	s.waitRecordedWithin("session/prompt", 2, time.Minute) // ticks at 10 s and 20 s
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
