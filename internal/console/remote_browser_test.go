package console_test

import (
	"context"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/buzz-harness/buzz/internal/console"
)

// serveRemote runs a console in remote mode, as on another machine: no in-process feed, only
// the relay, the owner's key and the agent's pubkey. It returns the page's URL.
func serveRemote(t *testing.T, relayURL, ownerKey, agent string) string {
	t.Helper()
	con, err := console.New(console.Config{RelayURL: relayURL, OwnerKey: ownerKey, AgentPubkey: agent})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := console.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); console.Serve(ctx, ln, con) }()
	t.Cleanup(func() { cancel(); <-done })
	return con.URL(ln.Addr().String())
}

func TestRemoteConsoleShowsTheTurnFromFramesAndItsStopCancelsIt(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	info, _ := upWithTestAgent(t, newPlace(t), "TESTAGENT_HANG_ON=1")
	stopRunningTurn(t, ctx, serveRemote(t, info.HTTPURL, info.Owner.SecretKey, info.Agent.Pubkey), info.AgentName)
}

func TestConsoleStopAndModelControlsReachTheInProcessHarness(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	info, _ := upWithTestAgent(t, newPlace(t), "TESTAGENT_HANG_ON=1")
	stopRunningTurn(t, ctx, info.ConsoleURL, info.AgentName)
	// The model field sends switch_model for the channel; the harness's answer is shown.
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`#controls`)),
		chromedp.SendKeys(chromedp.CSS(`#model-id`), "model-b"), chromedp.Click(chromedp.CSS(`#switch-model`))); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`(s => s !== "" && s !== "switching…")(document.querySelector("#control-status").textContent)`)); err != nil {
		t.Fatalf("no answer to the model switch: %v", err)
	}
	t.Logf("switch_model answered %q", mustTexts(t, ctx, `#control-status`))
}

// stopRunningTurn mentions the agent from the console at url, waits for the turn in the
// Activity view, clicks its Stop and checks the turn ends cancelled.
func stopRunningTurn(t *testing.T, ctx context.Context, url, agentName string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		t.Fatal(err)
	}
	sendFromComposer(t, ctx, "@"+agentName+" a long job")
	running := `#activity .turn .turn-status.running`
	stop := `#activity .turn button.stop`
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#tab-activity`)),
		chromedp.WaitVisible(chromedp.CSS(running)), chromedp.WaitVisible(chromedp.CSS(stop)),
		chromedp.WaitVisible(chromedp.CSS(`#activity .turn .card.prompt`))); err != nil {
		t.Fatalf("the running turn, its prompt and its Stop button not shown: %v", err)
	}
	if got, err := textsOf(ctx, `#activity .turn .session-line`); err != nil || len(got) == 0 {
		t.Errorf("session lines = %q (err %v), want the resolved session's", got, err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(stop)),
		chromedp.WaitVisible(chromedp.CSS(`#activity .turn .card.end[data-stop="cancelled"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#activity .turn .control-line`)),
		chromedp.WaitNotPresent(chromedp.CSS(stop))); err != nil {
		t.Fatalf("Stop did not end the turn cancelled: %v", err)
	}
	if got, err := textsOf(ctx, `#activity .turn .control-line`); err != nil || len(got) != 1 || got[0] != "Stop: sent" {
		t.Errorf("control line = %q (err %v), want the control_result's status", got, err)
	}
}

func mustTexts(t *testing.T, ctx context.Context, sel string) []string {
	t.Helper()
	got, err := textsOf(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	return got
}
