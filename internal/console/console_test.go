package console_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/buzz-harness/buzz/internal/console"
	"github.com/buzz-harness/buzz/internal/observer"
	"github.com/buzz-harness/buzz/internal/testwait"
)

func activityServer(t *testing.T, bus *observer.Bus) (*httptest.Server, string) {
	t.Helper()
	s, err := console.New(console.Config{Bus: bus})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return ts, s.Token()
}

func get(t *testing.T, url string, header map[string]string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func TestConsoleRefusesAPIWithoutTheToken(t *testing.T) {
	ts, token := activityServer(t, observer.NewBus(10))
	for _, tc := range []struct {
		name   string
		url    string
		header map[string]string
		want   int
	}{
		{"no token", "/api/state", nil, http.StatusUnauthorized},
		{"wrong token", "/api/state", map[string]string{"X-Buzz-Token": "nope"}, http.StatusUnauthorized},
		{"header token", "/api/state", map[string]string{"X-Buzz-Token": token}, http.StatusOK},
		{"page without token", "/", nil, http.StatusUnauthorized},
		{"page with token", "/?token=" + token, nil, http.StatusOK},
		{"static needs no token", "/static/app.js", nil, http.StatusOK},
	} {
		if got := get(t, ts.URL+tc.url, tc.header).StatusCode; got != tc.want {
			t.Errorf("%s: status %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestConsoleRefusesWritesWithTokenOnlyInQuery(t *testing.T) {
	ts, token := activityServer(t, observer.NewBus(10))
	// A cross-site form can put the token in a URL it has somehow learned, but cannot set headers.
	resp, err := http.Post(ts.URL+"/api/messages?token="+token, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("status %d, want 401", resp.StatusCode)
	}
}

func TestConsoleRefusesForeignHostHeader(t *testing.T) {
	ts, token := activityServer(t, observer.NewBus(10))
	resp := get(t, ts.URL+"/api/state", map[string]string{"X-Buzz-Token": token, "Host": "attacker.example:3001"})
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("status %d, want 403 for a DNS-rebinding Host", resp.StatusCode)
	}
}

func TestConsolePageForbidsInlineScriptAndFraming(t *testing.T) {
	ts, token := activityServer(t, observer.NewBus(10))
	csp := get(t, ts.URL+"/?token="+token, nil).Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "default-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("Content-Security-Policy = %q", csp)
	}
}

type sse struct {
	name string
	data string
}

func readSSE(t *testing.T, r *bufio.Reader) sse {
	t.Helper()
	var ev sse
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("read stream: %v", err)
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case strings.HasPrefix(line, "event: "):
			ev.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			ev.data = strings.TrimPrefix(line, "data: ")
		case line == "" && ev.name != "":
			return ev
		}
	}
}

func TestConsoleStreamSendsActivityHistoryThenLiveWithoutRawACPLines(t *testing.T) {
	bus := observer.NewBus(100)
	bus.Publish(observer.Scope{}, observer.ACPLine{Dir: "send", Line: "{}"})
	bus.Publish(observer.Scope{ChannelID: "c", TurnID: "t1"}, observer.SystemPrompt{
		Route: "user_message", Sections: []observer.PromptSection{{Label: "Base", Body: "b"}}})
	ts, token := activityServer(t, bus)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+"/api/stream?token="+token, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	r := bufio.NewReader(resp.Body)
	var types []string
	for {
		ev := readSSE(t, r)
		if ev.name == "ready" {
			break
		}
		var e struct{ Type string }
		if err := json.Unmarshal([]byte(ev.data), &e); err != nil {
			t.Fatal(err)
		}
		types = append(types, e.Type)
	}
	if strings.Join(types, ",") != "system_prompt" {
		t.Errorf("history = %v, want only system_prompt (acp_line left out)", types)
	}
	bus.Publish(observer.Scope{ChannelID: "c", TurnID: "t1"}, observer.TurnEnded{StopReason: "end_turn"})
	ev := readSSE(t, r)
	if ev.name != "activity" || !strings.Contains(ev.data, `"turn_ended"`) || !strings.Contains(ev.data, `"end_turn"`) {
		t.Errorf("live event = %+v", ev)
	}
}

func TestServeActivityRefusesNonLoopbackAddress(t *testing.T) {
	_, err := console.ServeActivity(context.Background(), "0.0.0.0:0", observer.NewBus(1))
	if err == nil || !strings.Contains(err.Error(), "only loopback") {
		t.Errorf("err = %v, want a loopback-only refusal", err)
	}
}

func TestServeActivityServesActivityOnlyStateUntilContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	url, err := console.ServeActivity(ctx, "127.0.0.1:0", observer.NewBus(1))
	if err != nil {
		t.Fatal(err)
	}
	base, token, _ := strings.Cut(url, "/?token=")
	resp := get(t, base+"/api/state", map[string]string{"X-Buzz-Token": token})
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"mode":"activity"`) {
		t.Fatalf("state: %d %s", resp.StatusCode, body)
	}
	cancel()
	testwait.Eventually(t, 5*time.Second, func() bool {
		c := &http.Client{Timeout: time.Second}
		_, err := c.Get(base + "/")
		return err != nil // listener closed
	}, "the console to stop serving after its context ended")
}

func TestMentionedPubkeysMatchesWholeNamesInOrder(t *testing.T) {
	names := map[string]string{"agent": "A", "ann": "N", "anna": "NA", "bob.dev": "B"}
	for _, tc := range []struct {
		text string
		want string
	}{
		{"@agent hi", "A"},
		{"hi @Agent, and @ann.", "A N"},
		{"@anna and @ann", "NA N"},
		{"mail me at x@agent.com", ""},
		{"@agentsmith", ""},
		{"ping @bob.dev please", "B"},
		{"@agent @agent", "A"},
		{"`@agent` in code is not a mention", ""},
		{"```\n@ann\n``` but @agent is", "A"},
		{"unclosed ` then @ann", "N"},
	} {
		got := strings.Join(console.MentionedPubkeys(tc.text, names), " ")
		if got != tc.want {
			t.Errorf("MentionedPubkeys(%q) = %q, want %q", tc.text, got, tc.want)
		}
	}
}

func FuzzMentionedPubkeys(f *testing.F) {
	for _, s := range []string{"@agent hi", "@ann.", "x@agent.com", "@", "@@agent", "\xff@agent", "@agent\u00e9"} {
		f.Add(s)
	}
	names := map[string]string{"agent": "A", "ann": "N", "Ünï": "U"}
	f.Fuzz(func(t *testing.T, text string) {
		seen := map[string]bool{}
		for _, pk := range console.MentionedPubkeys(text, names) {
			if seen[pk] {
				t.Fatalf("duplicate %q", pk)
			}
			seen[pk] = true
			var name string
			for n, p := range names {
				if p == pk {
					name = n
				}
			}
			if !strings.Contains(strings.ToLower(text), "@"+strings.ToLower(name)) {
				t.Fatalf("%q returned for %q which does not contain @%s", pk, text, name)
			}
		}
	})
}
