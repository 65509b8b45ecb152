package protocol

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
)

func TestMergeAgentProfileKeepsFieldsItDoesNotSet(t *testing.T) {
	cur := &nostr.Event{Kind: KindAgentProfile, CreatedAt: 100,
		Content: `{"channel_add_policy":"owner_only","display_name":"Bee","status":"away"}`}
	ev, changed, err := MergeAgentProfile(cur, map[string]any{"status": "online", "display_name": nil, "channel_ids": []string{"c1"}}, time.Unix(200, 0))
	if err != nil || !changed {
		t.Fatalf("changed %v, err %v", changed, err)
	}
	var c map[string]any
	if err := json.Unmarshal([]byte(ev.Content), &c); err != nil {
		t.Fatal(err)
	}
	if c["channel_add_policy"] != "owner_only" || c["status"] != "online" || c["channel_ids"] == nil {
		t.Fatalf("content %s", ev.Content)
	}
	if _, ok := c["display_name"]; ok {
		t.Fatalf("a nil value kept the field: %s", ev.Content)
	}
	if ev.Kind != KindAgentProfile || ev.CreatedAt != 200 {
		t.Fatalf("kind %d created_at %d", ev.Kind, ev.CreatedAt)
	}
}

func TestMergeAgentProfileDatesPastACurrentEntryFromTheSameSecond(t *testing.T) {
	cur := &nostr.Event{Kind: KindAgentProfile, CreatedAt: 300, Content: `{}`}
	ev, _, _ := MergeAgentProfile(cur, map[string]any{"status": "online"}, time.Unix(300, 0))
	if ev.CreatedAt != 301 {
		t.Fatalf("created_at %d, want 301", ev.CreatedAt)
	}
}

func TestMergeAgentProfileReportsNoChangeForTheSameContent(t *testing.T) {
	cur := &nostr.Event{Kind: KindAgentProfile, CreatedAt: 1, Content: `{"status": "online", "channels": ["a"]}`}
	if _, changed, _ := MergeAgentProfile(cur, map[string]any{"channels": []string{"a"}}, time.Unix(5, 0)); changed {
		t.Fatal("same content reported as changed")
	}
	if _, changed, _ := MergeAgentProfile(&nostr.Event{Content: "not json"}, map[string]any{"status": "online"}, time.Unix(5, 0)); !changed {
		t.Fatal("replacing non-object content reported as no change")
	}
}
