package harness_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/testbin"
)

// TestSoakNothingLost sends mentions from several senders over several channels while buzz-acp is
// SIGKILLed, its agent is SIGKILLed and the relay restarts, then checks that every mention was
// answered exactly once (the test agent's reply lists the event ids of its prompt) or has exactly
// one failure notice. BUZZ_SOAK=full runs the size: 200 mentions, 10 channels, 10 harness
// kills, 10 agent kills (`make soak`); the default is a smaller run for CI.
func TestSoakNothingLost(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("soak")
	}
	mentions, nChannels, harnessKills, agentKills := 40, 4, 3, 3
	if os.Getenv("BUZZ_SOAK") == "full" {
		mentions, nChannels, harnessKills, agentKills = 200, 10, 10, 10
	}
	seed := uint64(time.Now().UnixNano())
	if v, err := strconv.ParseUint(os.Getenv("BUZZ_SOAK_SEED"), 10, 64); err == nil {
		seed = v
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	t.Logf("soak: %d mentions, %d channels, %d harness kills, %d agent kills, 1 relay restart, seed %d",
		mentions, nChannels, harnessKills, agentKills, seed)

	s := newStack(t)
	channels := []string{s.channel}
	for i := 1; i < nChannels; i++ {
		ch := s.relay.CreateChannel(t, s.ownerSK, fmt.Sprintf("soak%d", i), false)
		s.relay.AddMember(t, s.ownerSK, ch, s.agentPK, "bot")
		channels = append(channels, ch)
	}
	senders := []string{s.ownerSK}
	for range 2 {
		sk, _ := newKey(t)
		senders = append(senders, sk)
	}
	keep := os.Getenv("BUZZ_SOAK_KEEP") // a directory to keep the activity log and each run's output in
	if keep == "" {
		keep = t.TempDir()
	}
	activity := filepath.Join(keep, "activity.jsonl")
	run := 0
	saveRun := func() {
		run++
		_ = os.WriteFile(filepath.Join(keep, fmt.Sprintf("buzz-acp-%02d.log", run)), []byte(s.logs.String()), 0o644)
	}
	defer saveRun()
	args := []string{"--respond-to", "anyone", "--agents", "2", "--activity-log", activity, "--log-level", "info"}
	env := []string{"TESTAGENT_REPLY=answered {events}"}
	s.start(args, env...)

	// Kill points, spread at random over the run; the relay restarts halfway.
	actions := map[int][]string{mentions / 2: {"relay"}}
	for range harnessKills {
		i := 2 + rng.IntN(mentions-4)
		actions[i] = append(actions[i], "harness")
	}
	for range agentKills {
		i := 2 + rng.IntN(mentions-4)
		actions[i] = append(actions[i], "agent")
	}

	sent := map[string]int{}
	var order []string
	// A third of the mentions reply in an earlier mention's thread, so they often arrive while
	// that thread's turn runs and are steered into it (the default --multiple-event-handling).
	threadOf := map[string]string{} // mention → its thread's root
	roots := map[string][]string{}  // channel → top-level mentions
	for i := range mentions {
		sk := senders[rng.IntN(len(senders))]
		ch := channels[rng.IntN(len(channels))]
		tags := nostr.Tags{{"h", ch}, {"p", s.agentPK}}
		root := ""
		if rs := roots[ch]; len(rs) > 0 && rng.IntN(3) == 0 {
			root = rs[rng.IntN(len(rs))]
			tags = append(tags, replyTo(root))
		}
		ev := nostr.Event{Kind: 9, Content: fmt.Sprintf("soak mention %d", i), CreatedAt: nostr.Now(), Tags: tags}
		if err := ev.Sign(sk); err != nil {
			t.Fatal(err)
		}
		s.relay.Publish(t, sk, ev)
		if root == "" {
			root = ev.ID
			roots[ch] = append(roots[ch], ev.ID)
		}
		threadOf[ev.ID] = root
		sent[ev.ID] = i
		order = append(order, ev.ID)
		time.Sleep(time.Duration(rng.IntN(40)) * time.Millisecond) // uneven pacing, so kills land mid-turn
		for _, a := range actions[i] {
			switch a {
			case "harness":
				pid := s.harness.Process.Pid
				_ = syscall.Kill(pid, syscall.SIGKILL) // the harness only: its agents see EOF
				<-s.exited
				s.harness = nil
				saveRun()
				s.start(args, env...)
			case "agent":
				for _, pid := range testbin.Children(s.harness.Process.Pid) {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			case "relay":
				s.relay.Stop()
				s.relay.Restart(t)
			}
		}
	}

	// Wait until every mention is accounted for, or give up after a bound.
	deadline := time.Now().Add(3 * time.Minute)
	var answers map[string]int
	var dead map[string]int
	for {
		answers = s.answeredIDs(channels)
		dead = deadLettered(t, activity)
		missing := 0
		for id := range sent {
			if answers[id] == 0 && dead[id] == 0 {
				missing++
			}
		}
		if missing == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	var once, twice, noticed, lost int
	for _, id := range order {
		switch a, d := answers[id], dead[id]; {
		case a == 1 && d == 0:
			once++
		case a == 0 && d == 1:
			noticed++
		case a == 0 && d == 0:
			lost++
			t.Errorf("mention %d (%s) was never answered; what buzz-acp logged about it:\n%s", sent[id], id[:12], soakTrail(keep, s.logs.String(), id))
		default:
			twice++
			t.Errorf("mention %d (%s) answered %d times, %d failure notices", sent[id], id[:12], a, d)
		}
	}
	misthreaded := 0
	for id, roots := range s.answerThreads(channels) {
		for _, r := range roots {
			if want, ok := threadOf[id]; ok && r != want {
				misthreaded++
				t.Errorf("mention %d (%s) answered in thread %s, want its own thread %s", sent[id], id[:12], r[:12], want[:12])
			}
		}
	}
	steered := 0
	for _, id := range order {
		if threadOf[id] != id {
			steered++
		}
	}
	t.Logf("soak result: %d answered once, %d failure notices, %d answered more than once, %d lost, %d answered in another thread (of %d; %d were replies in a thread)",
		once, noticed, twice, lost, misthreaded, mentions, steered)
	if path := os.Getenv("BUZZ_SOAK_REPORT"); path != "" {
		_ = os.WriteFile(path, []byte(fmt.Sprintf("seed=%d mentions=%d channels=%d harness_kills=%d agent_kills=%d relay_restarts=1 answered_once=%d failure_notices=%d answered_twice=%d lost=%d\n",
			seed, mentions, nChannels, harnessKills, agentKills, once, noticed, twice, lost)), 0o644)
	}
}

// answerThreads lists, per event id, the thread roots of the agent replies that name it.
func (s *stack) answerThreads(channels []string) map[string][]string {
	out := map[string][]string{}
	evs := s.relay.Query(s.t, s.ownerSK, nostr.Filter{Kinds: []int{9}, Authors: []string{s.agentPK}, Tags: nostr.TagMap{"h": channels}, Limit: 2000})
	for _, e := range evs {
		rest, ok := strings.CutPrefix(e.Content, "answered ")
		if !ok {
			continue
		}
		root := protocol.ParseThread(e.Tags).Root
		for _, id := range strings.Split(rest, ",") {
			out[strings.TrimSpace(id)] = append(out[strings.TrimSpace(id)], root)
		}
	}
	return out
}

// answeredIDs counts, per event id, the agent replies ("answered <ids>") that name it.
func (s *stack) answeredIDs(channels []string) map[string]int {
	out := map[string]int{}
	evs := s.relay.Query(s.t, s.ownerSK, nostr.Filter{Kinds: []int{9}, Authors: []string{s.agentPK}, Tags: nostr.TagMap{"h": channels}, Limit: 2000})
	for _, e := range evs {
		rest, ok := strings.CutPrefix(e.Content, "answered ")
		if !ok {
			continue
		}
		for _, id := range strings.Split(rest, ",") {
			out[strings.TrimSpace(id)]++
		}
	}
	return out
}

// deadLettered counts dead_letter activity events per event id.
func deadLettered(t *testing.T, path string) map[string]int {
	out := map[string]int{}
	lines, _ := readActivity(path) // none yet: nothing dead-lettered
	for _, e := range lines {
		var d struct {
			Events []string `json:"events"`
		}
		if e.Type == "dead_letter" && json.Unmarshal(e.Data, &d) == nil {
			for _, id := range d.Events {
				out[id]++
			}
		}
	}
	return out
}

// soakTrail collects the log lines of every buzz-acp run (saved in keep, and the current one)
// that name an event, so a lost mention's failure says where it stopped.
func soakTrail(keep, current, id string) string {
	var b strings.Builder
	files, _ := filepath.Glob(filepath.Join(keep, "buzz-acp-*.log"))
	texts := []string{}
	for _, f := range files {
		raw, _ := os.ReadFile(f)
		texts = append(texts, string(raw))
	}
	for i, text := range append(texts, current) {
		for _, line := range strings.Split(text, "\n") {
			if strings.Contains(line, id) || strings.Contains(line, id[:12]) {
				fmt.Fprintf(&b, "  run %d: %s\n", i+1, line)
			}
		}
	}
	if b.Len() == 0 {
		return "  (nothing: it never reached buzz-acp)"
	}
	return b.String()
}
