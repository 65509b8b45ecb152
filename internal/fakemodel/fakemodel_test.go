package fakemodel

import (
	"slices"
	"testing"
)

func TestParseAnthropicRequestMakesToolResultsMessagesOfTheirOwn(t *testing.T) {
	body := `{"stream":true,"system":[{"type":"text","text":"a"},{"type":"text","text":"b"}],
		"messages":[{"role":"user","content":"hi"},
		{"role":"assistant","content":[{"type":"tool_use","name":"Bash","input":{}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"done"}]}]}],
		"tools":[{"name":"Bash"}]}`
	r, err := ParseAnthropicRequest("/v1/messages", []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if r.System != "a\nb" || !r.Stream || !r.HasTool("Bash") || len(r.Messages) != 3 {
		t.Fatalf("parsed %+v", r)
	}
	if last := r.Last(); last.Role != "tool" || last.ToolCallID != "t1" || last.Text != "done" {
		t.Fatalf("last message %+v, want the tool result", last)
	}
	if !slices.Equal(r.Messages[1].ToolCalls, []string{"Bash"}) || r.LastUser().Text != "hi" {
		t.Fatalf("messages %+v", r.Messages)
	}
	if _, err := ParseAnthropicRequest("/v1/messages", []byte("{")); err == nil {
		t.Fatal("bad JSON accepted")
	}
}

func TestParseResponsesRequestKeepsInputOrderCallsAndOutputs(t *testing.T) {
	body := `{"instructions":"sys","input":[
		{"type":"message","role":"developer","content":[{"type":"input_text","text":"dev"}]},
		{"type":"message","role":"user","content":[{"type":"input_text","text":"u1"},{"type":"input_text","text":"u2"}]},
		{"type":"function_call","name":"exec_command","arguments":"{}","call_id":"c"},
		{"type":"function_call_output","call_id":"c","output":"out"}],
		"tools":[{"type":"function","name":"exec_command"},{"type":"web_search"}]}`
	r, err := ParseResponsesRequest("/v1/responses", []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	roles := make([]string, len(r.Messages))
	for i, m := range r.Messages {
		roles[i] = m.Role
	}
	if r.System != "sys" || !slices.Equal(roles, []string{"developer", "user", "assistant", "tool"}) ||
		r.LastUser().Text != "u1\nu2" || r.Last().ToolCallID != "c" || r.Last().Text != "out" ||
		!r.HasTool("exec_command") || !r.HasTool("web_search") {
		t.Fatalf("parsed %+v", r)
	}
}

func TestParseChatRequestMovesSystemAndDeveloperIntoSystem(t *testing.T) {
	body := `{"model":"m","stream":true,"messages":[{"role":"system","content":"s"},
		{"role":"user","content":[{"type":"text","text":"hi"}]},
		{"role":"assistant","content":null,"tool_calls":[{"function":{"name":"read"}}]},
		{"role":"tool","tool_call_id":"c1","content":"data"}],
		"tools":[{"function":{"name":"read"}}]}`
	r, err := ParseChatRequest("/v1/chat/completions", []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if r.System != "s" || r.Model != "m" || len(r.Messages) != 3 || r.LastUser().Text != "hi" ||
		r.Last().ToolCallID != "c1" || !r.HasTool("read") {
		t.Fatalf("parsed %+v", r)
	}
}

func FuzzParseAnthropicRequest(f *testing.F) {
	f.Add(`{"system":"s","messages":[{"role":"user","content":"x"}]}`)
	f.Add(`{"messages":[{"role":"user","content":[{"type":"tool_result","content":7}]}]}`)
	f.Fuzz(func(t *testing.T, s string) { _, _ = ParseAnthropicRequest("/", []byte(s)) })
}

func FuzzParseResponsesRequest(f *testing.F) {
	f.Add(`{"input":[{"type":"message","role":"user","content":"x"}]}`)
	f.Add(`{"input":[{"type":"function_call_output","output":[{"text":"y"}]}]}`)
	f.Fuzz(func(t *testing.T, s string) { _, _ = ParseResponsesRequest("/", []byte(s)) })
}
