package console_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/buzz-harness/buzz/internal/harness"
	"github.com/buzz-harness/buzz/internal/stack"
	"github.com/buzz-harness/buzz/internal/testbin"
	"github.com/buzz-harness/buzz/internal/testwait"
)

const chromiumPath = "/usr/bin/chromium"

// browser starts headless Chromium for one test. Without Chromium the test is skipped locally
// but fails under CI, which installs it (apt-get install -y chromium).
func browser(t *testing.T) context.Context {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		if ci := os.Getenv("CI"); ci != "" && ci != "false" && ci != "0" {
			t.Fatalf("%s is missing but CI is set: install it with `apt-get install -y chromium`", chromiumPath)
		}
		t.Skipf("%s not installed (apt-get install -y chromium); skipping the browser test", chromiumPath)
	}
	// Build the binaries before the browser's deadline starts: a cold build can take a while.
	testbin.Dir(t, "cmd/buzz", "internal/testagent")
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(func() { cancelTimeout(); cancelCtx(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// place is where a stack keeps its state; reusing one across starts is a restart.
type place struct {
	dataDir, ownerDir, relayAddr, agentState, cwd string
}

func newPlace(t *testing.T) place {
	return place{dataDir: filepath.Join(t.TempDir(), "data"), ownerDir: t.TempDir(), relayAddr: testbin.FreeAddr(t), agentState: t.TempDir(), cwd: t.TempDir()}
}

// upWithTestAgent runs the real stack (relay, harness, console) in-process with the scripted
// test agent; env selects the agent's capabilities and so the system-prompt route. The
// returned stop ends it (also done at cleanup).
func upWithTestAgent(t *testing.T, p place, env ...string) (stack.Info, func()) {
	t.Helper()
	return upWithTestAgentConfig(t, p, nil, env...)
}

// upWithTestAgentConfig is upWithTestAgent with a change to the stack's configuration.
func upWithTestAgentConfig(t *testing.T, p place, change func(*stack.Config), env ...string) (stack.Info, func()) {
	t.Helper()
	bin := testbin.Dir(t, "cmd/buzz", "internal/testagent")
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan stack.Info, 1)
	done := make(chan error, 1)
	cfg := stack.Config{
		DataDir:          p.dataDir,
		OwnerDir:         p.ownerDir,
		RelayAddr:        p.relayAddr,
		ConsoleAddr:      "127.0.0.1:0",
		AgentCommand:     filepath.Join(bin, "testagent"),
		AgentEnv:         append([]string{"TESTAGENT_STATE_DIR=" + p.agentState, "TESTAGENT_STREAM=3"}, env...),
		AgentCwd:         p.cwd,
		BuzzCLIDir:       bin,
		SystemPrompt:     "You are the team's release helper. Keep answers short.",
		TeamInstructions: "Post status updates in #general. Never force-push.",
		// The composer posts top-level messages; these tests follow one channel session's story.
		SessionPolicy: harness.PolicyChannel,
		Ready:         func(i stack.Info) { ready <- i },
	}
	if change != nil {
		change(&cfg)
	}
	go func() { done <- stack.Run(ctx, cfg) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("stack.Run: %v", err)
				}
			case <-time.After(20 * time.Second):
				t.Error("stack did not stop within 20s")
			}
		})
	}
	t.Cleanup(stop)
	select {
	case info := <-ready:
		return info, stop
	case err := <-done:
		t.Fatalf("stack.Run: %v", err)
	case <-time.After(60 * time.Second): // wide: the suite runs browsers and stacks eight at a time on two cores
		t.Fatal("stack did not come up within 60s")
	}
	return stack.Info{}, stop
}

// docsDir is <module>/docs, where the README's screenshots live.
func docsDir(t *testing.T) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "docs")
}

func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if os.Getenv("BUZZ_WRITE_SCREENSHOTS") == "" {
		return // only refresh docs/ when asked, so test runs leave the tree unchanged
	}
	if err := os.MkdirAll(docsDir(t), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(docsDir(t), name), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

func textsOf(ctx context.Context, sel string) ([]string, error) {
	return chromedp.Run(ctx, chromedp.Evaluate[[]string](
		`Array.from(document.querySelectorAll(`+jsString(sel)+`)).map(e => e.textContent)`))
}

func jsString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// sendFromComposer types a message into the composer and submits it.
func sendFromComposer(t *testing.T, ctx context.Context, text string) {
	t.Helper()
	err := chromedp.Do(ctx,
		chromedp.WaitVisible(chromedp.CSS(`#channels li.active`)),
		chromedp.SendKeys(chromedp.CSS(`#compose-text`), text),
		chromedp.Click(chromedp.CSS(`#send`)),
	)
	if err != nil {
		t.Fatalf("send from composer: %v", err)
	}
}

func checkSystemPromptCard(t *testing.T, ctx context.Context, route string, want []string) {
	t.Helper()
	card := `details.sysprompt[data-route="` + route + `"]`
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#tab-activity`)), chromedp.WaitReady(chromedp.CSS(card))); err != nil {
		t.Fatalf("no System prompt card for route %s: %v", route, err)
	}
	open, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector(`+jsString(card)+`).open`))
	if err != nil {
		t.Fatal(err)
	}
	if open {
		t.Error("System prompt card is expanded; want collapsed by default")
	}
	labels, err := textsOf(ctx, card+` .section > summary`)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(labels, " ") != strings.Join(want, " ") {
		t.Errorf("System prompt sections = %q, want %q", labels, want)
	}
	bodies, err := textsOf(ctx, card+` .section > pre`)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(bodies, "\n"), "release helper") {
		t.Errorf("section bodies do not carry the [System] text: %q", bodies)
	}
}

func TestConsoleComposerMentionGetsThreadedReplyAndSpecRouteSystemPromptCard(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	info, _ := upWithTestAgent(t, newPlace(t), "TESTAGENT_CAPS=systemPrompt")
	if err := chromedp.Do(ctx, chromedp.Navigate(info.ConsoleURL)); err != nil {
		t.Fatal(err)
	}
	sendFromComposer(t, ctx, "@"+info.AgentName+" please summarize the release plan")

	// The agent answers in the thread of our message; the page updates without a reload.
	reply := `.msg[data-pubkey="` + info.Agent.Pubkey + `"]`
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`.thread `+reply))); err != nil {
		t.Fatalf("agent reply never appeared in the thread: %v", err)
	}
	bodies, err := textsOf(ctx, `.thread `+reply+` .body`)
	if err != nil {
		t.Fatal(err)
	}
	if len(bodies) != 1 || !strings.Contains(bodies[0], "please summarize the release plan") {
		t.Errorf("agent reply bodies = %q", bodies)
	}
	screenshot(t, ctx, "console-chat.png")

	checkSystemPromptCard(t, ctx, "system_prompt", []string{"[Workspace]", "[Base]", "[System]", "[Team Instructions]", "[Agent Memory — core]", "[Owner]"})
	// The rest of the turn: prompt context, the prompt, streamed reply and the stop reason.
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`.card.end[data-stop="end_turn"]`))); err != nil {
		t.Fatalf("turn end not shown: %v", err)
	}
	if n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('.turn').length`)); err != nil || n != 1 {
		t.Errorf("%d turn cards (err %v), want 1", n, err)
	}
	ctxCard, err := textsOf(ctx, `.card.ctx`)
	if err != nil || len(ctxCard) == 0 || !strings.Contains(ctxCard[0], "spec systemPrompt") || !strings.Contains(ctxCard[0], "standing includedno") {
		t.Errorf("prompt context card = %q (err %v)", ctxCard, err)
	}
	if len(ctxCard) > 0 && strings.Contains(ctxCard[0], "incomplete") {
		t.Errorf("prompt context card = %q: a top-level message lacks no context", ctxCard[0])
	}
	msgs, err := textsOf(ctx, `.card.agent-msg`)
	if err != nil || len(msgs) != 1 || !strings.Contains(msgs[0], "please summarize the release plan") {
		t.Errorf("streamed agent message = %q (err %v); want the three chunks joined in one card", msgs, err)
	}
	// Open the card and its [System] section for the screenshot.
	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`details.sysprompt > summary`)),
		chromedp.Click(chromedp.CSS(`details.section[data-label="System"] > summary`)),
		chromedp.Click(chromedp.CSS(`details.section[data-label="Team Instructions"] > summary`)),
	); err != nil {
		t.Fatal(err)
	}
	screenshot(t, ctx, "console-activity.png")
}

func TestConsoleShowsUserMessageRouteSystemPromptSplitIntoSections(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	info, _ := upWithTestAgent(t, newPlace(t)) // no systemPrompt capability: standing context leads the first prompt
	if err := chromedp.Do(ctx, chromedp.Navigate(info.ConsoleURL)); err != nil {
		t.Fatal(err)
	}
	sendFromComposer(t, ctx, "@"+info.AgentName+" hi")
	// A fresh stack's agent has no core memory yet, so its memory section is the onboarding nudge,
	// and the sidebar's memory panel says there is none.
	checkSystemPromptCard(t, ctx, "user_message", []string{"[Base]", "[System]", "[Team Instructions]", "[Agent Memory — core]", "[Owner]"})
	if err := chromedp.Do(ctx, chromedp.WaitReady(chromedp.CSS(`#memory:not([hidden])`))); err != nil {
		t.Fatalf("memory panel never shown: %v", err)
	}
	if mem, err := textsOf(ctx, `#memory-core`); err != nil || len(mem) != 1 || !strings.Contains(mem[0], "none yet") {
		t.Errorf("memory panel = %q (err %v); want the none-yet note", mem, err)
	}
	ctxCard, err := textsOf(ctx, `.card.ctx`)
	if err != nil || len(ctxCard) == 0 || !strings.Contains(ctxCard[0], "standing includedyes") {
		t.Errorf("prompt context card = %q (err %v); want standing included", ctxCard, err)
	}
}

func TestConsoleRendersMessageMarkupAsText(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	info, _ := upWithTestAgent(t, newPlace(t))
	if err := chromedp.Do(ctx, chromedp.Navigate(info.ConsoleURL)); err != nil {
		t.Fatal(err)
	}
	evil := `<img src=x onerror="window.__pwned=1"><b>bold</b>`
	sendFromComposer(t, ctx, evil)
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`.msg .body`))); err != nil {
		t.Fatal(err)
	}
	text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('.msg .body').textContent`))
	if err != nil {
		t.Fatal(err)
	}
	pwned, err := chromedp.Run(ctx, chromedp.Evaluate[int](`window.__pwned ? 1 : 0`))
	if err != nil {
		t.Fatal(err)
	}
	imgs, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('.msg img, .msg b').length`))
	if err != nil {
		t.Fatal(err)
	}
	if text != evil || pwned != 0 || imgs != 0 {
		t.Errorf("message rendered as markup: text %q, script ran %v, elements %d", text, pwned == 1, imgs)
	}
}

func TestConsoleShowsReplayedHistoryAsHistoryAfterRestart(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	p := newPlace(t)
	info, stop := upWithTestAgent(t, p, "TESTAGENT_CAPS=systemPrompt")
	if err := chromedp.Do(ctx, chromedp.Navigate(info.ConsoleURL)); err != nil {
		t.Fatal(err)
	}
	sendFromComposer(t, ctx, "@"+info.AgentName+" first question")
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`.thread .msg[data-pubkey="`+info.Agent.Pubkey+`"]`))); err != nil {
		t.Fatalf("no first reply: %v", err)
	}
	// The agent posts its reply before it records the turn in its session history; the turn's
	// end (the prompt answered) says the history is saved and can be replayed.
	if err := chromedp.Do(ctx, chromedp.WaitReady(chromedp.CSS(`.card.end`))); err != nil {
		t.Fatalf("first turn never ended: %v", err)
	}
	stop()

	// Second start on the same data dir and port: the harness resumes the session with
	// session/load, and the agent replays the first turn.
	info, _ = upWithTestAgent(t, p, "TESTAGENT_CAPS=systemPrompt")
	if err := chromedp.Do(ctx, chromedp.Navigate(info.ConsoleURL)); err != nil {
		t.Fatal(err)
	}
	sendFromComposer(t, ctx, "@"+info.AgentName+" second question")
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#tab-activity`)), chromedp.WaitVisible(chromedp.CSS(`.card.end`))); err != nil {
		t.Fatalf("second turn never ended: %v", err)
	}
	lines, err := textsOf(ctx, `.session-line`)
	if err != nil || len(lines) != 1 || !strings.HasPrefix(lines[0], "Resumed session") || !strings.HasSuffix(lines[0], " via session/load") {
		t.Errorf("session lines = %q (err %v), want one resume via session/load", lines, err)
	}
	history, err := textsOf(ctx, `.card.history .h-item`)
	if err != nil || !strings.Contains(strings.Join(history, "\n"), "first question") {
		t.Errorf("history items = %q (err %v), want the replayed first turn", history, err)
	}
	live, err := textsOf(ctx, `.card.agent-msg`)
	if err != nil || len(live) != 1 || !strings.Contains(live[0], "second question") || strings.Contains(live[0], "first question") {
		t.Errorf("live agent messages = %q (err %v), want only the second answer", live, err)
	}
}

// With --permissions ask the agent's permission request is a question in the thread; the console
// shows its options as buttons, and a click answers it: the tool runs and the agent replies.
func TestConsolePermissionButtonsAnswerTheAgentsQuestion(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	info, _ := upWithTestAgentConfig(t, newPlace(t), func(c *stack.Config) { c.Permissions = "ask" }, "TESTAGENT_PERMISSION=1")
	if err := chromedp.Do(ctx, chromedp.Navigate(info.ConsoleURL)); err != nil {
		t.Fatal(err)
	}
	sendFromComposer(t, ctx, "@"+info.AgentName+" post the release notes")
	allow := `.msg[data-pubkey="` + info.Agent.Pubkey + `"] .perm-option[data-option="3"]`
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(allow))); err != nil {
		t.Fatalf("the permission question's buttons never appeared: %v", err)
	}
	labels, err := textsOf(ctx, `.perm-option`)
	if err != nil || strings.Join(labels, "|") != "1. Reject|2. Always allow|3. Allow|4. Never" {
		t.Fatalf("buttons %q (err %v)", labels, err)
	}
	screenshot(t, ctx, "console-permission.png")
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(allow))); err != nil {
		t.Fatal(err)
	}
	// The tool ran: the agent's reply (not "permission denied") lands in the thread.
	reply := `.thread .msg[data-pubkey="` + info.Agent.Pubkey + `"] .body`
	testwait.Eventually(t, 30*time.Second, func() bool {
		bodies, err := textsOf(ctx, reply)
		if err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(bodies, func(b string) bool { return strings.HasPrefix(b, "echo:") })
	}, "the agent's echo reply in the thread after answering")
}
