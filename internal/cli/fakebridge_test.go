package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/buzz-harness/buzz/internal/client"
	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/nbd-wtf/go-nostr"
)

// fakeBridge is a minimal in-memory relay bridge on a real socket, used until/alongside the
// real relay: NIP-98 verified, /query with NIP-01 matching (newest first, per-filter limit),
// /events storing signed events. It knows none of the relay's access rules.
type fakeBridge struct {
	*httptest.Server
	mu        sync.Mutex
	events    []nostr.Event
	published []nostr.Event
	queries   [][]client.Filter
	status    int // if non-zero, every request answers this status
}

func newFakeBridge(t *testing.T) *fakeBridge {
	t.Helper()
	fb := &fakeBridge{}
	fb.Server = httptest.NewServer(http.HandlerFunc(fb.serve))
	t.Cleanup(fb.Close)
	return fb
}

func (fb *fakeBridge) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	fb.mu.Lock()
	defer fb.mu.Unlock()
	fail := func(status int, msg string) {
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
	}
	if fb.status != 0 {
		fail(fb.status, "scripted failure")
		return
	}
	if _, err := protocol.VerifyHTTPAuth(r.Header.Get("Authorization"), "http://"+r.Host+r.URL.Path, r.Method, body, time.Now()); err != nil {
		fail(401, err.Error())
		return
	}
	switch r.URL.Path {
	case "/query":
		var fs []client.Filter
		if err := json.Unmarshal(body, &fs); err != nil {
			fail(400, "invalid: "+err.Error())
			return
		}
		fb.queries = append(fb.queries, fs)
		out := []nostr.Event{}
		for _, f := range fs {
			var hits []nostr.Event
			for _, ev := range fb.events {
				if f.Matches(&ev) {
					hits = append(hits, ev)
				}
			}
			sort.SliceStable(hits, func(i, j int) bool { return hits[i].CreatedAt > hits[j].CreatedAt })
			if f.Limit > 0 && len(hits) > f.Limit {
				hits = hits[:f.Limit]
			}
			out = append(out, hits...)
		}
		_ = json.NewEncoder(w).Encode(out)
	case "/events":
		var ev nostr.Event
		if err := json.Unmarshal(body, &ev); err != nil || protocol.CheckEvent(&ev) != nil {
			fail(400, "invalid: bad event")
			return
		}
		fb.events = append(fb.events, ev)
		fb.published = append(fb.published, ev)
		_ = json.NewEncoder(w).Encode(client.PublishResult{EventID: ev.ID, Accepted: true})
	default:
		fail(404, "not found")
	}
}

// seed stores an event signed by sk.
func (fb *fakeBridge) seed(t *testing.T, sk string, ev nostr.Event) nostr.Event {
	t.Helper()
	if ev.CreatedAt == 0 {
		ev.CreatedAt = nostr.Now()
	}
	if ev.Tags == nil {
		ev.Tags = nostr.Tags{}
	}
	if err := ev.Sign(sk); err != nil {
		t.Fatal(err)
	}
	fb.mu.Lock()
	fb.events = append(fb.events, ev)
	fb.mu.Unlock()
	return ev
}

func (fb *fakeBridge) lastPublished(t *testing.T) nostr.Event {
	t.Helper()
	fb.mu.Lock()
	defer fb.mu.Unlock()
	if len(fb.published) == 0 {
		t.Fatal("nothing published")
	}
	return fb.published[len(fb.published)-1]
}

func (fb *fakeBridge) setStatus(code int) {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	fb.status = code
}

func (fb *fakeBridge) publishedCount() int {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	return len(fb.published)
}

// runResult is one in-process CLI run.
type runResult struct {
	code   int
	stdout string
	stderr string
}

func (r runResult) errJSON(t *testing.T) Error {
	t.Helper()
	var e Error
	if err := json.Unmarshal([]byte(strings.TrimSpace(r.stderr)), &e); err != nil {
		t.Fatalf("stderr is not one JSON error line: %q", r.stderr)
	}
	return e
}

func (r runResult) decode(t *testing.T, v any) {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("exit %d, stderr %s", r.code, r.stderr)
	}
	if err := json.Unmarshal([]byte(r.stdout), v); err != nil {
		t.Fatalf("stdout is not JSON: %q (%v)", r.stdout, err)
	}
}

// runCLI runs Main in-process with env and stdin.
func runCLI(env map[string]string, stdin string, args ...string) runResult {
	var out, errb bytes.Buffer
	code := Main(args, IO{Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errb, Env: func(k string) string { return env[k] }})
	return runResult{code: code, stdout: out.String(), stderr: errb.String()}
}
