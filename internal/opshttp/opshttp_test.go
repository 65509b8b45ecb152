package opshttp

import "testing"

func TestListenAddrWithoutAHostIsLoopback(t *testing.T) {
	for in, want := range map[string]string{":9103": "127.0.0.1:9103", "9103": "127.0.0.1:9103", "0.0.0.0:9103": "0.0.0.0:9103", "[::1]:9103": "[::1]:9103"} {
		if got := ListenAddr(in); got != want {
			t.Errorf("ListenAddr(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCheckAddrRefusesWhatIsNotAnAddress(t *testing.T) {
	for addr, ok := range map[string]bool{":9102": true, "9102": true, "0.0.0.0:9102": true, "localhost": false, ":port": false, ":70000": false, "a:b:c": false} {
		if got := CheckAddr(addr); got != ok {
			t.Errorf("CheckAddr(%q) = %v, want %v", addr, got, ok)
		}
	}
}
