package prompt

import (
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
)

// thread fixture: root by Alice, Bob replies, the agent replies, Alice pings the agent.
var (
	tRoot    = msg(1, alice, "Can someone look at the flaky relay test?")
	tBob     = reply(2, bob, "It fails on reconnect, I think.", idN(1), idN(1))
	tAgent   = reply(3, agent, "Looking now.", idN(1), idN(1))
	tTrigger = reply(4, alice, "@Builder Bot any update?", idN(1), idN(1), mention(agent))
	tNested  = reply(5, alice, "@Builder Bot why reconnect?", idN(1), idN(2), mention(agent))
)

func window(fetched ...nostr.Event) *ThreadWindow {
	w := BuildThreadContext(idN(1), fetched, nil, 12, -1)
	return &w
}

func goldenCases() map[string]Input {
	base := func() Input {
		return Input{Channel: stdChannel, Profiles: stdProfiles, Self: agent, Delivered: map[string]bool{}}
	}
	cases := map[string]Input{}

	in := base()
	in.Events = []nostr.Event{msg(10, alice, "@Builder Bot can you summarise today's PRs?", mention(agent))}
	in.Standing, in.IncludeStanding = testStanding(), true
	cases["channel_single_with_standing"] = in

	in = base()
	in.Events = []nostr.Event{
		msg(10, alice, "@Builder Bot deploy status?", mention(agent)),
		msg(11, bob, "also the release notes", mention(agent)),
	}
	in.Tag = "#release"
	cases["channel_batch"] = in

	in = base()
	in.Events = []nostr.Event{tTrigger}
	in.Context = window(tRoot, tBob, tAgent, tTrigger)
	cases["thread_direct_reply_complete"] = in

	in = base()
	in.Events = []nostr.Event{tNested}
	in.Context = window(tRoot, tBob, tAgent, tNested)
	cases["thread_nested_reply_complete"] = in

	in = base()
	fetched := []nostr.Event{tRoot}
	for i := 20; i < 25; i++ {
		fetched = append(fetched, reply(i, bob, "step", idN(1), idN(1)))
	}
	last := reply(25, alice, "@Builder Bot still broken", idN(1), idN(1), mention(agent))
	fetched = append(fetched, last)
	w := BuildThreadContext(idN(1), fetched, nil, 3, 9)
	in.Events, in.Context = []nostr.Event{last}, &w
	cases["thread_truncated"] = in

	in = base()
	// Two threads in one batch: the window is for the last event's thread only, so it cannot
	// cover the earlier event from the thread rendered above.
	otherRoot := msg(30, bob, "Separate topic: CI cost")
	otherReply := reply(31, bob, "@Builder Bot numbers?", idN(30), idN(30), mention(agent))
	in.Events = []nostr.Event{tTrigger, otherReply}
	ow := BuildThreadContext(idN(30), []nostr.Event{otherRoot, otherReply}, nil, 12, -1)
	in.Context = &ow
	cases["thread_mixed_batch"] = in

	in = base()
	in.Events = []nostr.Event{tTrigger}
	in.Context = window(tBob, tAgent, tTrigger)
	cases["thread_root_missing"] = in

	in = base()
	in.Events = []nostr.Event{tTrigger}
	in.Context = window(tRoot, tBob, tAgent, tTrigger)
	in.Delivered = map[string]bool{tRoot.ID: true, tBob.ID: true}
	cases["thread_previously_delivered"] = in

	in = base()
	in.Events = []nostr.Event{tTrigger}
	in.Context = window(tRoot, tBob, tAgent, tTrigger)
	in.Delivered = map[string]bool{tRoot.ID: true, tBob.ID: true, tAgent.ID: true}
	cases["thread_all_previously_delivered"] = in

	in = base()
	in.Events = []nostr.Event{tTrigger}
	cases["thread_no_context"] = in

	in = base()
	in.Events = []nostr.Event{reply(6, other, "@Builder Bot tests pass on my side", idN(1), idN(1), mention(agent))}
	in.Context = window(tRoot, tBob, tAgent, in.Events[0])
	cases["thread_agent_to_agent"] = in

	// Thread follow: Alice answers the agent's reply without mentioning it.
	in = base()
	followUp := reply(7, alice, "thanks, and the retry count?", idN(1), idN(3))
	in.Events, in.Followed = []nostr.Event{followUp}, map[string]bool{followUp.ID: true}
	in.Context = window(tRoot, tBob, tAgent, followUp)
	cases["thread_followed"] = in

	in = base()
	in.Events = []nostr.Event{followUp, tNested}
	in.Followed = map[string]bool{followUp.ID: true}
	in.Context = window(tRoot, tBob, tAgent, followUp, tNested)
	cases["thread_followed_and_mention"] = in

	dm := Channel{ID: chanID, Type: "dm"}
	in = base()
	in.Channel = dm
	d1 := msg(40, alice, "hey")
	d2 := msg(41, agent, "hi Alice")
	d3 := msg(42, alice, "can you rebase my branch?")
	cw := BuildConversationContext([]nostr.Event{d3, d2, d1}, 12)
	in.Events, in.Context = []nostr.Event{d3}, &cw
	cases["dm_conversation_complete"] = in

	in = base()
	in.Channel = dm
	dr := reply(43, alice, "and this one too", idN(41), idN(41))
	in.Events = []nostr.Event{dr}
	cases["dm_reply_no_context"] = in

	in = base()
	in.Events = []nostr.Event{tNested}
	in.Cancelled = []nostr.Event{tTrigger}
	in.Context = window(tRoot, tBob, tAgent, tTrigger, tNested)
	cases["cancelled_steer_single"] = in

	in = base()
	in.Reason = ReasonInterrupt
	in.Cancelled = []nostr.Event{tTrigger}
	in.Events = []nostr.Event{tNested, reply(6, bob, "@Builder Bot stop, use the other branch", idN(1), idN(1), mention(agent))}
	in.Context = window(tRoot, tBob, tAgent, tTrigger, tNested)
	cases["cancelled_interrupt_batch"] = in
	return cases
}

func TestRenderMatchesGoldens(t *testing.T) {
	for name, in := range goldenCases() {
		t.Run(name, func(t *testing.T) {
			checkGolden(t, name, joinBlocks(renderBlocks(in)))
		})
	}
}

func TestAuxiliaryRenderersMatchGoldens(t *testing.T) {
	now := time.Unix(int64(t0), 0)
	st := testStanding()
	checkGolden(t, "heartbeat_first_with_base", joinBlocks(RenderHeartbeat("", &st, now)))
	checkGolden(t, "initial_message_with_standing", PrependStanding(st, "Introduce yourself in #eng."))
	checkGolden(t, "system_prompt_with_workspace", st.SystemPrompt("/srv/agents/builder"))
	checkGolden(t, "native_steer_single", SteerText(tNested, ""))
}
