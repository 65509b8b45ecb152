package harness_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/harness"
)

// BenchmarkSilentTurns200 runs 200 scripted turns, one at a time, that mix the four ways an
// answer fails to reach the thread — text only (no send), a send without the key (exit 3), a send
// the permission mode denies (the agent then says so in text), a send the relay refuses (a
// private channel the agent is not in) — then 50 turns the agent answers with the CLI. It
// reports how many mentions ended with a visible answer or a notice (and any with two), and the
// harness's relay queries per turn, split at the prompt, all of them and the safety net's alone
// (its look for the agent's messages: kinds 9 and 40002 by the agent, no #h). buzz-acp runs
// behind a proxy that sees its HTTP queries; the agent's CLI talks to the relay directly. Run
// with -benchtime=1x.
func BenchmarkSilentTurns200(b *testing.B) {
	for range b.N {
		s := newStack(b)
		stranger := s.relay.CreateChannel(b, s.ownerSK, "not-joined", true)
		proxy := startStallProxy(b, s.relay.URL)
		activity := b.TempDir() + "/activity.jsonl"
		s.start([]string{"--relay-url", proxy.url(), "--activity-log", activity, "--log-level", "info"},
			"TESTAGENT_RELAY_URL="+s.relay.URL)

		causes := []string{"text", "nokey", "denied", "refused=" + stranger}
		type turn struct {
			cause        string
			posted, seen time.Time
			id           string
		}
		var turns []turn
		ask := func(cause, text string) {
			posted := time.Now()
			m := s.mention(s.ownerSK, text)
			f := nostr.Filter{Kinds: []int{9}, Authors: []string{s.agentPK}, Tags: nostr.TagMap{"e": {m.ID}}}
			for deadline := time.Now().Add(time.Minute); len(s.relay.Query(b, s.ownerSK, f)) == 0; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					b.Fatalf("no answer or notice for turn %d (%s)", len(turns), cause)
				}
			}
			turns = append(turns, turn{cause: cause, posted: posted, seen: time.Now(), id: m.ID})
		}
		for i := range 200 {
			c := causes[i%len(causes)]
			ask(c, fmt.Sprintf("question %d [silent:%s]", i, c))
		}
		for i := range 50 {
			ask("answered", fmt.Sprintf("answered question %d", i))
		}
		// Settled: the last turn's check has ended (its answer was seen) and nothing else runs.
		prompts := promptTimes(b, activity)
		queries := proxy.queries()
		s.kill()

		visible, doubled, fallbacks := 0, 0, 0
		var before, after, netBefore, netAfter [2]int // [silent, answered]
		byAgent := `"authors":["` + s.agentPK + `"]`
		for _, t := range turns {
			evs := s.relay.Query(b, s.ownerSK, nostr.Filter{Kinds: []int{9}, Authors: []string{s.agentPK}, Tags: nostr.TagMap{"e": {t.id}}})
			if t.cause != "answered" {
				switch {
				case len(evs) == 1:
					visible++
				case len(evs) > 1:
					doubled++
				}
				if len(evs) > 0 && marked(evs[0], harness.FallbackMarker) {
					fallbacks++
				}
			}
			k := 0
			if t.cause == "answered" {
				k = 1
			}
			at, ok := prompts[t.id]
			if !ok {
				b.Fatalf("turn %s was never prompted", t.id)
			}
			for _, q := range queries {
				net := 0
				if strings.Contains(q.bytes, byAgent) && strings.Contains(q.bytes, "[9,40002]") && !strings.Contains(q.bytes, `"#h"`) {
					net = 1
				}
				switch {
				case q.at.After(t.posted) && q.at.Before(at):
					before[k]++
					netBefore[k] += net
				case !q.at.Before(at) && !q.at.After(t.seen):
					after[k]++
					netAfter[k] += net
				}
			}
		}
		b.ReportMetric(float64(visible), "visible-of-200")
		b.ReportMetric(float64(doubled), "doubled")
		b.ReportMetric(float64(fallbacks), "fallbacks")
		for k, name := range []string{"silent", "answered"} {
			n := float64(len(turns) - 200)
			if k == 0 {
				n = 200
			}
			b.ReportMetric(float64(before[k])/n, "queries-before-prompt/"+name+"-turn")
			b.ReportMetric(float64(after[k])/n, "queries-after-prompt/"+name+"-turn")
			b.ReportMetric(float64(netBefore[k])/n, "net-queries-before-prompt/"+name+"-turn")
			b.ReportMetric(float64(netAfter[k])/n, "net-queries-after-prompt/"+name+"-turn")
		}
	}
}

// promptTimes is when each event was first written to the agent in a session/prompt, from
// buzz-acp's activity log.
func promptTimes(b *testing.B, path string) map[string]time.Time {
	lines, err := readActivity(path)
	if err != nil {
		b.Fatal(err)
	}
	out := map[string]time.Time{}
	for _, e := range lines {
		var d struct{ Dir, Line string }
		if e.Type != "acp_line" || json.Unmarshal(e.Data, &d) != nil || d.Dir != "send" || !strings.Contains(d.Line, `"session/prompt"`) {
			continue
		}
		for _, m := range eventIDInPrompt.FindAllStringSubmatch(d.Line, -1) {
			if _, ok := out[m[1]]; !ok {
				out[m[1]] = e.Time
			}
		}
	}
	return out
}
