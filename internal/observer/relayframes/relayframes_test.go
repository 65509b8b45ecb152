package relayframes

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/buzz-harness/buzz/internal/observer"
	"github.com/buzz-harness/buzz/internal/protocol/observerframe"
)

func line(dir, s string) observer.Event {
	return observer.Event{Type: observer.TypeACPLine, Data: observer.ACPLine{Dir: dir, Line: s, Bytes: len(s)}}
}

func chunkLine(session, msgID, text string) observer.Event {
	return line("recv", `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"`+session+`","update":{"sessionUpdate":"agent_message_chunk","messageId":"`+msgID+`","content":{"type":"text","text":"`+text+`"}}}}`)
}

func feed(t *translator, evs ...observer.Event) []frame {
	var out []frame
	for _, e := range evs {
		out = append(out, t.event(e)...)
	}
	return out
}

func frameKinds(fs []frame) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.kind
	}
	return out
}

func TestHistoryReplayedDuringSessionLoadIsNotSent(t *testing.T) {
	tr := newTranslator(time.Now)
	out := feed(tr,
		line("send", `{"jsonrpc":"2.0","id":3,"method":"session/load","params":{"sessionId":"s1"}}`),
		line("recv", `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"tool_call","toolCallId":"old"}}}`),
		line("recv", `{"jsonrpc":"2.0","id":3,"result":{}}`),
		line("recv", `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"tool_call","toolCallId":"new"}}}`),
	)
	got := strings.Join(frameKinds(out), ",")
	if got != "acp_write,acp_read,acp_read" {
		t.Fatalf("frames %s", got)
	}
	if strings.Contains(string(payloadJSON(out[1].payload)), "old") || !strings.Contains(string(payloadJSON(out[2].payload)), "new") {
		t.Fatalf("the replayed update was sent: %s / %s", payloadJSON(out[1].payload), payloadJSON(out[2].payload))
	}
}

func TestConsecutiveChunksOfOneMessageAreCoalescedUntilAnotherEvent(t *testing.T) {
	tr := newTranslator(time.Now)
	out := feed(tr, chunkLine("s1", "m1", "Hel"), chunkLine("s1", "m1", "lo"), chunkLine("s1", "m2", "!"))
	if len(out) != 1 {
		t.Fatalf("%d frames before the next message ended the first, want 1", len(out))
	}
	var msg struct {
		Params struct {
			Update struct {
				Content struct{ Text string } `json:"content"`
			} `json:"update"`
		} `json:"params"`
	}
	if err := json.Unmarshal(payloadJSON(out[0].payload), &msg); err != nil || msg.Params.Update.Content.Text != "Hello" {
		t.Fatalf("coalesced %s (%v)", payloadJSON(out[0].payload), err)
	}
	if out[0].scope.SessionID != "s1" {
		t.Fatalf("scope %+v", out[0].scope)
	}
	if rest := tr.flush(); len(rest) != 1 {
		t.Fatalf("flush gave %d frames, want the pending chunk", len(rest))
	}
}

func TestChunksAreFlushedBeforeTheyReachTheCap(t *testing.T) {
	tr := newTranslator(time.Now)
	big := strings.Repeat("x", coalesceMax/2+1)
	if out := feed(tr, chunkLine("s1", "m1", big), chunkLine("s1", "m1", big)); len(out) != 1 {
		t.Fatalf("%d frames, want the first chunk flushed before the second", len(out))
	}
}

func TestTheHarnessAnswerToAPermissionRequestIsAPermissionTerminalFrame(t *testing.T) {
	tr := newTranslator(time.Now)
	out := feed(tr,
		line("recv", `{"jsonrpc":"2.0","id":9,"method":"session/request_permission","params":{"sessionId":"s1","options":[]}}`),
		line("send", `{"jsonrpc":"2.0","id":9,"result":{"outcome":{"outcome":"selected","optionId":"allow"}}}`),
	)
	if got := strings.Join(frameKinds(out), ","); got != "acp_read,acp_write,permission_terminal" {
		t.Fatalf("frames %s", got)
	}
	if p := string(payloadJSON(out[2].payload)); !strings.Contains(p, `"optionId":"allow"`) || out[2].scope.SessionID != "s1" {
		t.Fatalf("permission_terminal %s %+v", p, out[2].scope)
	}
}

func TestKeysInACPLinesAreRedacted(t *testing.T) {
	tr := newTranslator(time.Now)
	secret := strings.Repeat("ab", 32)
	out := feed(tr, line("send", `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"mcpServers":[{"env":[{"name":"BUZZ_PRIVATE_KEY","value":"`+secret+`"}]}]}}`))
	if p := string(payloadJSON(out[0].payload)); strings.Contains(p, secret) || !strings.Contains(p, observer.Redacted) {
		t.Fatalf("payload %s", p)
	}
}

func TestLivenessNamesEveryRunningTurn(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	tr := newTranslator(func() time.Time { return now })
	feed(tr, observer.Event{Type: observer.TypeTurnStarted, Time: now.Add(-7 * time.Second), Scope: observer.Scope{ChannelID: "c", TurnID: "t1", SessionID: "s1"}, Data: observer.TurnStarted{}})
	out := tr.liveness()
	if len(out) != 1 || out[0].kind != observerframe.KindTurnLiveness || out[0].scope.TurnID != "t1" || !strings.Contains(string(payloadJSON(out[0].payload)), `"elapsedMs":7000`) {
		t.Fatalf("liveness %+v", out)
	}
	feed(tr, observer.Event{Type: observer.TypeTurnEnded, Scope: observer.Scope{ChannelID: "c", TurnID: "t1"}, Data: observer.TurnEnded{StopReason: "end_turn"}})
	if out := tr.liveness(); len(out) != 0 {
		t.Fatalf("liveness after the turn ended: %+v", out)
	}
}

func TestAnOversizedFrameHasItsLargestStringCutAroundTheMiddle(t *testing.T) {
	long := strings.Repeat("a", 3000) + strings.Repeat("m", 70_000) + strings.Repeat("z", 3000)
	raw, _ := json.Marshal(map[string]any{"small": "keep", "big": long})
	e := trim(observerframe.Event{Kind: "acp_read", Payload: raw})
	b, _ := json.Marshal(e)
	if len(b) > observerframe.MaxPlaintext {
		t.Fatalf("trimmed frame is %d bytes", len(b))
	}
	var got map[string]string
	if err := json.Unmarshal(e.Payload, &got); err != nil {
		t.Fatal(err)
	}
	if got["small"] != "keep" || !strings.HasPrefix(got["big"], strings.Repeat("a", 3000)+"…[elided 70000 bytes]…") || !strings.HasSuffix(got["big"], strings.Repeat("z", 3000)) {
		t.Fatalf("big = %.40q…", got["big"])
	}
}

func TestAFrameOfManySmallStringsIsReplacedByAnElidedNote(t *testing.T) {
	many := make([]string, 20_000)
	for i := range many {
		many[i] = "abcd"
	}
	raw, _ := json.Marshal(many)
	e := trim(observerframe.Event{Kind: "acp_read", Payload: raw})
	if want := `{"elided":"acp_read payload too large","originalBytes":`; !strings.HasPrefix(string(e.Payload), want) {
		t.Fatalf("payload %.80s", e.Payload)
	}
}
