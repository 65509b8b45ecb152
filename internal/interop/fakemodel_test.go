package interop

import (
	"strings"
	"testing"
)

func TestReplyTargetTakesChannelAndLastReplyToFromPrompt(t *testing.T) {
	id := strings.Repeat("ab", 32)
	prompt := "[Context]\nChannel: general (#3f1c2a9e-5b7d-4e8a-9c01-6d2f8b4a7e10)\n" +
		"history: buzz messages send --reply-to " + strings.Repeat("00", 32) + "\n" +
		"IMPORTANT: Reply in it with `buzz messages send --reply-to " + id + "`"
	ch, ev, ok := ReplyTarget(prompt)
	if !ok || ch != "3f1c2a9e-5b7d-4e8a-9c01-6d2f8b4a7e10" || ev != id {
		t.Fatalf("ReplyTarget = %q %q %v", ch, ev, ok)
	}
	if _, _, ok := ReplyTarget("buzz messages send --channel <uuid> --reply-to <event-id>"); ok {
		t.Fatal("placeholders in the [Base] prompt must not count as a reply target")
	}
}

func TestSendCommandQuotesContentForTheShell(t *testing.T) {
	got := SendCommand("c", "e", "it's")
	if want := `buzz messages send --channel c --reply-to e --content 'it'\''s'`; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}

func TestParseAnthropicRequestFlattensSystemAndToolResults(t *testing.T) {
	body := `{"stream":true,"system":[{"type":"text","text":"a"},{"type":"text","text":"b"}],
		"messages":[{"role":"user","content":"hi"},
		{"role":"assistant","content":[{"type":"tool_use","name":"Bash","input":{}}]},
		{"role":"user","content":[{"type":"tool_result","content":[{"type":"text","text":"done"}]}]}],
		"tools":[{"name":"Bash"}]}`
	r, err := ParseAnthropicRequest("/v1/messages", []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if r.System != "a\nb" || !r.Stream || !r.HasTool("Bash") || len(r.Messages) != 3 ||
		!r.LastUser().HasToolResult || r.LastUser().Text != "done" {
		t.Fatalf("parsed %+v", r)
	}
	if _, err := ParseAnthropicRequest("/v1/messages", []byte("{")); err == nil {
		t.Fatal("bad JSON accepted")
	}
}

func TestParseResponsesRequestKeepsInputOrderAndToolOutputs(t *testing.T) {
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
	if r.System != "sys" || len(r.Messages) != 3 || r.LastUser().Text != "u1\nu2" ||
		!r.Messages[2].HasToolResult || !r.HasTool("exec_command") || !r.HasTool("web_search") {
		t.Fatalf("parsed %+v", r)
	}
}

func FuzzReplyTarget(f *testing.F) {
	f.Add("Channel: x (#3f1c2a9e-5b7d-4e8a-9c01-6d2f8b4a7e10) --reply-to " + strings.Repeat("a", 64))
	f.Add("")
	f.Add("--reply-to --reply-to (#)")
	f.Fuzz(func(t *testing.T, s string) {
		ch, ev, ok := ReplyTarget(s)
		if ok && (len(ch) != 36 || len(ev) != 64 || !strings.Contains(s, ev) || !strings.Contains(s, ch)) {
			t.Fatalf("ReplyTarget(%q) = %q %q", s, ch, ev)
		}
	})
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
