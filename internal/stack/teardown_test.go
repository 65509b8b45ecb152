package stack

import (
	"strings"
	"testing"
)

func TestTeardownUndoesLastFirstOnceAndSaysSoOnlyWhenTheStackWasUp(t *testing.T) {
	for _, up := range []bool{false, true} {
		var out strings.Builder
		var undone []string
		td := teardown{out: &out}
		for _, part := range []string{"relay", "console", "harness"} {
			td.add(func() { undone = append(undone, part) }, "stopped the "+part)
		}
		td.up = up
		td.unwind()
		td.unwind()
		if got := strings.Join(undone, " "); got != "harness console relay" {
			t.Errorf("up=%v: undone %q, want each once, last added first", up, got)
		}
		want := ""
		if up {
			want = "stopped the harness\nstopped the console\nstopped the relay\n"
		}
		if out.String() != want {
			t.Errorf("up=%v: said %q, want %q", up, out.String(), want)
		}
	}
}
