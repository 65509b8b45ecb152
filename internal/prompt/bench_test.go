package prompt

import (
	"fmt"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
)

// benchStanding is a realistic standing context: our base prompt plus persona, core and canvas.
func benchStanding() Standing {
	return Standing{
		Base:   DefaultBasePrompt(),
		System: "You are Builder Bot, the team's Go engineer. Prefer small, reviewed changes; explain trade-offs in two sentences or fewer; run the tests before claiming something works.",
		Team:   "Ship behind flags. Never force-push main.",
		Core:   "- Alice owns the relay and the release train.\n- Bob reviews harness changes.\n- CI runs on every PR; flaky tests go to #eng-flakes.",
		Canvas: &Canvas{EventID: idN(900), Modified: time.Unix(int64(t0), 0), ChannelID: chanID},
	}
}

// simulateThread renders a thread conversation of the given number of turns on the
// user-message route: Alice mentions the agent with one line, the agent answers, repeat. The
// session's delivery ledger grows as the harness would commit it after each successful turn.
// resend=true re-sends standing context every turn (the behaviour change 1 removed).
func simulateThread(turns int, resend bool) []Stats {
	root := msg(1000, alice, "@Builder Bot the relay drops AUTH on reconnect, can you dig in?", mention(agent))
	thread := []nostr.Event{root}
	delivered := map[string]bool{}
	var agentNewest *nostr.Event
	var out []Stats
	for turn := 1; turn <= turns; turn++ {
		trigger := root
		in := Input{Channel: stdChannel, Profiles: stdProfiles, Self: agent, Delivered: delivered,
			Standing: benchStanding(), IncludeStanding: resend || turn == 1}
		if turn > 1 {
			n := 1000 + 2*turn
			trigger = reply(n, alice, fmt.Sprintf("@Builder Bot follow-up %d: what about the backoff?", turn), root.ID, root.ID, mention(agent))
			thread = append(thread, trigger)
			fetched := thread
			if len(fetched) > 13 { // root + limit+1 newest replies, as the relay returns them
				fetched = append([]nostr.Event{root}, thread[len(thread)-13:]...)
			}
			w := BuildThreadContext(root.ID, fetched, agentNewest, 12, int64(len(thread)-1))
			in.Context = &w
		}
		in.Events = []nostr.Event{trigger}
		res := Build(in)
		out = append(out, res.Stats)
		for _, id := range res.DeliveredIDs {
			delivered[id] = true
		}
		ans := reply(1001+2*turn, agent, fmt.Sprintf("Answer %d: the backoff resets on AUTH OK; patch is up.", turn), root.ID, trigger.ID)
		thread = append(thread, ans)
		agentNewest = &thread[len(thread)-1]
	}
	return out
}

// completeThreadMention is one human one-line mention in a thread whose context is complete.
func completeThreadMention() Stats {
	return Build(Input{
		Events: []nostr.Event{tTrigger}, Channel: stdChannel, Profiles: stdProfiles, Self: agent,
		Context: window(tRoot, tBob, tAgent, tTrigger), Delivered: map[string]bool{},
	}).Stats
}

func sumBytes(st []Stats) (total, standing int) {
	for _, s := range st {
		total += s.PromptBytes
		standing += s.StandingBytes
	}
	return
}

func TestStandingContextSentOnlyOnFirstTurn(t *testing.T) {
	st := simulateThread(20, false)
	if !st[0].StandingIncluded || st[0].StandingBytes == 0 {
		t.Fatal("turn 1 must carry standing context")
	}
	for i, s := range st[1:] {
		if s.StandingIncluded || s.StandingBytes != 0 {
			t.Fatalf("turn %d carried %d standing bytes", i+2, s.StandingBytes)
		}
	}
	once, _ := sumBytes(st)
	every, _ := sumBytes(simulateThread(20, true))
	if float64(every)/float64(once) < 2 {
		t.Fatalf("re-sending standing should cost at least 2x: once=%d every=%d", once, every)
	}
}

func TestFramingForCompleteThreadMentionUnderBudget(t *testing.T) {
	s := completeThreadMention()
	if f := s.FramingBytes(); f > 1536 {
		t.Fatalf("framing is %d bytes, budget 1536", f)
	}
}

// BenchmarkPromptBytesPerTurn reports the figure behind change 1: bytes sent over a 20-turn
// thread conversation with standing context once per session vs on every turn, and the
// framing bytes of one complete-context thread mention.
func BenchmarkPromptBytesPerTurn(b *testing.B) {
	var once, every []Stats
	for b.Loop() {
		once = simulateThread(20, false)
		every = simulateThread(20, true)
	}
	onceTotal, _ := sumBytes(once)
	everyTotal, everyStanding := sumBytes(every)
	later := 0
	for _, s := range once[1:] {
		later += s.StandingBytes
	}
	b.ReportMetric(float64(onceTotal)/20, "bytes/turn-once")
	b.ReportMetric(float64(everyTotal)/20, "bytes/turn-every")
	b.ReportMetric(float64(everyTotal)/float64(onceTotal), "ratio-every/once")
	b.ReportMetric(float64(everyStanding)/20, "standing-bytes/turn-every")
	b.ReportMetric(float64(later), "standing-bytes-turns2+")
	b.ReportMetric(float64(completeThreadMention().FramingBytes()), "framing-bytes")
}
