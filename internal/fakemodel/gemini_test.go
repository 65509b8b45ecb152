package fakemodel

import (
	"slices"
	"testing"
)

func TestParseGeminiRequestMakesFunctionResponsesToolMessages(t *testing.T) {
	body := `{"systemInstruction":{"parts":[{"text":"sys"}]},
		"contents":[{"role":"user","parts":[{"text":"hi"},{"text":"there"}]},
		{"role":"model","parts":[{"text":"thinking","thought":true},{"functionCall":{"name":"run_shell_command","args":{}}}]},
		{"role":"user","parts":[{"functionResponse":{"id":"c1","name":"run_shell_command","response":{"output":"done"}}}]}],
		"tools":[{"functionDeclarations":[{"name":"run_shell_command"},{"name":"read_file"}]}]}`
	r, err := ParseGeminiRequest("/v1beta/models/m:streamGenerateContent", []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if r.System != "sys" || r.LastUser().Text != "hi\nthere" || !r.HasTool("read_file") || len(r.Messages) != 3 {
		t.Fatalf("parsed %+v", r)
	}
	if m := r.Messages[1]; m.Role != "assistant" || m.Text != "" || !slices.Equal(m.ToolCalls, []string{"run_shell_command"}) {
		t.Fatalf("model turn %+v: want the call and no thought text", m)
	}
	if last := r.Last(); last.Role != "tool" || last.ToolCallID != "c1" || last.Text != `{"output":"done"}` {
		t.Fatalf("last message %+v, want the function response", last)
	}
}

func TestUnansweredCallsFindsResponsesNotMatchingTheirCalls(t *testing.T) {
	call := `{"role":"model","parts":[{"functionCall":{"name":"x"}}]}`
	resp := `{"functionResponse":{"name":"x","response":{}}}`
	for body, want := range map[string]string{
		`{"contents":[` + call + `,{"role":"user","parts":[` + resp + `]}]}`:              "",
		`{"contents":[` + call + `,{"role":"user","parts":[` + resp + `,` + resp + `]}]}`: GeminiCallMismatch,
		`{"contents":[{"role":"user","parts":[` + resp + `]}]}`:                           GeminiCallMismatch,
	} {
		if got := unansweredCalls([]byte(body)); got != want {
			t.Errorf("%s: got %q, want %q", body, got, want)
		}
	}
}
