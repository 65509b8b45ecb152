package harness

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/buzz-harness/buzz/internal/acp"
)

func TestDecideOutcomeStoppedAndLeftWinOverWhatTheAgentAnswered(t *testing.T) {
	transport := errors.New("agent exited")
	rpc := &acp.RPCError{Code: -32603, Message: "boom"}
	cases := []struct {
		name string
		r    turnResult
		left bool
		want turnOutcome
	}{
		{"answered", turnResult{}, false, turnDone},
		{"owner cancel", turnResult{cause: errOwnerCancel}, false, turnStopped},
		{"rotate after an answer", turnResult{cause: errRotate, answered: true}, false, turnStopped},
		{"left the channel", turnResult{}, true, turnStopped},
		{"shutdown is no stop", turnResult{cause: errShutdown, err: transport}, false, turnFailed},
		{"died after replying", turnResult{err: transport, answered: true}, false, turnAnsweredLate},
		{"resume lost", turnResult{err: fmt.Errorf("%w: %w", errResumeLost, context.DeadlineExceeded)}, false, turnResumeLost},
		{"agent error", turnResult{err: rpc}, false, turnFailed},
		{"transport error", turnResult{err: transport}, false, turnFailed},
	}
	for _, c := range cases {
		if got := decideOutcome(c.r, c.left); got != c.want {
			t.Errorf("%s: outcome %d, want %d", c.name, got, c.want)
		}
	}
}
