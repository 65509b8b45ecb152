package harness_test

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol/ownerauth"
	"github.com/buzz-harness/buzz/internal/testbin"
)

// BenchmarkHarnessOverhead measures, with a zero-latency scripted agent, the time from the relay's
// EVENT frame being read by buzz-acp to the session/prompt line being written to the agent, at
// 100 and 1,000 channels with live sessions, and buzz-acp's resident memory per idle channel
// session. Timestamps come from buzz-acp's own activity log. Run with -benchtime=1x. (Not at one
// channel: a conversation's next turn waits for the second in which its previous turn ended to
// pass — turnEnds in turn.go — and a channel is mentioned again only once that cannot apply.)
func BenchmarkHarnessOverhead(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("channels=%d", n), func(b *testing.B) {
			for range b.N {
				o := benchOverhead(b, n, 500, (*stack).startMeasured)
				b.ReportMetric(o.p50, "p50-ms")
				b.ReportMetric(o.p99, "p99-ms")
				b.ReportMetric(o.rssPerSession, "rss-KiB/session")
			}
		})
	}
}

// BenchmarkHarnessOverheadVsCeiling runs the same measurement against buzz-acp and against
// acpceiling (a client that only reads the frame, checks the signature and writes the prompt),
// one after the other on the same machine, and reports both p99s and their ratio: the part of
// the tail that is buzz-acp's rather than the machine's. Run with -benchtime=1x; repeat with
// -count for medians. The relay-observer variant runs buzz-acp attested by its owner, so every
// observer frame is built, sent and accepted; the others run without the observer.
func BenchmarkHarnessOverheadVsCeiling(b *testing.B) {
	for _, v := range []struct {
		name     string
		channels int
		start    func(s *stack, activity string, channels int)
	}{
		{"channels=100", 100, (*stack).startMeasured},
		{"channels=1000", 1000, (*stack).startMeasured},
		{"channels=100,relay-observer", 100, (*stack).startObserved},
	} {
		n := v.channels
		b.Run(v.name, func(b *testing.B) {
			for range b.N {
				ceiling := benchOverhead(b, n, 500, (*stack).startCeiling)
				ours := benchOverhead(b, n, 500, v.start)
				b.ReportMetric(ours.p99, "p99-ms")
				b.ReportMetric(ceiling.p99, "ceiling-p99-ms")
				b.ReportMetric(ours.p99/ceiling.p99, "p99-ratio")
				b.ReportMetric(ours.p50/ceiling.p50, "p50-ratio")
				b.ReportMetric(ours.cpuPerMention, "cpu-ms/mention")
				b.ReportMetric(ceiling.cpuPerMention, "ceiling-cpu-ms/mention")
			}
		})
	}
}

// overhead is one measurement: latency quantiles (ms), resident memory per idle session (KiB),
// and the harness process's CPU time over the measured mentions per mention (ms): what it does
// besides the measured path (safety-net checks, fallback posts, state files) competes for the
// same two cores, and shows in the tail.
type overhead struct{ p50, p99, rssPerSession, cpuPerMention float64 }

// benchOverhead starts a harness with start (which writes its activity log to the given path),
// warms one session per channel, then times samples mentions one at a time.
func benchOverhead(b *testing.B, channels, samples int, start func(s *stack, activity string, channels int)) overhead {
	s := newStack(b)
	ids := []string{s.channel}
	for i := 1; i < channels; i++ {
		ch := s.relay.CreateChannel(b, s.ownerSK, fmt.Sprintf("ch%d", i), false)
		s.relay.AddMember(b, s.ownerSK, ch, s.agentPK, "bot")
		ids = append(ids, ch)
	}
	activity := filepath.Join(b.TempDir(), "activity.jsonl")
	start(s, activity, channels)
	rssBefore := rssKiB(b, s.harness.Process.Pid)

	post := func(ch, text string) {
		ev := nostr.Event{Kind: 9, Content: text, CreatedAt: nostr.Now(), Tags: nostr.Tags{{"h", ch}, {"p", s.agentPK}}}
		if err := ev.Sign(s.ownerSK); err != nil {
			b.Fatal(err)
		}
		s.relay.Publish(b, s.ownerSK, ev)
	}
	// Warm: every channel gets its session.
	for i, ch := range ids {
		post(ch, fmt.Sprintf("warm %d", i))
	}
	// One counter of each for the whole run: each wait then reads only what the agent appended.
	prompts, answers := &promptCounter{}, &promptCounter{method: "session/prompt answered"}
	s.waitCounted(prompts, channels, 5*time.Minute, "received")
	s.waitCounted(answers, channels, time.Minute, "answered")
	rssAfter := rssKiB(b, s.harness.Process.Pid)

	// Measure: one mention at a time, spread over the channels. A conversation's next turn waits
	// until the second in which its previous turn ended has passed (turnEnds in turn.go). At 100
	// channels a channel came round again about a second later, so now and then a sample measured
	// that wait (up to a second) instead of the overhead; each channel's next sample now comes at
	// least minReuse after its previous prompt. The scripted agent answers in text only, so each
	// turn is also a silent one (reply.go): its conversation waits about a second more for the
	// safety net, which minReuse covers too.
	const minReuse = 2500 * time.Millisecond
	cpuBefore := testbin.CPUTime(s.harness.Process.Pid)
	lastPrompt := map[string]time.Time{}
	for _, ch := range ids {
		lastPrompt[ch] = time.Now()
	}
	for i := range samples {
		ch := ids[i*7%channels]
		if wait := minReuse - time.Since(lastPrompt[ch]); wait > 0 {
			time.Sleep(wait) // pacing between samples, not measured
		}
		post(ch, fmt.Sprintf("sample %d", i))
		s.waitCounted(prompts, channels+i+1, time.Minute, "received")
		lastPrompt[ch] = time.Now()
		// One mention at a time: the next goes once the agent has answered this one. Posted
		// while the agent still works, a mention waits for the agent (one turn at a time per
		// process), and the sample times the agent's turn on a busy machine, not the harness.
		s.waitCounted(answers, channels+i+1, time.Minute, "answered")
	}
	cpu := testbin.CPUTime(s.harness.Process.Pid) - cpuBefore
	lat := promptLatencies(b, activity)
	if len(lat) < samples {
		b.Fatalf("measured %d samples, want %d", len(lat), samples)
	}
	s.kill() // before the next measurement starts
	lat = lat[len(lat)-samples:]
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return overhead{p50: ms(lat[len(lat)/2]), p99: ms(lat[len(lat)*99/100]), rssPerSession: float64(rssAfter-rssBefore) / float64(channels),
		cpuPerMention: ms(cpu) / float64(samples)}
}

// startMeasured starts buzz-acp as the overhead benchmark measures it.
func (s *stack) startMeasured(activity string, channels int) {
	// The figure is the overhead of a mention to a live session: channel policy (under thread policy
	// every top-level mention opens a new session) and room for every channel's session (past the
	// cache bound the least recently used is closed, and the next mention there loads it again).
	s.start([]string{"--activity-log", activity, "--log-level", "info", "--session-policy", "channel",
		"--max-cached-conversation-sessions", strconv.Itoa(channels), "--relay-observer=false"}, "TESTAGENT_NO_CLI=1", "TESTAGENT_RECORD_ANSWERS=1")
}

// startObserved is startMeasured with the relay observer on and accepted: the owner attests the
// agent (BUZZ_AUTH_TAG), so the relay forwards every frame (nobody subscribes to them).
func (s *stack) startObserved(activity string, channels int) {
	tag, err := ownerauth.Issue(s.ownerSK, s.agentPK, "", nil)
	if err != nil {
		s.t.Fatal(err)
	}
	s.start([]string{"--activity-log", activity, "--log-level", "info", "--session-policy", "channel",
		"--max-cached-conversation-sessions", strconv.Itoa(channels)}, "TESTAGENT_NO_CLI=1", "TESTAGENT_RECORD_ANSWERS=1", "BUZZ_AUTH_TAG="+tag.JSON())
}

// startCeiling starts acpceiling in buzz-acp's place, with the same agent and relay.
func (s *stack) startCeiling(activity string, _ int) {
	s.t.Helper()
	bin := testbin.Dir(s.t, "internal/acpceiling")
	cmd := exec.Command(filepath.Join(bin, "acpceiling"), s.relay.URL, filepath.Join(s.bin, "testagent"), s.t.TempDir(), activity)
	cmd.Env = append(os.Environ(), "BUZZ_PRIVATE_KEY="+s.agentSK, "TESTAGENT_RECORD="+s.record,
		"TESTAGENT_STATE_DIR="+s.agentDir, "TESTAGENT_NO_CLI=1", "TESTAGENT_RECORD_ANSWERS=1")
	logs := &testbin.Output{}
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	s.run(cmd, logs)
}

// waitRecordedFor waits until the test agent has recorded n prompts.
func (s *stack) waitRecordedFor(n int, timeout time.Duration) {
	s.t.Helper()
	s.waitCounted(&promptCounter{}, n, timeout, "received")
}

// waitCounted waits until c counts n records in the agent's record file (what: how the failure
// names them). c reads only what the agent appended since its last look, so a caller that waits
// again and again keeps one counter: re-parsing the whole record file (megabytes at 1,000
// channels) for every wait took a core away from the buzz-acp being measured.
func (s *stack) waitCounted(c *promptCounter, n int, timeout time.Duration, what string) {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	for c.count(s.record) < n {
		if time.Now().After(deadline) {
			s.t.Fatalf("agent %s %d prompts, want %d", what, c.n, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// promptCounter counts the records of one method (session/prompt when unset) in a growing
// record file, incrementally.
type promptCounter struct {
	method  string
	off     int64
	partial []byte // an unfinished last line
	n       int
}

func (c *promptCounter) count(path string) int {
	f, err := os.Open(path)
	if err != nil {
		return c.n
	}
	defer f.Close()
	if _, err := f.Seek(c.off, io.SeekStart); err != nil {
		return c.n
	}
	data, _ := io.ReadAll(f)
	c.off += int64(len(data))
	data = append(c.partial, data...)
	for {
		line, rest, ok := bytes.Cut(data, []byte("\n"))
		if !ok {
			break
		}
		data = rest
		method := cmp.Or(c.method, "session/prompt")
		var r record
		if bytes.Contains(line, []byte(`"`+method+`"`)) && json.Unmarshal(line, &r) == nil && r.Method == method {
			c.n++
		}
	}
	c.partial = append(c.partial[:0:0], data...)
	return c.n
}

var eventIDInPrompt = regexp.MustCompile(`Event ID: ([0-9a-f]{64})`)

// promptLatencies pairs each event_received with the session/prompt line that carried the event.
func promptLatencies(b *testing.B, path string) []time.Duration {
	lines, err := readActivity(path)
	if err != nil {
		b.Fatal(err)
	}
	received := map[string]time.Time{}
	var out []time.Duration
	for _, e := range lines {
		switch e.Type {
		case "event_received":
			var d struct {
				EventID    string    `json:"eventId"`
				ReceivedAt time.Time `json:"receivedAt"`
			}
			_ = json.Unmarshal(e.Data, &d)
			received[d.EventID] = d.ReceivedAt
		case "acp_line":
			var d struct{ Dir, Line string }
			_ = json.Unmarshal(e.Data, &d)
			if d.Dir != "send" || !strings.Contains(d.Line, `"session/prompt"`) {
				continue
			}
			for _, m := range eventIDInPrompt.FindAllStringSubmatch(d.Line, -1) {
				if at, ok := received[m[1]]; ok {
					out = append(out, e.Time.Sub(at))
					delete(received, m[1])
				}
			}
		}
	}
	return out
}

func rssKiB(b *testing.B, pid int) int {
	n := testbin.RSSKiB(pid)
	if n == 0 {
		b.Fatal("no VmRSS")
	}
	return n
}

// BenchmarkRestartResume50 restarts buzz-acp with 50 remembered channel sessions and one
// mention waiting in each: time from process start to the first resumed prompt written, and
// the share of channels resumed with session/load (the test agent supports load). -benchtime=1x.
func BenchmarkRestartResume50(b *testing.B) {
	for range b.N {
		const n = 50
		s := newStack(b)
		ids := []string{s.channel}
		for i := 1; i < n; i++ {
			ch := s.relay.CreateChannel(b, s.ownerSK, fmt.Sprintf("ch%d", i), false)
			s.relay.AddMember(b, s.ownerSK, ch, s.agentPK, "bot")
			ids = append(ids, ch)
		}
		post := func(ch, text string) {
			ev := nostr.Event{Kind: 9, Content: text, CreatedAt: nostr.Now(), Tags: nostr.Tags{{"h", ch}, {"p", s.agentPK}}}
			if err := ev.Sign(s.ownerSK); err != nil {
				b.Fatal(err)
			}
			s.relay.Publish(b, s.ownerSK, ev)
		}
		s.start([]string{"--log-level", "info", "--session-policy", "channel"}, "TESTAGENT_NO_CLI=1")
		for i, ch := range ids {
			post(ch, fmt.Sprintf("first %d", i))
		}
		s.waitRecordedFor(n, 2*time.Minute)
		s.kill()
		for i, ch := range ids {
			post(ch, fmt.Sprintf("second %d", i))
		}
		loadsBefore, newsBefore := len(s.methods("session/load")), len(s.methods("session/new"))
		activity := filepath.Join(b.TempDir(), "activity.jsonl")
		started := time.Now()
		s.start([]string{"--activity-log", activity, "--log-level", "info", "--session-policy", "channel"}, "TESTAGENT_NO_CLI=1")
		s.waitRecordedFor(2*n, 2*time.Minute)
		first := firstPromptAt(b, activity)
		loads := len(s.methods("session/load")) - loadsBefore
		news := len(s.methods("session/new")) - newsBefore
		b.ReportMetric(float64(first.Sub(started).Milliseconds()), "ms-to-first-resumed-prompt")
		b.ReportMetric(100*float64(loads)/n, "%resumed")
		b.ReportMetric(float64(news), "new-sessions")
	}
}

func firstPromptAt(b *testing.B, path string) time.Time {
	raw, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		var e struct {
			Time time.Time `json:"time"`
			Type string    `json:"type"`
			Data struct{ Dir, Line string }
		}
		if json.Unmarshal([]byte(line), &e) == nil && e.Type == "acp_line" && e.Data.Dir == "send" && strings.Contains(e.Data.Line, `"session/prompt"`) {
			return e.Time
		}
	}
	b.Fatal("no session/prompt in the activity log")
	return time.Time{}
}

// BenchmarkThreads20 posts 20 top-level mentions in one channel back to back, under the thread
// policy with four agents, after four warm-up threads have started every agent. With reply=cli
// the test agent answers each through the real buzz CLI; with reply=none it is a zero-latency
// agent (the turn ends as soon as it is prompted). It reports the time from the first post until
// all 20 turns are done (reply=cli: answered in their own threads), and the time from an event
// read to its prompt written, p50 and worst — which includes waiting for one of the four agents
// and opening the thread's session. -benchtime=1x.
func BenchmarkThreads20(b *testing.B) {
	for _, reply := range []string{"none", "cli"} {
		b.Run("reply="+reply, func(b *testing.B) {
			for range b.N {
				benchThreads(b, 20, reply == "cli")
			}
		})
	}
}

func benchThreads(b *testing.B, n int, cli bool) {
	s := newStack(b)
	activity := filepath.Join(b.TempDir(), "activity.jsonl")
	env := "TESTAGENT_NO_CLI=1"
	if cli {
		env = "TESTAGENT_REPLY=answered {events}"
	}
	s.start([]string{"--activity-log", activity, "--log-level", "info", "--session-policy", "thread", "--agents", "4"}, env)
	ended := 0
	waitDone := func(ids map[string]bool) {
		deadline := time.Now().Add(2 * time.Minute)
		for {
			done := 0
			if cli {
				for id, c := range s.answeredIDs([]string{s.channel}) {
					if ids[id] && c > 0 {
						done++
					}
				}
			} else {
				done = countActivity(b, activity, "turn_ended") - ended
			}
			if done == len(ids) {
				ended += done
				return
			}
			if time.Now().After(deadline) {
				b.Fatalf("%d of %d threads done; buzz-acp output:\n%s", done, len(ids), s.logs.String())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	warm := map[string]bool{}
	for i := range 4 {
		warm[s.mention(s.ownerSK, fmt.Sprintf("warm-up %d", i)).ID] = true
	}
	waitDone(warm)
	ids := map[string]bool{}
	started := time.Now()
	for i := range n {
		ids[s.mention(s.ownerSK, fmt.Sprintf("thread %d", i)).ID] = true
	}
	waitDone(ids)
	elapsed := time.Since(started)
	if news := len(s.methods("session/new")); news != n+len(warm) {
		b.Fatalf("%d sessions opened, want one per thread (%d)", news, n+len(warm))
	}
	lat := promptLatencies(b, activity)[len(warm):]
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(float64(elapsed.Milliseconds()), "ms-all-done")
	b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
	b.ReportMetric(ms(lat[len(lat)-1]), "max-ms")
}

// countActivity counts the activity log's events of one type.
func countActivity(b *testing.B, path, typ string) int {
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return bytes.Count(raw, []byte(`"type":"`+typ+`"`))
}

// BenchmarkThreadSessionMemory measures buzz-acp's resident memory per live thread session where
// fixed costs and per-turn garbage no longer dominate: 200 threads on four agents with room for
// all of them (--max-cached-conversation-sessions 64), after four warm-up threads. -benchtime=1x.
func BenchmarkThreadSessionMemory(b *testing.B) {
	for range b.N {
		const n = 200
		s := newStack(b)
		s.start([]string{"--log-level", "info", "--session-policy", "thread", "--agents", "4",
			"--max-cached-conversation-sessions", "64"}, "TESTAGENT_NO_CLI=1")
		for i := range 4 {
			s.mention(s.ownerSK, fmt.Sprintf("warm-up %d", i))
		}
		s.waitRecordedFor(4, time.Minute)
		rssBefore := rssKiB(b, s.harness.Process.Pid)
		for i := range n {
			s.mention(s.ownerSK, fmt.Sprintf("thread %d", i))
		}
		s.waitRecordedFor(4+n, 2*time.Minute)
		rssAfter := rssKiB(b, s.harness.Process.Pid)
		if news := len(s.methods("session/new")); news != n+4 {
			b.Fatalf("%d sessions opened, want one per thread (%d)", news, n+4)
		}
		b.ReportMetric(float64(rssAfter-rssBefore)/n, "rss-KiB/session")
	}
}
