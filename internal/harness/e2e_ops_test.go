package harness_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/client"
	"github.com/buzz-harness/buzz/internal/clock"
	"github.com/buzz-harness/buzz/internal/harness"
	"github.com/buzz-harness/buzz/internal/journal"
	"github.com/buzz-harness/buzz/internal/opshttp/opstest"
	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/testwait"
)

var metricsURL = regexp.MustCompile(`buzz-acp metrics: (http://\S+)`)

// waitMetric scrapes until series has value want.
func (s *stack) waitMetric(url, series string, want float64) map[string]float64 {
	s.t.Helper()
	var m map[string]float64
	testwait.Eventually(s.t, 30*time.Second, func() bool {
		m = opstest.Scrape(s.t, url)
		return m[series] == want
	}, fmt.Sprintf("%s = %v", series, want))
	return m
}

func (s *stack) metricsURL() string {
	s.t.Helper()
	m := metricsURL.FindStringSubmatch(s.logs.String())
	if m == nil {
		s.t.Fatalf("buzz-acp printed no metrics URL:\n%s", s.logs.String())
	}
	return m[1]
}

func TestMetricsMoveAfterARealTurnAResumeAndARelayReconnect(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start([]string{"--metrics-addr", "127.0.0.1:0"}, "TESTAGENT_COST_PER_TURN=0.25")
	url := s.metricsURL()
	before := opstest.Scrape(t, url)
	for _, series := range []string{`buzz_acp_turns_total{outcome="answered"}`, `buzz_acp_turns_total{outcome="fallback"}`,
		`buzz_acp_turns_total{outcome="silent"}`, `buzz_acp_turns_total{outcome="failed"}`, `buzz_acp_turns_total{outcome="cancelled"}`,
		`buzz_acp_session_resumes_total{outcome="loaded"}`, "buzz_acp_event_prompt_latency_seconds_count", "buzz_acp_queue_depth"} {
		if v, ok := before[series]; !ok || v != 0 {
			t.Fatalf("before any turn %s = %v (present %v), want 0", series, v, ok)
		}
	}

	m := s.mention(s.ownerSK, "count me")
	first := s.waitReply(m.ID)
	after := s.waitMetric(url, `buzz_acp_turns_total{outcome="answered"}`, 1)
	agent := `agent="buzz-testagent"`
	switch {
	case after["buzz_acp_event_prompt_latency_seconds_count"] != 1:
		t.Fatalf("latency observations %v, want 1", after["buzz_acp_event_prompt_latency_seconds_count"])
	case after["buzz_acp_agent_spawns_total"] != 1 || after["buzz_acp_agent_respawns_total"] != 0:
		t.Fatalf("spawns %v respawns %v, want 1 and 0", after["buzz_acp_agent_spawns_total"], after["buzz_acp_agent_respawns_total"])
	case after[`buzz_acp_tokens_total{`+agent+`,type="input"}`] <= 0 || after[`buzz_acp_tokens_total{`+agent+`,type="output"}`] <= 0:
		t.Fatalf("tokens not counted: %v", after)
	case after[`buzz_acp_cost_usd_total{`+agent+`}`] != 0.25:
		t.Fatalf("cost %v, want the agent's 0.25", after[`buzz_acp_cost_usd_total{`+agent+`}`])
	case after["process_resident_memory_bytes"] <= 0:
		t.Fatal("no process metrics")
	}
	// The gauges follow the loop's snapshot (once a second).
	s.waitMetric(url, "buzz_acp_sessions_live", 1)
	s.waitMetric(url, `buzz_acp_agents{state="ready"}`, 1)

	s.relay.Restart(t)
	s.waitMetric(url, "buzz_acp_relay_reconnects_total", 1)

	// A restart reopens the thread's session with session/load.
	s.kill()
	s.start([]string{"--metrics-addr", "127.0.0.1:0"})
	url = s.metricsURL()
	again := s.mention(s.ownerSK, "still there?", replyTo(m.ID))
	s.waitNewReply(m.ID, first)
	s.waitPrompted(again.ID)
	s.waitMetric(url, `buzz_acp_session_resumes_total{outcome="loaded"}`, 1)
}

func TestLazyPoolStartsAnAgentOnlyOnceAMentionWaits(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start([]string{"--lazy-pool"})
	m := s.mention(s.ownerSK, "wake up")
	s.waitReply(m.ID)
	logs := s.logs.String()
	queued, waking, ready := strings.Index(logs, "msg=queued"), strings.Index(logs, "waking agent for waiting work"), strings.Index(logs, "agent ready")
	if queued < 0 || waking < queued || ready < waking {
		t.Fatalf("want the mention queued, then the agent woken, then ready; output:\n%s", logs)
	}
	if n := len(s.methods("initialize")); n != 1 {
		t.Fatalf("%d agents initialized, want 1", n)
	}
}

// TestSleptAgentWakesOnTheNextMentionAndLoadsItsSession runs the harness on a fake clock: the
// agent's idle minute passes in one step.
func TestSleptAgentWakesOnTheNextMentionAndLoadsItsSession(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	clk := clock.NewFake(time.Now())
	cancel, _ := s.runInProcess(t, harness.Config{Clock: clk, IdlePoolSleep: time.Minute})
	defer cancel()
	m := s.mention(s.ownerSK, "codeword=otter")
	s.waitLog("msg=queued", 20*time.Second)
	clk.Advance(time.Second) // a turn waits out the harness's first second (turnEnds)
	first := s.waitReply(m.ID)
	s.waitLog("turn done", 20*time.Second)

	clk.Advance(61 * time.Second)
	s.waitLog("agent idle; stopping it until the next mention", 20*time.Second)
	// If the first turn ended before its reply came back to the harness, its thread waits for
	// the safety net's check, armed when the turn ended: on a loaded machine that can be after
	// the Advance above. The loop slept the agent after arming it, so this fires it either way.
	// The check's end counts as the thread's last turn ending: the next one waits for that
	// (fake) second to pass, so the clock moves on once it has ended.
	clk.Advance(2 * time.Second)
	if strings.Contains(s.logs.String(), "reply check: waiting for the answer to settle") {
		s.waitLog("reply check: the answer is there", 20*time.Second)
		clk.Advance(time.Second)
	}
	ask := s.mention(s.ownerSK, "codeword?", replyTo(m.ID))
	reply := s.waitNewReply(m.ID, first)
	if !strings.Contains(reply.Content, "codeword: otter") {
		t.Fatalf("reply %q: the woken agent lost the thread's session", reply.Content)
	}
	s.waitPrompted(ask.ID)
	if n, loads := len(s.methods("initialize")), len(s.methods("session/load")); n != 2 || loads != 1 {
		t.Fatalf("%d initialize and %d session/load, want 2 and 1 (a new process reloading the session)", n, loads)
	}
}

// TestExitAfterInactivityExitsZeroWithNothingLeftInTheJournal is the scale-to-zero round: a
// mention wakes a cold start (BUZZ_ACP_REPLAY_FLOOR), is answered, and the harness exits.
func TestExitAfterInactivityExitsZeroWithNothingLeftInTheJournal(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	m := s.mention(s.ownerSK, "one job, then quiet")
	s.start([]string{"--exit-after-inactivity", "1"}, "BUZZ_ACP_REPLAY_FLOOR="+strconv.FormatInt(int64(m.CreatedAt)-5, 10))
	s.waitReply(m.ID)
	select {
	case err := <-s.exited:
		s.harness = nil
		if err != nil {
			t.Fatalf("buzz-acp exited with %v, want 0; output:\n%s", err, s.logs.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("buzz-acp still running long after it went quiet; output:\n%s", s.logs.String())
	}
	if !strings.Contains(s.logs.String(), "no activity; exiting") {
		t.Fatalf("exited without saying why:\n%s", s.logs.String())
	}
	j, err := journal.Open(s.stateDir, s.agentPK, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if p := j.Pending(); len(p) != 0 {
		t.Fatalf("%d journal entries left pending after an idle exit", len(p))
	}
	if !j.Handled(m.ID) {
		t.Fatal("the answered mention is not recorded as handled")
	}
}

func TestReplayFloorAnswersTheMentionThatWokeAColdStart(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	// Sent before the harness ever ran: a first start without the floor begins at now.
	sent := time.Now().Add(-time.Minute)
	ev := nostr.Event{Kind: 9, Content: "are you up?", CreatedAt: nostr.Timestamp(sent.Unix()),
		Tags: nostr.Tags{{"h", s.channel}, {"p", s.agentPK}}}
	if err := ev.Sign(s.ownerSK); err != nil {
		t.Fatal(err)
	}
	s.relay.Publish(t, s.ownerSK, ev)
	s.start(nil, "BUZZ_ACP_REPLAY_FLOOR="+strconv.FormatInt(sent.Unix()-5, 10))
	s.waitReply(ev.ID)
}

func TestSpendCapWarnsTheOwnerThenAnswersWithANoticeUntilRaised(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	args := []string{"--max-cost-per-day", "1"}
	s.start(args, "TESTAGENT_COST_PER_TURN=0.85")
	first := s.mention(s.ownerSK, "spend a bit")
	s.waitReply(first.ID)
	warn := s.waitOutcome(first.ID)
	if warn["type"] != harness.RowBudgetWarning || warn["cost_usd"] != 0.85 || warn["cap_usd"] != 1.0 {
		t.Fatalf("80 %% row %v", warn)
	}
	second := s.mention(s.ownerSK, "spend past the cap") // $0.85 < $1: still answered
	s.waitReply(second.ID)
	s.waitSpend(1.7)

	// Kept across a restart: the next mention gets the notice, not a turn.
	s.kill()
	s.start(args, "TESTAGENT_COST_PER_TURN=0.85")
	prompts := len(s.methods("session/prompt"))
	refused := s.mention(s.ownerSK, "one more?")
	notice := s.waitReply(refused.ID)
	if notice.PubKey != s.agentPK || !strings.Contains(notice.Content, "$1.70 of my $1.00 daily spending cap") ||
		!hasTag(notice, harness.FailureMarker) || !hasTagValue(notice, "p", s.ownerPK) {
		t.Fatalf("refusal %q tags %v, want the cap notice to the asker", notice.Content, notice.Tags)
	}
	status := s.mention(s.ownerSK, "!status")
	spend, _ := s.waitOutcome(status.ID)["spend"].(map[string]any)
	if spend["cost_usd"] != 1.7 || spend["cap_usd"] != 1.0 {
		t.Fatalf("!status spend %v", spend)
	}

	raise := s.mention(s.ownerSK, "!budget 5")
	if row := s.waitOutcome(raise.ID); row["type"] != harness.RowBudget || row["cap_usd"] != 5.0 {
		t.Fatalf("!budget row %v", row)
	}
	after := s.mention(s.ownerSK, "and now?")
	s.waitPrompted(after.ID)
	if n := len(s.methods("session/prompt")); n != prompts+1 {
		t.Fatalf("%d prompts since the restart, want only the one after !budget", n-prompts)
	}
}

// waitSpend waits until the spend record on disk says usd today: written by its own writer
// moments after the turn, so a SIGKILL just after the reply could find it a turn behind.
func (s *stack) waitSpend(usd float64) {
	s.t.Helper()
	path := filepath.Join(s.stateDir, "budget-"+s.agentPK+".json")
	testwait.Eventually(s.t, 20*time.Second, func() bool {
		var day struct {
			CostUSD float64 `json:"costUsd"`
		}
		raw, _ := os.ReadFile(path)
		return json.Unmarshal(raw, &day) == nil && day.CostUSD == usd
	}, fmt.Sprintf("the spend record to say $%v", usd))
}

func hasTag(ev nostr.Event, name string) bool {
	for _, tag := range ev.Tags {
		if len(tag) > 0 && tag[0] == name {
			return true
		}
	}
	return false
}

func hasTagValue(ev nostr.Event, name, value string) bool {
	for _, tag := range ev.Tags {
		if len(tag) > 1 && tag[0] == name && tag[1] == value {
			return true
		}
	}
	return false
}

// TestCatchUpAnswersAll2500MentionsSentWhileDown: ten channels share one subscription filter,
// whose history limit (2,000) is below what piled up; the harness pages back for the rest.
func TestCatchUpAnswersAll2500MentionsSentWhileDown(t *testing.T) {
	if testing.Short() {
		t.Skip("publishes 2,500 events")
	}
	t.Parallel()
	s := newStack(t)
	channels := []string{s.channel}
	for i := 1; i < 10; i++ {
		ch := s.relay.CreateChannel(t, s.ownerSK, fmt.Sprintf("ch%d", i), false)
		s.relay.AddMember(t, s.ownerSK, ch, s.agentPK, "bot")
		channels = append(channels, ch)
	}
	args := []string{"--session-policy", "channel", "--no-reactions", "--no-typing", "--no-presence"}
	s.start(args)
	first := s.mention(s.ownerSK, "before the downtime")
	s.waitReply(first.ID)
	s.waitLog("turn done", 20*time.Second)
	s.kill()

	const n = 2500
	evs := make([]nostr.Event, n)
	want := map[string]bool{}
	for i := range evs {
		evs[i] = nostr.Event{Kind: 9, Content: fmt.Sprintf("while down %d", i), CreatedAt: nostr.Now(),
			Tags: nostr.Tags{{"h", channels[i%len(channels)]}, {"p", s.agentPK}}}
		if err := evs[i].Sign(s.ownerSK); err != nil {
			t.Fatal(err)
		}
		want[evs[i].ID] = true
	}
	published := time.Now()
	publishOverSockets(t, s.relay.URL, s.ownerSK, evs)
	t.Logf("%d mentions published in %v", n, time.Since(published).Round(time.Millisecond))

	started := time.Now()
	s.start(args)
	testwait.Eventually(t, 4*time.Minute, func() bool {
		for _, p := range s.prompts() {
			for _, m := range eventIDInPrompt.FindAllStringSubmatch(p, -1) {
				delete(want, m[1])
			}
		}
		return len(want) == 0
	}, fmt.Sprintf("all %d mentions to be prompted", n))
	t.Logf("%d mentions prompted %v after the restart", n, time.Since(started).Round(time.Millisecond))
	if !strings.Contains(s.logs.String(), "paging back for older events") {
		t.Fatal("all answered without paging: the test no longer exceeds the history limit")
	}
	if turns := len(s.methods("session/prompt")); turns > n/10 {
		t.Fatalf("%d prompts for %d mentions: not batched", turns, n)
	}
	// Every batch was answered in its channel (the test agent replies once per prompt).
	replies := 0
	for _, ch := range channels {
		replies += len(s.relay.Query(t, s.ownerSK, nostr.Filter{Kinds: []int{9}, Authors: []string{s.agentPK}, Tags: nostr.TagMap{"h": {ch}}, Limit: 2000}))
	}
	if prompts := len(s.methods("session/prompt")); replies != prompts {
		t.Fatalf("%d replies for %d prompts", replies, prompts)
	}
}

// publishOverSockets publishes evs (signed) over four WebSocket connections at once, each waiting
// for every OK, and fails the test on any refusal but the relay's per-author rate limit, which it
// waits out as a client would. Over HTTP each event cost a NIP-98 header signed and checked and a
// replay record written: 2,500 took 100 s under the race detector on a loaded machine.
func publishOverSockets(t *testing.T, relayURL, sk string, evs []nostr.Event) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var running, wg sync.WaitGroup
	defer func() { cancel(); running.Wait() }()
	errs := make(chan error, 4)
	for w := range 4 {
		live := client.NewLive(client.LiveConfig{RelayURL: relayURL, SecretKey: sk})
		running.Go(func() { _ = live.Run(ctx) })
		wg.Go(func() {
			for i := w; i < len(evs); i += 4 {
				err := live.Publish(ctx, &evs[i])
				var rej *client.RejectedError
				for errors.As(err, &rej) && protocol.ReasonOf(rej.Message) == protocol.ReasonRateLimited {
					time.Sleep(50 * time.Millisecond)
					err = live.Publish(ctx, &evs[i])
				}
				if err != nil {
					errs <- fmt.Errorf("event %d: %w", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
