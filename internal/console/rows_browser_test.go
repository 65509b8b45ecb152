package console_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// Through the whole stack: the agent's turn metric shows as tokens and cost in the Turns panel,
// and its answer to an owner command shows as a system row in the chat.
func TestConsoleShowsTurnCostAndTheAgentsCommandRow(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	info, _ := upWithTestAgent(t, newPlace(t), "TESTAGENT_COST_PER_TURN=0.25")
	if err := chromedp.Do(ctx, chromedp.Navigate(info.ConsoleURL)); err != nil {
		t.Fatal(err)
	}
	sendFromComposer(t, ctx, "@"+info.AgentName+" how much did that cost")
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`.turn-row .cost`))); err != nil {
		t.Fatalf("no turn in the Turns panel: %v", err)
	}
	rows, err := textsOf(ctx, `.turn-row`)
	if err != nil || len(rows) != 1 || !strings.Contains(rows[0], "$0.25") || !strings.Contains(rows[0], "tok") {
		t.Errorf("turn rows = %q (err %v), want one with $0.25 and its tokens", rows, err)
	}
	sendFromComposer(t, ctx, "@"+info.AgentName+" !cancel")
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`.sysrow[data-type="agent_turn_cancel_noop"]`))); err != nil {
		t.Fatalf("the agent's !cancel row never showed: %v", err)
	}
}
