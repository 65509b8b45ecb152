// Package leakcheck finds goroutines that are still running a given function, so a test can
// show that an owner's Close or Run returned only once the goroutines it started were gone.
//
// Only the function's own frames count: a goroutine that has returned from it and is merely
// signalling so (a deferred close or WaitGroup.Done in the wrapper that started it) is not
// running it any more. An owner that starts fn as go func() { defer wg.Done(); fn() }() and
// waits on wg is therefore seen as clean the moment the wait returns: the check is exact, no
// polling needed.
package leakcheck

import (
	"runtime"
	"strings"
)

// Running returns the stack of every other goroutine with a frame in fn or in a closure
// defined in it. fn is the function's full name as stacks print it, e.g.
// "github.com/buzz-harness/buzz/internal/acp.(*Conn).writeLoop"; a name ending in "." (a
// package or a type, "…/client.(*Live).") matches everything in it.
func Running(fn string) []string {
	var out []string
	// The first goroutine listed is the caller's own.
	for _, g := range strings.Split(allStacks(), "\n\n")[1:] {
		for _, line := range strings.Split(g, "\n")[1:] {
			if strings.HasPrefix(line, "\t") || strings.HasPrefix(line, "created by ") {
				continue // a file:line, or the frame that started the goroutine, not one it runs
			}
			if name, ok := strings.CutPrefix(line, fn); ok && (strings.HasSuffix(fn, ".") || strings.HasPrefix(name, "(") || strings.HasPrefix(name, ".func")) {
				out = append(out, g)
				break
			}
		}
	}
	return out
}

func allStacks() string {
	buf := make([]byte, 1<<16)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return string(buf[:n])
		}
		buf = make([]byte, 2*len(buf))
	}
}
