package acpcmd

import (
	"strings"
	"testing"
)

func TestOperationsFlagsRefuseBadValuesNamingFlagAndEnv(t *testing.T) {
	t.Setenv("BUZZ_PRIVATE_KEY", strings.Repeat("1", 64))
	for _, c := range []struct{ args []string }{
		{[]string{"--metrics-addr", "localhost"}},
		{[]string{"--max-cost-per-day", "-1"}},
		{[]string{"--max-tokens-per-day", "-5"}},
		{[]string{"--idle-pool-sleep", "-1"}},
		{[]string{"--exit-after-inactivity", "-1"}},
		{[]string{"--replay-floor", "-1"}},
	} {
		err := run(t, append(c.args, "--agent-command", "/bin/true")...)
		if err == nil || !strings.Contains(err.Error(), c.args[0]) || !strings.Contains(err.Error(), "BUZZ_ACP_") {
			t.Errorf("%v: err = %v, want one naming the flag and its variable", c.args, err)
		}
	}
}
