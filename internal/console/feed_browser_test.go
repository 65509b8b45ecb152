package console_test

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/buzz-harness/buzz/internal/console"
	"github.com/buzz-harness/buzz/internal/observer"
	"github.com/buzz-harness/buzz/internal/testbin"
)

func TestConsoleActivityNamesResumeMethodOnceAndSaysWhyContextIsIncomplete(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	bus := observer.NewBus(100)
	const ch, sid = "3f2a8c1e-0000-4000-8000-000000000001", "sess-0123456789abcdef"
	thread := observer.Scope{ChannelID: ch, SessionID: sid, TurnID: "t1"}
	bus.Publish(thread, observer.SessionResumed{SessionID: sid, Method: "session/resume"})
	bus.Publish(thread, observer.PromptContextDelivery{Route: "system_prompt", PromptBytes: 900,
		ContextIncomplete: "thread truncated to 13 of 41 messages"})
	topLevel := observer.Scope{ChannelID: ch, SessionID: sid, TurnID: "t2"}
	bus.Publish(topLevel, observer.PromptContextDelivery{Route: "system_prompt", PromptBytes: 400})
	url, done, err := console.ServeActivity(t.Context(), "127.0.0.1:0", bus)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { <-done }) // t.Context ends just before cleanups run
	if err := chromedp.Do(ctx, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS(`.turn[data-turn="t2"] .card.ctx`))); err != nil {
		t.Fatal(err)
	}
	// Nothing to control without the owner's key: no model field, no Stop on the running turns.
	shown, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`getComputedStyle(document.getElementById("controls")).display !== "none" ||
		[...document.querySelectorAll(".turn .stop")].some((b) => getComputedStyle(b).display !== "none")`))
	if err != nil || shown {
		t.Errorf("controls shown in the activity-only console (err %v)", err)
	}
	lines, err := textsOf(ctx, `.session-line`)
	if err != nil || len(lines) != 1 || !strings.HasSuffix(lines[0], " via session/resume") || strings.Contains(lines[0], "session/session") {
		t.Errorf("session lines = %q (err %v), want one ending “via session/resume”", lines, err)
	}
	cards, err := textsOf(ctx, `.card.ctx`)
	if err != nil || len(cards) != 2 {
		t.Fatalf("context cards = %q (err %v)", cards, err)
	}
	if !strings.Contains(cards[0], "context incomplete") || !strings.Contains(cards[0], "thread truncated to 13 of 41 messages") {
		t.Errorf("truncated thread's card = %q, want the reason shown", cards[0])
	}
	if strings.Contains(cards[1], "incomplete") {
		t.Errorf("top-level turn's card = %q, want no incomplete-context line", cards[1])
	}
}

// react runs `buzz reactions add` as the holder of secretKey.
func react(t *testing.T, relay, secretKey, event, emoji string) {
	t.Helper()
	bin := testbin.Dir(t, "cmd/buzz")
	cmd := exec.Command(filepath.Join(bin, "buzz"), "reactions", "add", "--event", event, "--emoji", emoji)
	cmd.Env = []string{"BUZZ_RELAY_URL=" + relay, "BUZZ_PRIVATE_KEY=" + secretKey, "HOME=" + t.TempDir()}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("buzz reactions add: %v\n%s", err, out)
	}
}

func TestConsoleShowsReactionsUnderTheMessageTheyReactTo(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	info, _ := upWithTestAgent(t, newPlace(t))
	if err := chromedp.Do(ctx, chromedp.Navigate(info.ConsoleURL)); err != nil {
		t.Fatal(err)
	}
	sendFromComposer(t, ctx, "shall we ship it today?")
	mine := `.msg[data-pubkey="` + info.Owner.Pubkey + `"]`
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(mine))); err != nil {
		t.Fatal(err)
	}
	id, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector(`+jsString(mine)+`).dataset.id`))
	if err != nil {
		t.Fatal(err)
	}

	// Live: both reactions appear under the message while the page is open.
	react(t, info.HTTPURL, info.Owner.SecretKey, id, "+")
	react(t, info.HTTPURL, info.Agent.SecretKey, id, "🎉")
	chips := `.msg[data-id="` + id + `"] > .reactions > .reaction`
	check := func(when string) {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(chips+`[data-emoji="🎉"]`)),
			chromedp.WaitVisible(chromedp.CSS(chips+`[data-emoji="👍"]`))); err != nil {
			t.Fatalf("%s: reactions not shown under the message: %v", when, err)
		}
		got, err := textsOf(ctx, chips)
		slices.Sort(got)
		if err != nil || strings.Join(got, ",") != "🎉 1,👍 1" {
			t.Errorf("%s: reaction chips = %q (err %v), want one 👍 and one 🎉", when, got, err)
		}
		who, err := chromedp.Run(ctx, chromedp.Evaluate[string](
			`document.querySelector(`+jsString(chips+`[data-emoji="🎉"]`)+`).title`))
		if err != nil || who != info.AgentName {
			t.Errorf("%s: 🎉 reacted by %q (err %v), want %q", when, who, err, info.AgentName)
		}
	}
	check("live")

	// History: a fresh page loads them with the channel's messages.
	if err := chromedp.Do(ctx, chromedp.Navigate(info.ConsoleURL)); err != nil {
		t.Fatal(err)
	}
	check("after reload")
}

func TestConsoleShowsAgentWorkingAndItsEyesUntilTheTurnEnds(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	info, _ := upWithTestAgent(t, newPlace(t), "TESTAGENT_HANG_ON=1")
	if err := chromedp.Do(ctx, chromedp.Navigate(info.ConsoleURL)); err != nil {
		t.Fatal(err)
	}
	sendFromComposer(t, ctx, "@"+info.AgentName+" a long job")
	mine := `.msg[data-pubkey="` + info.Owner.Pubkey + `"]`
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(mine))); err != nil {
		t.Fatal(err)
	}
	id, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector(`+jsString(mine)+`).dataset.id`))
	if err != nil {
		t.Fatal(err)
	}
	eyes := `.msg[data-id="` + id + `"] > .reactions > .reaction[data-emoji="👀"]`
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(eyes)), chromedp.WaitVisible(chromedp.CSS(`#messages > .typing`))); err != nil {
		t.Fatalf("no 👀 or working line while the turn runs: %v", err)
	}
	if got, err := textsOf(ctx, `#messages > .typing`); err != nil || len(got) != 1 || got[0] != info.AgentName+" is working…" {
		t.Errorf("working line = %q (err %v)", got, err)
	}

	// The owner cancels the turn: the agent deletes its 👀 and stops typing (the line expires).
	sendFromComposer(t, ctx, "@"+info.AgentName+" !cancel")
	if err := chromedp.Do(ctx, chromedp.WaitNotPresent(chromedp.CSS(eyes))); err != nil {
		t.Fatalf("👀 still shown after the turn ended: %v", err)
	}
	if err := chromedp.Do(ctx, chromedp.WaitNotPresent(chromedp.CSS(`#messages > .typing`))); err != nil {
		t.Fatalf("working line still shown after the turn ended: %v", err)
	}
}
