package relay_test

// Attacks found against a loopback relay, each refused here over real connections. The store
// is real everywhere; where a test needs a query that takes long, stallingStore stands in for
// the cost of one (it holds the query until its context ends) and records how it ended.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/btcsuite/btcd/btcec/v2"
	"github.com/btcsuite/btcd/btcec/v2/schnorr"
	"github.com/coder/websocket"
	"github.com/google/uuid"
	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/clock"
	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/relay"
	"github.com/buzz-harness/buzz/internal/relay/relaytest"
	"github.com/buzz-harness/buzz/internal/relay/store"
	"github.com/buzz-harness/buzz/internal/testwait"
)

// stallKind marks a non-search filter the stalling store holds.
const stallKind = 31999

type stallingStore struct {
	store.Store
	mu      sync.Mutex
	running int
	peak    int
	ended   chan error
}

func newStallingStore() *stallingStore { return &stallingStore{ended: make(chan error, 64)} }

func (s *stallingStore) stalls(f store.Filter) bool {
	return f.Search != "" || slices.Contains(f.Kinds, stallKind)
}

func (s *stallingStore) Query(ctx context.Context, a store.Access, f store.Filter, limit int) ([]nostr.Event, error) {
	if !s.stalls(f) {
		return s.Store.Query(ctx, a, f, limit)
	}
	s.mu.Lock()
	s.running++
	s.peak = max(s.peak, s.running)
	s.mu.Unlock()
	<-ctx.Done()
	s.mu.Lock()
	s.running--
	s.mu.Unlock()
	s.ended <- ctx.Err()
	return nil, ctx.Err()
}

func (s *stallingStore) Count(ctx context.Context, a store.Access, filters []store.Filter) (int64, error) {
	for _, f := range filters {
		if s.stalls(f) {
			_, err := s.Query(ctx, a, f, 1)
			return 0, err
		}
	}
	return s.Store.Count(ctx, a, filters)
}

func (s *stallingStore) counts() (running, peak int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running, s.peak
}

// startStalling runs a relay whose store stalls searches and stallKind filters.
func startStalling(t *testing.T, more func(*relay.Config)) (*relaytest.Server, *stallingStore) {
	st := newStallingStore()
	s := relaytest.StartWith(t, relay.WithStore(func(inner store.Store) store.Store {
		st.Store = inner
		return st
	}, more))
	return s, st
}

// eventually polls cond until it holds or 30 s pass (a condition, not a guessed sleep; the
// bound only decides when to give up on a loaded machine).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.Eventually(t, 30*time.Second, cond, what)
}

func authedRaw(t *testing.T, s *relaytest.Server) (*rawConn, user) {
	u := newUser()
	c := dialRaw(t, s.URL)
	c.mustAuth(u.sk, s.URL)
	return c, u
}

// plainReqAnswers times one ordinary REQ until its EOSE.
func plainReqAnswers(t *testing.T, s *relaytest.Server) time.Duration {
	t.Helper()
	c, _ := authedRaw(t, s)
	start := time.Now()
	c.send("REQ", "plain", map[string]any{"kinds": []int{9}, "limit": 5})
	c.readUntil("EOSE")
	return time.Since(start)
}

// hugeSearch is the attack's search: ~200 KB of 100,000 words.
func hugeSearch() string {
	var b strings.Builder
	for i := range 100_000 {
		fmt.Fprintf(&b, "w%d ", i%1000)
	}
	return b.String()[:200_000]
}

func TestHostileHugeSearchIsRefusedOnReqCountAndBridge(t *testing.T) {
	s := relaytest.Start(t)
	alice := newUser()
	ch := s.CreateChannel(t, alice.sk, "lobby", false)
	for i := range 20 {
		s.Publish(t, alice.sk, msg(ch, fmt.Sprintf("w%d hello world", i)))
	}
	search := hugeSearch()
	for i := range 6 {
		c, _ := authedRaw(t, s)
		label := []string{"REQ", "COUNT"}[i%2]
		c.send(label, "flood", map[string]any{"search": search})
		got := c.readUntil("CLOSED")
		if !hasPrefix(got[2], `invalid: filter "search"`) {
			t.Fatalf("%s with a 200 KB search: %v, want refused as invalid", label, got)
		}
	}
	body, _ := json.Marshal([]map[string]any{{"search": search}})
	if status, raw := s.Post(t, alice.sk, "/query", body); status != http.StatusBadRequest {
		t.Fatalf("bridge /query with a 200 KB search answered %d %s", status, raw)
	}
	// A plain read is served at once (the attack made it wait 2.5 min). 1 s is the target;
	// 5 s keeps a loaded CI machine from flaking.
	if d := plainReqAnswers(t, s); d > 5*time.Second {
		t.Fatalf("plain REQ took %s", d)
	}
}

func TestHostileSearchFloodLeavesReadersForPlainReads(t *testing.T) {
	s, st := startStalling(t, func(c *relay.Config) { c.QueryTimeout = time.Minute })
	for i := range 6 {
		c, _ := authedRaw(t, s)
		c.send("REQ", "flood", map[string]any{"search": fmt.Sprintf("slow query %d", i)})
	}
	eventually(t, "six searches at the gate", func() bool { return relay.PendingReads(s.Relay) == 6 })
	if running, _ := st.counts(); running != relay.MaxSearches {
		t.Fatalf("%d searches run at once, want the relay-wide cap %d", running, relay.MaxSearches)
	}
	if d := plainReqAnswers(t, s); d > 5*time.Second {
		t.Fatalf("plain REQ took %s behind a search flood", d)
	}
	if _, peak := st.counts(); peak > relay.MaxSearches {
		t.Fatalf("peak of %d concurrent searches, cap %d", peak, relay.MaxSearches)
	}
}

func TestHostileQueryIsCancelledWhenItsClientLeaves(t *testing.T) {
	s, st := startStalling(t, func(c *relay.Config) { c.QueryTimeout = time.Hour })
	c, _ := authedRaw(t, s)
	c.send("REQ", "slow", map[string]any{"search": "anything"})
	eventually(t, "the search to start", func() bool { r, _ := st.counts(); return r == 1 })
	c.ws.CloseNow()
	select {
	case err := <-st.ended:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("query ended with %v, want cancelled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the query ran on after its client left")
	}
}

func TestHostileSlowQueryHitsItsDeadline(t *testing.T) {
	s, st := startStalling(t, func(c *relay.Config) { c.QueryTimeout = 200 * time.Millisecond })
	c, u := authedRaw(t, s)
	c.send("REQ", "slow", map[string]any{"search": "anything"})
	if got := c.readUntil("CLOSED"); !hasPrefix(got[2], "error: query took longer than") {
		t.Fatalf("REQ answer %v", got)
	}
	if err := <-st.ended; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("query ended with %v, want its deadline", err)
	}
	body, _ := json.Marshal([]map[string]any{{"kinds": []int{stallKind}}})
	if status, raw := s.Post(t, u.sk, "/count", body); status != http.StatusServiceUnavailable {
		t.Fatalf("bridge /count past the deadline answered %d %s", status, raw)
	}
}

func TestHostileBridgeBurstFromOneClientRunsTwoAtATime(t *testing.T) {
	s, st := startStalling(t, func(c *relay.Config) { c.QueryTimeout = 2 * time.Second })
	attacker := newUser()
	body, _ := json.Marshal([]map[string]any{{"kinds": []int{stallKind}}})
	var wg sync.WaitGroup
	for range 5 {
		// Not s.Post: it may call t.Fatal, which only the test goroutine may.
		auth, err := protocol.SignHTTPAuth(attacker.sk, s.HTTPURL+"/query", http.MethodPost, body, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodPost, s.HTTPURL+"/query", bytes.NewReader(body))
			req.Header.Set("Authorization", auth)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		})
	}
	eventually(t, "five queries at the gate", func() bool { return relay.PendingReads(s.Relay) == 5 })
	if running, _ := st.counts(); running != relay.MaxClientQueries {
		t.Fatalf("one client runs %d queries at once, want %d", running, relay.MaxClientQueries)
	}
	other := newUser()
	start := time.Now()
	s.Query(t, other.sk, nostr.Filter{Kinds: []int{9}, Limit: 1})
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("another client's query took %s", d)
	}
	wg.Wait()
	if _, peak := st.counts(); peak > relay.MaxClientQueries {
		t.Fatalf("peak %d concurrent queries from one client", peak)
	}
}

// ownerTag builds a NIP-OA ["auth", owner, conditions, sig] tag for agentPK.
func ownerTag(t *testing.T, ownerSK, agentPK, conds string) nostr.Tag {
	t.Helper()
	raw, _ := hex.DecodeString(ownerSK)
	priv, _ := btcec.PrivKeyFromBytes(raw)
	digest := sha256.Sum256([]byte("nostr:agent-auth:" + agentPK + ":" + conds))
	sig, err := schnorr.Sign(priv, digest[:])
	if err != nil {
		t.Fatal(err)
	}
	ownerPK, _ := nostr.GetPublicKey(ownerSK)
	return nostr.Tag{"auth", ownerPK, conds, hex.EncodeToString(sig.Serialize())}
}

func addTo(t *testing.T, s *relaytest.Server, actorSK, ch, target string) (int, relaytest.PublishResult) {
	return s.TryPublish(t, actorSK, &nostr.Event{Kind: protocol.KindPutUser, Tags: nostr.Tags{{"h", ch}, {"p", target}}})
}

func TestHostileChannelAddFloodHonoursTheTargetsPolicy(t *testing.T) {
	s := relaytest.Start(t)
	spammer, owner, agent, loner, forgedAgent := newUser(), newUser(), newUser(), newUser(), newUser()
	ch := s.CreateChannel(t, spammer.sk, "spam", false)

	// nobody: no third party may add the agent, not even a channel owner.
	s.Publish(t, loner.sk, nostr.Event{Kind: protocol.KindAgentProfile, Content: `{"channel_add_policy":"nobody"}`})
	if status, res := addTo(t, s, spammer.sk, ch, loner.pk); res.Accepted || !strings.Contains(res.Error, "policy:nobody") {
		t.Fatalf("add against policy nobody: %d %+v", status, res)
	}
	// owner_only: only the owner its NIP-OA tag proves.
	s.Publish(t, agent.sk, nostr.Event{Kind: protocol.KindAgentProfile, Content: `{"channel_add_policy":"owner_only"}`,
		Tags: nostr.Tags{ownerTag(t, owner.sk, agent.pk, "")}})
	if status, res := addTo(t, s, spammer.sk, ch, agent.pk); res.Accepted || !strings.Contains(res.Error, "policy:owner_only") {
		t.Fatalf("stranger's add against owner_only: %d %+v", status, res)
	}
	if status, res := addTo(t, s, owner.sk, ch, agent.pk); !res.Accepted {
		t.Fatalf("owner's add refused: %d %+v", status, res)
	}
	// A forged owner tag (signed by someone else) proves nothing.
	forged := ownerTag(t, spammer.sk, forgedAgent.pk, "")
	forged[1] = owner.pk
	s.Publish(t, forgedAgent.sk, nostr.Event{Kind: protocol.KindAgentProfile, Content: `{"channel_add_policy":"owner_only"}`, Tags: nostr.Tags{forged}})
	ch2 := s.CreateChannel(t, owner.sk, "other", false)
	if _, res := addTo(t, s, owner.sk, ch2, forgedAgent.pk); res.Accepted || !strings.Contains(res.Error, "no owner set") {
		t.Fatalf("add with a forged owner tag: %+v", res)
	}
	// Joining by oneself is never gated.
	s.Publish(t, loner.sk, nostr.Event{Kind: protocol.KindJoinRequest, Tags: nostr.Tags{{"h", ch2}}})
}

func TestHostileCrossSiteOriginIsRefused(t *testing.T) {
	s := relaytest.StartWith(t, func(c *relay.Config) { c.AllowedOrigins = []string{"http://127.0.0.1:5173"} })
	dial := func(origin string) (*http.Response, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ws, resp, err := websocket.Dial(ctx, s.URL, &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {origin}}})
		if err == nil {
			ws.CloseNow()
		}
		return resp, err
	}
	if resp, err := dial("https://evil.example"); err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("WebSocket from a foreign origin: err %v resp %v", err, resp)
	}
	if _, err := dial("HTTP://127.0.0.1:5173"); err != nil {
		t.Fatalf("WebSocket from the allowed origin refused: %v", err)
	}
	u := newUser()
	body := []byte(`[{"kinds":[9]}]`)
	post := func(origin string) int {
		auth, _ := protocol.SignHTTPAuth(u.sk, s.HTTPURL+"/query", http.MethodPost, body, time.Now())
		req, _ := http.NewRequest(http.MethodPost, s.HTTPURL+"/query", bytes.NewReader(body))
		req.Header.Set("Authorization", auth)
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if status := post("https://evil.example"); status != http.StatusForbidden {
		t.Fatalf("bridge from a foreign origin answered %d", status)
	}
	if status := post(""); status != http.StatusOK {
		t.Fatalf("bridge without Origin (CLI) answered %d", status)
	}
}

// authAs opens a WebSocket sending hostHeader and answers AUTH naming relayURL.
func authAs(t *testing.T, s *relaytest.Server, hostHeader, relayURL string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, s.URL, &websocket.DialOptions{Host: hostHeader})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.CloseNow() })
	c := &rawConn{t: t, ws: ws}
	c.challenge = c.read()[1].(string)
	u := newUser()
	return c.auth(u.sk, relayURL, time.Now())[2] == true
}

// postAs sends a NIP-98 /query with the given Host header and u tag.
func postAs(t *testing.T, s *relaytest.Server, hostHeader, u string) int {
	t.Helper()
	body := []byte(`[{"kinds":[9]}]`)
	auth, _ := protocol.SignHTTPAuth(newUser().sk, u, http.MethodPost, body, time.Now())
	req, _ := http.NewRequest(http.MethodPost, s.HTTPURL+"/query", bytes.NewReader(body))
	req.Host = hostHeader
	req.Header.Set("Authorization", auth)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestHostileAuthNamingTheHostHeaderIsRefused(t *testing.T) {
	s := relaytest.Start(t)
	port := s.URL[strings.LastIndex(s.URL, ":")+1:]
	evil := "evil.example:" + port
	if authAs(t, s, evil, "ws://"+evil) {
		t.Fatal("NIP-42 accepted a relay tag naming only the request's Host header")
	}
	if status := postAs(t, s, evil, "http://"+evil+"/query"); status != http.StatusUnauthorized {
		t.Fatalf("NIP-98 with u naming the Host header answered %d", status)
	}
	for _, name := range []string{"127.0.0.1", "localhost", "[::1]"} {
		if !authAs(t, s, evil, "ws://"+name+":"+port) {
			t.Errorf("NIP-42 refused the loopback name %s with the listen port", name)
		}
	}
	if authAs(t, s, "", "ws://127.0.0.1:1") {
		t.Error("NIP-42 accepted a loopback URL with another port")
	}
	if status := postAs(t, s, evil, "http://localhost:"+port+"/query"); status != http.StatusOK {
		t.Fatalf("NIP-98 naming localhost with the listen port answered %d", status)
	}
}

func TestHostileAuthWithAPublicURLAcceptsOnlyIt(t *testing.T) {
	s := relaytest.StartWith(t, func(c *relay.Config) { c.PublicURL = "wss://Relay.Example/" })
	if !authAs(t, s, "relay.example", "wss://relay.example:443") {
		t.Fatal("NIP-42 refused the public URL (default port spelled out)")
	}
	if authAs(t, s, "127.0.0.1", s.URL) {
		t.Fatal("NIP-42 accepted the listen address although a public URL is configured")
	}
	if status := postAs(t, s, "relay.example", "https://relay.example/query"); status != http.StatusOK {
		t.Fatalf("NIP-98 naming the public URL answered %d", status)
	}
	if status := postAs(t, s, "evil.example", "https://evil.example/query"); status != http.StatusUnauthorized {
		t.Fatalf("NIP-98 naming the Host header answered %d", status)
	}
}

func TestHostileSlowReaderIsDroppedWithBoundedQueue(t *testing.T) {
	s := relaytest.StartWith(t, func(c *relay.Config) { c.WriteTimeout = time.Second })
	alice := newUser()
	ch := s.CreateChannel(t, alice.sk, "big", false)
	// The attack asked for 100 events ten times; 40 keep the test quick and still ask for
	// 200 MB, 25 times the cap.
	const stored = 40
	for i := range stored {
		s.Publish(t, alice.sk, msg(ch, fmt.Sprintf("%d %s", i, strings.Repeat("x", 500_000))))
	}
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	peakHeap := make(chan uint64, 1)
	stop := make(chan struct{})
	go func() {
		var peak uint64
		var m runtime.MemStats
		for {
			select {
			case <-stop:
				peakHeap <- peak
				return
			case <-time.After(20 * time.Millisecond):
				runtime.ReadMemStats(&m)
				peak = max(peak, m.HeapAlloc)
			}
		}
	}()

	c, _ := authedRaw(t, s)
	for i := range 10 {
		c.send("REQ", fmt.Sprintf("big%d", i), map[string]any{"kinds": []int{9}, "#h": []string{ch}, "limit": stored})
	}
	// The client never reads: the relay must drop it, not buffer 200 MB for it.
	eventually(t, "the relay to drop the stalled client", func() bool { return relay.Conns(s.Relay) == 0 })
	close(stop)
	if peak := relay.PeakQueuedBytes(s.Relay); peak > relay.DefaultMaxQueuedBytes {
		t.Fatalf("%d bytes queued for one client, cap %d", peak, relay.DefaultMaxQueuedBytes)
	}
	// Generous: one REQ's 20 MB result is in memory while it is sent, and garbage awaits the
	// collector; without the cap all 200 MB wait in the queue.
	if grew := int64(<-peakHeap) - int64(before.HeapAlloc); grew > 120<<20 {
		t.Fatalf("heap grew by %d MB while a client stalled", grew>>20)
	}
}

// A client reading a large history slowly has its queue at the cap by design (history waits for
// room); a live event for it meanwhile waits for its writer apart from that queue, and does not
// get the client dropped as too slow. (Live events are shared by every connection and framed at
// write time, so what waits for one connection is a reference, not a copy.)
func TestLiveEventDuringAHistoryAtTheCapDoesNotDropTheReader(t *testing.T) {
	const limit = 1 << 20
	s := relaytest.StartWith(t, func(c *relay.Config) { c.MaxQueuedBytes = limit })
	alice := newUser()
	ch := s.CreateChannel(t, alice.sk, "history", false)
	// Past the loopback socket buffers (a few MB) and the cap, so the queue fills while the
	// client does not read.
	const stored = 60
	for i := range stored {
		s.Publish(t, alice.sk, msg(ch, fmt.Sprintf("%d %s", i, strings.Repeat("x", 200_000))))
	}
	c, _ := authedRaw(t, s)
	c.send("REQ", "hist", map[string]any{"kinds": []int{9}, "#h": []string{ch}, "limit": stored + 1})
	eventually(t, "the history queue to reach the cap", func() bool { return relay.PeakQueuedBytes(s.Relay) >= limit-250_000 })
	live := msg(ch, "live while the history is queued "+strings.Repeat("y", 200_000)) // more than the room left
	if status, res := s.TryPublish(t, alice.sk, &live); status != http.StatusOK {
		t.Fatalf("live publish: %d %q", status, res.Error)
	}

	got, sawLive, eose := 0, false, false
	for !eose || !sawLive {
		m := c.read() // fails the test if the relay dropped the connection
		switch m[0] {
		case "EVENT":
			if m[2].(map[string]any)["id"] == live.ID {
				sawLive = true
			} else {
				got++
			}
		case "EOSE":
			eose = true
		}
	}
	if got < stored {
		t.Fatalf("got %d of %d history events", got, stored)
	}
	if n := relay.Conns(s.Relay); n != 1 {
		t.Fatalf("%d connections, want the reader's", n)
	}
}

func TestHostileOpenDataDirIsRefused(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := relay.Open(relay.Config{DataDir: dir})
	if err == nil || !strings.Contains(err.Error(), "chmod 700") {
		t.Fatalf("Open on a 0755 data dir: %v, want a refusal naming the fix", err)
	}
	fresh := filepath.Join(t.TempDir(), "new")
	r, err := relay.Open(relay.Config{DataDir: fresh})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, p := range []string{fresh, filepath.Join(fresh, "relay.db"), filepath.Join(fresh, "relay.key")} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s has mode %04o", p, fi.Mode().Perm())
		}
	}
}

func TestHostileUppercaseTwinOfAChannelIsRefused(t *testing.T) {
	s := relaytest.Start(t)
	alice, eve := newUser(), newUser()
	ch := s.CreateChannel(t, alice.sk, "general", true)
	twin := strings.ToUpper(ch)
	status, res := s.TryPublish(t, eve.sk, &nostr.Event{Kind: protocol.KindCreateGroup, Tags: nostr.Tags{{"h", twin}, {"name", "general"}}})
	if res.Accepted || !strings.Contains(res.Error, "lowercase") {
		t.Fatalf("uppercase twin channel: %d %+v", status, res)
	}
	if _, res := s.TryPublish(t, eve.sk, &nostr.Event{Kind: 9, Content: "x", Tags: nostr.Tags{{"h", strings.ToUpper(uuid.NewString())}}}); res.Accepted {
		t.Fatal("message to an uppercase channel id accepted")
	}
}

func TestHostileNIP98WithABodyButNoPayloadHashIsRefused(t *testing.T) {
	s := relaytest.Start(t)
	u := newUser()
	body := []byte(`[{"kinds":[9]}]`)
	ev := nostr.Event{Kind: protocol.KindHTTPAuth, CreatedAt: nostr.Now(), Tags: nostr.Tags{
		{"u", s.HTTPURL + "/query"}, {"method", "POST"}, {"nonce", uuid.NewString()},
	}}
	ev.Sign(u.sk)
	raw, _ := json.Marshal(ev)
	req, _ := http.NewRequest(http.MethodPost, s.HTTPURL+"/query", bytes.NewReader(body))
	req.Header.Set("Authorization", "Nostr "+base64.StdEncoding.EncodeToString(raw))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]string
	decodeJSON(t, resp, &out)
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(out["error"], "payload") {
		t.Fatalf("NIP-98 without payload hash: %d %v", resp.StatusCode, out)
	}
}

// dmOpen publishes a 41010 from sk naming others.
func dmOpen(t *testing.T, s *relaytest.Server, sk string, others ...string) relaytest.PublishResult {
	t.Helper()
	tags := nostr.Tags{{"d", uuid.NewString()}}
	for _, pk := range others {
		tags = append(tags, nostr.Tag{"p", pk})
	}
	_, res := s.TryPublish(t, sk, &nostr.Event{Kind: protocol.KindDMOpen, Tags: tags})
	return res
}

func TestHostileDMOpenHonoursTheParticipantsAddPolicy(t *testing.T) {
	s := relaytest.Start(t)
	stranger, owner, agent, throwaway, hermit := newUser(), newUser(), newUser(), newUser(), newUser()
	s.Publish(t, agent.sk, nostr.Event{Kind: protocol.KindAgentProfile, Content: `{"channel_add_policy":"owner_only"}`,
		Tags: nostr.Tags{ownerTag(t, owner.sk, agent.pk, "")}})
	s.Publish(t, hermit.sk, nostr.Event{Kind: protocol.KindAgentProfile, Content: `{"channel_add_policy":"nobody"}`})

	// The attack: a group DM of the agent, its owner and a throwaway key, opened by a stranger.
	if res := dmOpen(t, s, stranger.sk, agent.pk, owner.pk, throwaway.pk); res.Accepted || !strings.Contains(res.Error, "policy:owner_only") {
		t.Fatalf("stranger's group DM with an owner_only agent: %+v", res)
	}
	if res := dmOpen(t, s, stranger.sk, agent.pk); res.Accepted || !strings.Contains(res.Error, "policy:owner_only") {
		t.Fatalf("stranger's DM with an owner_only agent: %+v", res)
	}
	if res := dmOpen(t, s, owner.sk, hermit.pk); res.Accepted || !strings.Contains(res.Error, "policy:nobody") {
		t.Fatalf("DM with a nobody agent: %+v", res)
	}
	// The owner may, and the agent may open DMs with anyone (its own key is never gated).
	if res := dmOpen(t, s, owner.sk, agent.pk); !res.Accepted {
		t.Fatalf("owner's DM with the agent refused: %+v", res)
	}
	if res := dmOpen(t, s, agent.sk, stranger.pk); !res.Accepted {
		t.Fatalf("agent's DM with a stranger refused: %+v", res)
	}
	// Nor can a stranger pull the agent in by adding it to a DM of theirs (41011).
	pair := dmOpen(t, s, stranger.sk, owner.pk)
	body, _ := strings.CutPrefix(pair.Message, "response:")
	var reply struct {
		ChannelID string `json:"channel_id"`
	}
	if !pair.Accepted || json.Unmarshal([]byte(body), &reply) != nil {
		t.Fatalf("stranger's DM with the owner: %+v", pair)
	}
	_, res := s.TryPublish(t, stranger.sk, &nostr.Event{Kind: protocol.KindDMAddMember, Tags: nostr.Tags{{"h", reply.ChannelID}, {"p", agent.pk}}})
	if res.Accepted || !strings.Contains(res.Error, "policy:owner_only") {
		t.Fatalf("stranger's 41011 adding an owner_only agent: %+v", res)
	}
}

func TestHostileDMOpenFloodFromOneKeyIsCutShort(t *testing.T) {
	s := relaytest.StartWith(t, func(c *relay.Config) { c.MaxDMOpensPerMinute = 5 })
	spammer := newUser()
	for i := range 5 {
		if res := dmOpen(t, s, spammer.sk, newUser().pk); !res.Accepted {
			t.Fatalf("DM open %d refused: %+v", i+1, res)
		}
	}
	if res := dmOpen(t, s, spammer.sk, newUser().pk); res.Accepted || !strings.HasPrefix(res.Error, "rate-limited:") {
		t.Fatalf("sixth DM open within a minute: %+v", res)
	}
	if res := dmOpen(t, s, newUser().sk, spammer.pk); !res.Accepted {
		t.Fatalf("another key's DM open refused: %+v", res)
	}
}

func TestHostileFutureDatedCanvasFromANonMemberIsRefused(t *testing.T) {
	s := relaytest.Start(t)
	owner, stranger := newUser(), newUser()
	ch := s.CreateChannel(t, owner.sk, "open", false)
	in2100 := nostr.Timestamp(time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC).Unix())
	// Dated in 2100, it would sort above every real canvas and message for 74 years.
	for _, ev := range []nostr.Event{
		{Kind: protocol.KindCanvas, Content: "pinned", CreatedAt: in2100, Tags: nostr.Tags{{"h", ch}}},
		{Kind: protocol.KindStreamMessage, Content: "first forever", CreatedAt: in2100, Tags: nostr.Tags{{"h", ch}}},
	} {
		if _, res := s.TryPublish(t, owner.sk, &ev); res.Accepted || !strings.Contains(res.Error, "in the future") {
			t.Fatalf("kind %d dated 2100: %+v", ev.Kind, res)
		}
	}
	// A non-member of the open channel may post there, but not write its canvas.
	s.Publish(t, stranger.sk, msg(ch, "hello"))
	if _, res := s.TryPublish(t, stranger.sk, &nostr.Event{Kind: protocol.KindCanvas, Content: "mine now", Tags: nostr.Tags{{"h", ch}}}); res.Accepted || !strings.Contains(res.Error, "only channel members may write the canvas") {
		t.Fatalf("stranger's canvas: %+v", res)
	}
	s.Publish(t, owner.sk, nostr.Event{Kind: protocol.KindCanvas, Content: "plan", Tags: nostr.Tags{{"h", ch}}})
}

func TestHostileWriteFloodFromOneKeyIsRateLimited(t *testing.T) {
	clk := clock.NewFake(time.Now()) // still: no token comes back while the 40 are sent
	s := relaytest.StartWith(t, func(c *relay.Config) { c.MaxWritesPerSecond, c.Now = 2, clk.Now })
	c, u := authedRaw(t, s)
	ch := s.CreateChannel(t, u.sk, "flood", false) // 1 of the burst of 20
	refused := 0
	for i := range 40 {
		if ok := c.publish(u.sk, msg(ch, fmt.Sprint("spam ", i))); ok[2] != true {
			if !hasPrefix(ok[3], "rate-limited:") {
				t.Fatalf("write %d refused with %v", i, ok)
			}
			refused++
		}
	}
	if refused != 40-19 {
		t.Fatalf("%d of 40 writes refused, want the 21 past the burst", refused)
	}
	other, ou := authedRaw(t, s)
	if ok := other.publish(ou.sk, msg(ch, "still here")); ok[2] != true {
		t.Fatalf("another key's write refused: %v", ok)
	}
}

func TestHostileUnauthenticatedSocketIsClosedAfterTheAuthTimeout(t *testing.T) {
	s := relaytest.StartWith(t, func(c *relay.Config) { c.AuthTimeout = 200 * time.Millisecond })
	authed, u := authedRaw(t, s)
	idle := dialRaw(t, s.URL) // opened after authed, so its timeout comes later
	if m := idle.read(); len(m) < 2 || m[0] != "NOTICE" || !hasPrefix(m[1], "auth-required:") {
		t.Fatalf("idle socket got %v, want an auth-required NOTICE", m)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, _, err := idle.ws.Read(ctx); websocket.CloseStatus(err) != websocket.StatusPolicyViolation {
		t.Fatalf("idle socket read %v, want it closed for policy", err)
	}
	// The authenticated socket, older than the idle one, is still served.
	authed.send("REQ", "still", map[string]any{"authors": []string{u.pk}, "limit": 1})
	authed.readUntil("EOSE")
}

func TestHostileConnectionsFromOneAddressAreCapped(t *testing.T) {
	s := relaytest.StartWith(t, func(c *relay.Config) { c.MaxConnsPerIP = 3 })
	var open []*rawConn
	for range 3 {
		open = append(open, dialRaw(t, s.URL))
	}
	dial := func() (*websocket.Conn, *http.Response, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return websocket.Dial(ctx, s.URL, nil)
	}
	if ws, resp, err := dial(); err == nil || resp == nil || resp.StatusCode != http.StatusTooManyRequests {
		if ws != nil {
			ws.CloseNow()
		}
		t.Fatalf("fourth connection: %v %v, want 429", resp, err)
	}
	open[0].ws.CloseNow()
	eventually(t, "a slot to free once a connection closes", func() bool {
		ws, _, err := dial()
		if err == nil {
			ws.CloseNow()
		}
		return err == nil
	})
}

func TestHostileDMSquatByChannelCreateIsRefused(t *testing.T) {
	s := relaytest.Start(t)
	squatter, owner, agent := newUser(), newUser(), newUser()
	set := []string{owner.pk, agent.pk}
	slices.Sort(set)
	dmID := relay.DMChannelID(set)
	_, res := s.TryPublish(t, squatter.sk, &nostr.Event{Kind: protocol.KindCreateGroup, Tags: nostr.Tags{
		{"h", dmID}, {"name", "DM"}, {"visibility", protocol.VisibilityOpen}, {"channel_type", protocol.TypeStream}}})
	if res.Accepted || !strings.Contains(res.Error, "reserved for DMs") {
		t.Fatalf("9007 with the pair's DM id: %+v", res)
	}
	// The pair's DM is theirs: private, the two of them, nobody else.
	open := dmOpen(t, s, owner.sk, agent.pk)
	if !open.Accepted || !strings.Contains(open.Message, dmID) || !strings.Contains(open.Message, `"created":true`) {
		t.Fatalf("owner's DM open: %+v, want the DM %s created", open, dmID)
	}
	if got := s.Query(t, squatter.sk, nostr.Filter{Tags: nostr.TagMap{"h": {dmID}}}); len(got) != 0 {
		t.Fatalf("squatter reads %d events of the DM", len(got))
	}
}

// probeDM is everything a stranger learns about a channel id: a REQ's answer, a message's, a
// join's and an edit's.
func probeDM(t *testing.T, s *relaytest.Server, c *rawConn, sk, id string) []string {
	t.Helper()
	c.send("REQ", "probe", map[string]any{"#h": []string{id}, "limit": 10})
	var got []string
	for {
		m := c.read()
		got = append(got, fmt.Sprint(m[0]))
		if m[0] == "EOSE" || m[0] == "CLOSED" {
			got = append(got, fmt.Sprint(m[2:]...))
			break
		}
	}
	c.send("CLOSE", "probe")
	for _, ev := range []nostr.Event{msg(id, "hi"), {Kind: protocol.KindJoinRequest, Tags: nostr.Tags{{"h", id}}}} {
		_, res := s.TryPublish(t, sk, &ev)
		got = append(got, fmt.Sprint(res.Accepted, res.Error))
	}
	return got
}

func TestHostileProbingAComputedDMIDTellsNothing(t *testing.T) {
	s := relaytest.Start(t)
	owner, agent, other := newUser(), newUser(), newUser()
	if res := dmOpen(t, s, owner.sk, agent.pk); !res.Accepted {
		t.Fatalf("DM open: %+v", res)
	}
	s.Publish(t, owner.sk, msg(relay.DMChannelID(sortedPair(owner.pk, agent.pk)), "secret"))
	c, prober := authedRaw(t, s)
	exists := probeDM(t, s, c, prober.sk, relay.DMChannelID(sortedPair(owner.pk, agent.pk)))
	absent := probeDM(t, s, c, prober.sk, relay.DMChannelID(sortedPair(owner.pk, other.pk)))
	if !slices.Equal(exists, absent) {
		t.Fatalf("an existing DM answers %q, an absent one %q", exists, absent)
	}
}

// The edit rule answers a stranger the same for an id that is absent and one that is not theirs.
func TestHostileEditProbeCannotTellAnEventExists(t *testing.T) {
	s := relaytest.Start(t)
	owner, stranger := newUser(), newUser()
	ch := s.CreateChannel(t, owner.sk, "open", false)
	secret := msg(ch, "yes")
	if _, res := s.TryPublish(t, owner.sk, &secret); !res.Accepted {
		t.Fatal(res)
	}
	edit := func(target string) string {
		_, res := s.TryPublish(t, stranger.sk, &nostr.Event{Kind: protocol.KindEdit, Content: "x", Tags: nostr.Tags{{"h", ch}, {"e", target}}})
		return fmt.Sprint(res.Accepted, res.Error)
	}
	private := s.CreateChannel(t, owner.sk, "private", true)
	hidden := msg(private, "the one-word secret")
	if _, res := s.TryPublish(t, owner.sk, &hidden); !res.Accepted {
		t.Fatal(res)
	}
	absent, theirs, elsewhere := edit(strings.Repeat("0", 64)), edit(secret.ID), edit(hidden.ID)
	if absent != theirs || absent != elsewhere {
		t.Fatalf("edit answers: absent %q, someone else's %q, in a private channel %q", absent, theirs, elsewhere)
	}
}

func sortedPair(a, b string) []string {
	p := []string{a, b}
	slices.Sort(p)
	return p
}

// A tag bomb: a kind 0 with 34,134 t tags cost the single SQLite writer a second (one row per
// tag), and everyone's publish waited behind it. It is refused before the store.
func TestHostileTagBombIsRefusedBeforeTheStore(t *testing.T) {
	s := relaytest.Start(t)
	c, u := authedRaw(t, s)
	bomb := nostr.Event{Kind: protocol.KindProfile, Content: "{}"}
	for i := range 5000 {
		bomb.Tags = append(bomb.Tags, nostr.Tag{"t", fmt.Sprint(i)})
	}
	if got := c.publish(u.sk, bomb); got[2] != false || !hasPrefix(got[3], "invalid: event has 5000 tags") {
		t.Fatalf("kind 0 with 5000 t tags: %v, want refused as invalid", got)
	}
	bomb.Tags = bomb.Tags[:201]
	if got := c.publish(u.sk, bomb); got[2] != false || !hasPrefix(got[3], "invalid: event has 201 indexed tags") {
		t.Fatalf("kind 0 with 201 t tags: %v, want refused as invalid", got)
	}
	if evs := s.Query(t, u.sk, nostr.Filter{Kinds: []int{protocol.KindProfile}, Authors: []string{u.pk}}); len(evs) != 0 {
		t.Fatalf("a refused tag bomb was stored: %d events", len(evs))
	}
}

// Heavy reads (issue 28, item 8): two keys running two COUNTs each over 200k events held all
// four SQLite readers, and other clients' small queries waited up to 8 s. COUNTs run one per key
// and MaxHeavyReads relay-wide, so plain reads keep readers of their own.
func TestHostileCountsFromTwoKeysLeaveReadersForPlainReads(t *testing.T) {
	s, st := startStalling(t, func(c *relay.Config) { c.QueryTimeout, c.CountTimeout = time.Minute, time.Minute })
	for range 2 {
		u := newUser()
		for i := range 2 {
			c := dialRaw(t, s.URL)
			c.mustAuth(u.sk, s.URL)
			c.send("COUNT", fmt.Sprintf("heavy%d", i), map[string]any{"kinds": []int{stallKind}})
		}
	}
	eventually(t, "four counts at the gate", func() bool { return relay.PendingReads(s.Relay) == 4 })
	eventually(t, "the heavy-read slots taken", func() bool { r, _ := st.counts(); return r == relay.MaxHeavyReads })
	if d := plainReqAnswers(t, s); d > 5*time.Second {
		t.Fatalf("plain REQ took %s behind four counts", d)
	}
	if _, peak := st.counts(); peak > relay.MaxHeavyReads {
		t.Fatalf("peak of %d concurrent counts, cap %d", peak, relay.MaxHeavyReads)
	}
}

func TestHostileSlowCountHitsTheShorterCountDeadline(t *testing.T) {
	s, st := startStalling(t, func(c *relay.Config) { c.QueryTimeout, c.CountTimeout = time.Hour, 200*time.Millisecond })
	c, _ := authedRaw(t, s)
	c.send("COUNT", "slow", map[string]any{"kinds": []int{stallKind}})
	if got := c.readUntil("CLOSED"); !hasPrefix(got[2], "error: count took longer than 200ms") {
		t.Fatalf("COUNT answer %v", got)
	}
	if err := <-st.ended; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("count ended with %v, want its deadline", err)
	}
}
