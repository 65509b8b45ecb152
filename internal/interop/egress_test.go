package interop

import (
	"bufio"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// egressTrap is an HTTP proxy on 127.0.0.1 that forwards nothing: pointed at by the proxy
// variables (NO_PROXY keeps 127.0.0.1 direct), it records the first line of every request an
// agent makes for somewhere other than 127.0.0.1 (a CONNECT host:443 for HTTPS) and closes the
// connection, so the attempt also fails at once instead of reaching the network.
type egressTrap struct {
	t    *testing.T
	addr string
	mu   sync.Mutex
	seen []string
}

func trapEgress(t *testing.T) *egressTrap {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &egressTrap{t: t, addr: ln.Addr().String()}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
				line, _ := bufio.NewReader(c).ReadString('\n')
				e.mu.Lock()
				e.seen = append(e.seen, strings.TrimSpace(line))
				e.mu.Unlock()
			}()
		}
	}()
	return e
}

// env points the usual proxy variables (Go, Node/undici, Bun, npm) at the trap.
func (e *egressTrap) env() []string {
	u := "http://" + e.addr
	var env []string
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy",
		"npm_config_proxy", "npm_config_https_proxy"} {
		env = append(env, k+"="+u)
	}
	return env
}

// none fails the test if anything tried to leave 127.0.0.1 through the trap.
func (e *egressTrap) none() {
	e.t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.seen) > 0 {
		e.t.Fatalf("the agent tried to reach the network %d times: %q", len(e.seen), e.seen)
	}
}

func TestEgressTrapRecordsAProxiedRequestAndRefusesIt(t *testing.T) {
	e := trapEgress(t)
	proxy, _ := url.Parse("http://" + e.addr)
	c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxy)}, Timeout: 10 * time.Second}
	if _, err := c.Get("https://models.example.invalid/api.json"); err == nil {
		t.Fatal("the request through the trap succeeded")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.seen) != 1 || e.seen[0] != "CONNECT models.example.invalid:443 HTTP/1.1" {
		t.Fatalf("trap saw %q, want the one CONNECT", e.seen)
	}
}
