package relayframes_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/buzz-harness/buzz/internal/observer"
	"github.com/buzz-harness/buzz/internal/observer/relayframes"
	"github.com/buzz-harness/buzz/internal/protocol/observerframe"
)

func TestToFeedMapsEachFrameKindOntoItsFeedEvent(t *testing.T) {
	t.Parallel()
	sc := observer.Scope{ChannelID: "ch1", SessionID: "s1", TurnID: "t1"}
	update := `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"tool_call","toolCallId":"c1","title":"Run tests","status":"pending"}}}`
	chunk := `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hello there"}}}}`
	prompt := `{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"[Context]"},{"type":"image","data":"…"},{"type":"text","text":"hi"}]}}`
	cancel := `{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s1"}}`
	for _, c := range []struct {
		kind, payload string
		want          observer.Payload // nil: no feed counterpart
	}{
		{observerframe.KindHarnessStarted, `{"livenessSecs":10}`, nil},
		{observerframe.KindAgentInitialized, `{"slot":1,"pid":42,"agentName":"a","agentVersion":"1","route":"system_prompt"}`,
			observer.AgentSpawned{Slot: 1, PID: 42, AgentName: "a", AgentVersion: "1", Route: "system_prompt"}},
		{observerframe.KindSessionResolved, `{"sessionId":"s1","isNewSession":true}`, observer.SessionResolved{SessionID: "s1", IsNewSession: true}},
		{observerframe.KindTurnStarted, `{"events":["e1"],"attempt":1}`, observer.TurnStarted{Events: []string{"e1"}, Attempt: 1}},
		{observerframe.KindTurnCompleted, `{"stopReason":"cancelled","durationMs":5}`, observer.TurnEnded{StopReason: "cancelled", DurationMs: 5}},
		{observerframe.KindTurnError, `{"error":"agent died","durationMs":7}`, observer.TurnEnded{Error: "agent died", DurationMs: 7}},
		{observerframe.KindTurnError, `{"durationMs":7}`, observer.TurnEnded{Error: "turn failed", DurationMs: 7}},
		{observerframe.KindACPRead, update, observer.AgentUpdate{Kind: "tool_call", ToolCallID: "c1", Title: "Run tests", Status: "pending"}},
		{observerframe.KindACPRead, chunk, observer.AgentUpdate{Kind: "agent_message_chunk", Text: "hello there"}},
		{observerframe.KindACPWrite, prompt, observer.Prompt{SessionID: "s1", Blocks: []string{"[Context]", "hi"}}},
		{observerframe.KindACPWrite, cancel, observer.ACPLine{Dir: "send", Bytes: len(cancel), Line: cancel}},
		{observerframe.KindACPRead, `"not json… [9 bytes cut]"`, observer.ACPLine{Dir: "recv", Bytes: len("not json… [9 bytes cut]"), Line: "not json… [9 bytes cut]"}},
		{observerframe.KindTurnLiveness, `{"elapsedMs":5000}`, nil},
		{observerframe.KindPermissionTerminal, `{"requestId":1}`, nil},
		{observerframe.KindControlResult, `{"status":"sent"}`, nil},
		{observerframe.KindTurnStarted, `[1,2]`, nil}, // a payload that does not decode
	} {
		e := observerframe.Event{Kind: c.kind, ChannelID: sc.ChannelID, SessionID: sc.SessionID, TurnID: sc.TurnID, Payload: json.RawMessage(c.payload)}
		gotSc, got, ok := relayframes.ToFeed(e)
		if c.want == nil {
			if ok {
				t.Errorf("%s %s: mapped to %#v, want nothing", c.kind, c.payload, got)
			}
			continue
		}
		if !ok || !reflect.DeepEqual(got, c.want) || gotSc != sc {
			t.Errorf("%s %s: got %#v in %+v (ok %v), want %#v in %+v", c.kind, c.payload, got, gotSc, ok, c.want, sc)
		}
	}
}
