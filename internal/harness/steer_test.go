package harness

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/buzz-harness/buzz/internal/acp"
	"github.com/buzz-harness/buzz/internal/prompt"
)

func validConfig() Config {
	return Config{SecretKey: strings.Repeat("01", 32), AgentCommand: "agent", AgentCwd: "/tmp"}
}

func TestDefaultEventHandlingIsSteerWithQueuedDedup(t *testing.T) {
	c := validConfig()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.MultipleEventHandling != HandleSteer || c.Dedup != DedupQueue {
		t.Fatalf("defaults %q/%q, want steer/queue", c.MultipleEventHandling, c.Dedup)
	}
}

func TestDedupDropIsRefusedWithEveryModeButQueueNamingBothFlags(t *testing.T) {
	for _, m := range []EventHandling{HandleSteer, HandleInterrupt, HandleOwnerInterrupt} {
		c := validConfig()
		c.MultipleEventHandling, c.Dedup = m, DedupDrop
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), "--dedup drop") || !strings.Contains(err.Error(), "--multiple-event-handling queue") {
			t.Fatalf("%s + drop: %v, want an error naming both flags", m, err)
		}
	}
	c := validConfig()
	c.MultipleEventHandling, c.Dedup = HandleQueue, DedupDrop
	if err := c.Validate(); err != nil {
		t.Fatalf("queue + drop: %v", err)
	}
}

func TestUnknownEventHandlingModeIsRefused(t *testing.T) {
	c := validConfig()
	c.MultipleEventHandling = "merge"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "--multiple-event-handling") {
		t.Fatalf("got %v", err)
	}
}

func TestCarriedEventsLeadTheNextBatchWithTheirReason(t *testing.T) {
	q := newTestQueue()
	k := convKey{Channel: "c", Root: "r"}
	now := time.Unix(1000, 0)
	q.Push(k, ev("e0", 10), now)
	b, _ := q.Next(now)
	q.Push(k, ev("e1", 12), now)
	q.Push(k, ev("e2", 11), now)
	q.Carry(b, prompt.ReasonInterrupt)
	m, ok := q.Next(now)
	if !ok {
		t.Fatal("nothing ready after a carry")
	}
	if m.Carried != 1 || m.Reason != prompt.ReasonInterrupt || len(m.Items) != 3 {
		t.Fatalf("carried %d reason %v items %d, want 1 interrupt 3", m.Carried, m.Reason, len(m.Items))
	}
	if m.Items[0].Event != b.Items[0].Event || m.Last().CreatedAt != 12 {
		t.Fatal("carried events must come first and the newest new event last")
	}
}

func TestCarriedEventsAloneGoOutAsAPlainBatch(t *testing.T) {
	q := newTestQueue()
	k := convKey{Channel: "c"}
	now := time.Unix(1000, 0)
	q.Push(k, ev("e0", 10), now)
	b, _ := q.Next(now)
	q.Carry(b, prompt.ReasonSteer)
	m, ok := q.Next(now)
	if !ok || m.Carried != 0 || len(m.Items) != 1 {
		t.Fatalf("ok=%v carried=%d items=%d, want the batch again with no merge framing", ok, m.Carried, len(m.Items))
	}
}

func TestTakeRemovesAQueuedEventForANativeSteer(t *testing.T) {
	q := newTestQueue()
	k := convKey{Channel: "c"}
	e := ev("e0", 10)
	q.Push(k, e, time.Unix(1, 0))
	if it, ok := q.Take(k, e.ID); !ok || it.Event != e || q.Pending() {
		t.Fatal("Take must return the queued event and remove it")
	}
	if _, ok := q.Take(k, e.ID); ok {
		t.Fatal("Take must remove the event once")
	}
}

func TestMergeCancelledTurnIsCarriedNotDropped(t *testing.T) {
	if got := decideOutcome(turnResult{cause: errMerge, stop: "cancelled"}, false); got != turnMerged {
		t.Fatalf("outcome %v, want turnMerged", got)
	}
	if got := decideOutcome(turnResult{cause: errMerge}, true); got != turnStopped {
		t.Fatalf("outcome %v after leaving the channel, want turnStopped", got)
	}
}

func update(t *testing.T, raw string) acp.SessionUpdate {
	t.Helper()
	return acp.ParseSessionUpdate(json.RawMessage(raw))
}

func TestGooseRunIDIsTrackedPerSessionAndClearedByNull(t *testing.T) {
	var r runIDs
	r.observe(update(t, `{"sessionId":"s1","update":{"sessionUpdate":"session_info_update","_meta":{"goose":{"activeRunId":"run-7"}}}}`))
	r.observe(update(t, `{"sessionId":"s2","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}`))
	if r.get("s1") != "run-7" || r.get("s2") != "" {
		t.Fatalf("run ids s1=%q s2=%q", r.get("s1"), r.get("s2"))
	}
	r.observe(update(t, `{"sessionId":"s1","update":{"sessionUpdate":"session_info_update","_meta":{"goose":{"activeRunId":null}}}}`))
	if r.get("s1") != "" {
		t.Fatal("a null activeRunId must clear the run")
	}
}

func TestSteeringIsAdvertisedOnlyBySupportedTrue(t *testing.T) {
	for raw, want := range map[string]bool{
		`{"steering":{"supported":true}}`:  true,
		`{"steering":{"supported":false}}`: false,
		`{}`:                               false,
		`{"steering":"yes"}`:               false,
	} {
		var meta map[string]json.RawMessage
		_ = json.Unmarshal([]byte(raw), &meta)
		if got := advertisesSteering(&acp.InitializeResult{Meta: meta}); got != want {
			t.Fatalf("%s: %v, want %v", raw, got, want)
		}
	}
}
