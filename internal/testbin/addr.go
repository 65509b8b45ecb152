package testbin

import (
	"fmt"
	"math/rand/v2"
	"net"
	"sync/atomic"
	"testing"
)

// nextPort walks ports below Linux's ephemeral range (32768–60999) from a random start, so an
// address FreeAddr hands out is not also given to a parallel test's ":0" listener in the gap
// between FreeAddr releasing it and the program under test binding it.
var nextPort atomic.Int32

func init() { nextPort.Store(20000 + rand.Int32N(10000)) }

// FreeAddr returns a loopback address nobody listens on right now, for a program that must be
// told its address before it starts (or keep it across a restart).
func FreeAddr(t testing.TB) string {
	t.Helper()
	for range 2000 {
		port := nextPort.Add(1)
		if port >= 32768 {
			nextPort.CompareAndSwap(port, 20000)
			continue
		}
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		ln.Close()
		return ln.Addr().String()
	}
	t.Fatal("no free loopback port below the ephemeral range")
	return ""
}
