package harness_test

import (
	"strings"
	"testing"
)

// buzz-acp runs its Go code on one core unless told otherwise (--max-procs, docs/benchmarks.md).
func TestBuzzACPRunsOnOneCoreByDefaultAndMaxProcsRaisesIt(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{{nil, "procs=1"}, {[]string{"--max-procs", "2"}, "procs=2"}} {
		s := newStack(t)
		s.start(c.args)
		line, _, _ := strings.Cut(s.logs.String()[strings.Index(s.logs.String(), "buzz-acp ready"):], "\n")
		if !strings.Contains(line, c.want) {
			t.Errorf("%v: ready line %q, want %s", c.args, line, c.want)
		}
		s.kill()
	}
}
