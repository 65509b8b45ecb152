package harness

import (
	"strings"
	"testing"
	"time"
)

func TestValidateRefusesATurnLivenessUnderFiveSeconds(t *testing.T) {
	for _, d := range []time.Duration{0, 5 * time.Second, time.Minute} {
		cfg := &Config{SecretKey: strings.Repeat("01", 32), AgentCommand: "agent", AgentCwd: "/work", TurnLiveness: d}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("liveness %s: %v", d, err)
		}
	}
	cfg := &Config{SecretKey: strings.Repeat("01", 32), AgentCommand: "agent", AgentCwd: "/work", TurnLiveness: 4 * time.Second}
	if err := cfg.Validate(); err == nil || err.Error() != "--turn-liveness-secs must be 0 or at least 5, got 4s" {
		t.Fatalf("err = %v", err)
	}
}

func TestObserverIsOnOnlyWithAnOwnerAndNotTurnedOff(t *testing.T) {
	for _, tc := range []struct {
		owner string
		off   bool
		want  bool
	}{{"", false, false}, {"o", false, true}, {"o", true, false}} {
		h := &Harness{cfg: Config{Owner: tc.owner, NoRelayObserver: tc.off}}
		if got := h.observerOn(); got != tc.want {
			t.Errorf("owner %q off %v: on = %v", tc.owner, tc.off, got)
		}
	}
}
