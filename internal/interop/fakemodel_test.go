package interop

import (
	"slices"
	"strings"
	"testing"

	"github.com/buzz-harness/buzz/internal/fakemodel"
)

func TestReplyTargetTakesChannelAndLastReplyToFromPrompt(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
	got := SendCommand("c", "e", "it's")
	if want := `buzz messages send --channel c --reply-to e --content 'it'\''s'`; got != want {
		t.Fatalf("got %s, want %s", got, want)
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

// prompted is a model request whose newest message is a buzz-acp prompt naming a reply target.
func prompted(tools ...string) fakemodel.Request {
	prompt := "Channel: general (#3f1c2a9e-5b7d-4e8a-9c01-6d2f8b4a7e10)\nbuzz messages send --reply-to " + strings.Repeat("ab", 32)
	return fakemodel.Request{Tools: tools, Messages: []fakemodel.Msg{{Role: "user", Text: prompt}}}
}

func TestClaudeScriptRunsBashSendThenEndsTurnOnToolResult(t *testing.T) {
	t.Parallel()
	script := ClaudeScript(func(fakemodel.Request) string { return "hi" })
	rep := script(0, prompted("Bash"))
	if len(rep.Calls) != 1 || rep.Calls[0].Name != "Bash" || !strings.Contains(rep.Calls[0].Args, `--content 'hi'`) {
		t.Fatalf("prompt with Bash offered: %+v", rep)
	}
	done := prompted("Bash")
	done.Messages = append(done.Messages, fakemodel.Msg{Role: "tool", Text: "sent"})
	if rep := script(1, done); len(rep.Calls) != 0 || !slices.Equal(rep.Text, []string{"Replied."}) {
		t.Fatalf("after the tool result: %+v", rep)
	}
	withNotes := prompted("Bash")
	withNotes.Messages = append(withNotes.Messages, fakemodel.Msg{Role: "system", Text: "# Environment"})
	if rep := script(2, withNotes); len(rep.Calls) != 1 {
		t.Fatalf("a trailing system message hid the prompt: %+v", rep)
	}
	if rep := script(3, prompted()); len(rep.Calls) != 0 {
		t.Fatalf("side call without tools got a tool call: %+v", rep)
	}
}

func TestCodexScriptUsesWhicheverShellToolIsOffered(t *testing.T) {
	t.Parallel()
	script := CodexScript(nil)
	for tool, argKey := range map[string]string{"shell": `"command":["bash"`, "shell_command": `"command":"buzz`, "exec_command": `"cmd":"buzz`} {
		rep := script(0, prompted(tool))
		if len(rep.Calls) != 1 || rep.Calls[0].Name != tool || !strings.Contains(rep.Calls[0].Args, argKey) {
			t.Fatalf("%s offered: %+v", tool, rep)
		}
	}
	if rep := script(0, prompted("web_search")); len(rep.Calls) != 0 {
		t.Fatalf("no shell tool offered, still called one: %+v", rep)
	}
}
