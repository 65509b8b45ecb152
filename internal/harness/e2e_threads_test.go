package harness_test

import (
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
)

// sessionOf reads the session id out of a reply made with TESTAGENT_REPLY "… in {session}".
func sessionOf(t *testing.T, reply nostr.Event) string {
	t.Helper()
	_, id, ok := strings.Cut(reply.Content, " in ")
	if !ok || !strings.HasPrefix(id, "sess_") {
		t.Fatalf("reply %q names no session", reply.Content)
	}
	return id
}

func replyTo(id string) nostr.Tag { return nostr.Tag{"e", id, "", "reply"} }

// conversationIDs lists _meta.buzz.conversationId of every session/new.
func conversationIDs(t *testing.T, s *stack) []string {
	t.Helper()
	var out []string
	for _, r := range s.methods("session/new") {
		buzz, _ := decodeSession(t, r).Meta["buzz"].(map[string]any)
		id, _ := buzz["conversationId"].(string)
		out = append(out, id)
	}
	return out
}

const threadReply = "TESTAGENT_REPLY=answer {codeword} #{count} in {session}" // #{count}: no two replies are the same event

// twoThreads posts two top-level mentions, the second once the first is answered (so that under
// the channel policy it is not merged into the first's turn), and returns them with their replies.
func twoThreads(t *testing.T, s *stack) (m1, m2, r1, r2 nostr.Event) {
	t.Helper()
	m1 = s.mention(s.ownerSK, "codeword=ALPHA")
	r1 = s.waitReply(m1.ID)
	// Distinct created_at, as two separate top-level posts people make have: dated a second
	// after the first when the reply came within its second.
	m2 = s.mentionAt(s.ownerSK, "codeword=BRAVO", max(nostr.Now(), m1.CreatedAt+1))
	r2 = s.waitReply(m2.ID)
	return m1, m2, r1, r2
}

func TestTopLevelMentionsOpenOneSessionPerThread(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start(nil, threadReply)
	m1, m2, r1, r2 := twoThreads(t, s)
	for _, c := range []struct{ m, r nostr.Event }{{m1, r1}, {m2, r2}} {
		if ref := protocol.ParseThread(c.r.Tags); ref.Root != c.m.ID {
			t.Fatalf("reply %q is not in the thread of %s: %+v", c.r.Content, c.m.ID, ref)
		}
	}
	s1, s2 := sessionOf(t, r1), sessionOf(t, r2)
	if s1 == s2 {
		t.Fatalf("both threads were answered by session %s", s1)
	}
	want := []string{"buzz:" + s.channel + ":" + m1.ID, "buzz:" + s.channel + ":" + m2.ID}
	if got := conversationIDs(t, s); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("conversationIds %v, want %v", got, want)
	}

	// A follow-up in the first thread reaches the first thread's session, which remembers.
	s.mention(s.ownerSK, "recall", replyTo(m1.ID))
	rf := s.waitNewReply(m1.ID, r1)
	if sessionOf(t, rf) != s1 || !strings.Contains(rf.Content, "ALPHA") {
		t.Fatalf("follow-up answered %q; want ALPHA from %s", rf.Content, s1)
	}
	// A nested reply (root m2, parent the agent's reply) keys on the root.
	s.mention(s.ownerSK, "recall", nostr.Tag{"e", m2.ID, "", "root"}, replyTo(r2.ID))
	if rn := s.waitNewReply(m2.ID, r2); sessionOf(t, rn) != s2 || !strings.Contains(rn.Content, "BRAVO") {
		t.Fatalf("nested reply answered %q; want BRAVO from %s", rn.Content, s2)
	}
	if len(s.methods("session/new")) != 2 {
		t.Fatalf("%d session/new, want 2", len(s.methods("session/new")))
	}
}

func TestSiblingThreadsRunConcurrently(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start([]string{"--agents", "2"}, "TESTAGENT_HANG_ON=1")
	m1 := s.mention(s.ownerSK, "long job")
	s.waitRecorded("session/prompt", 1) // the first thread's turn hangs
	m2 := s.mention(s.ownerSK, "quick question")
	s.waitReply(m2.ID) // answered while the sibling thread is still busy
	cmd := s.mention(s.ownerSK, "!cancel", replyTo(m1.ID))
	if out := s.waitOutcome(cmd.ID); out["type"] != "agent_turn_cancelled" {
		t.Fatalf("!cancel in the busy thread: outcome %v", out)
	}
}

func TestRestartResumesEachThreadSessionSeparately(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start(nil, threadReply)
	m1, m2, r1, r2 := twoThreads(t, s)
	s1, s2 := sessionOf(t, r1), sessionOf(t, r2)
	// The test agent saves a session after posting its reply: wait for both turns to end.
	s.waitLog("session="+s1, 10*time.Second)
	s.waitLog("session="+s2, 10*time.Second)
	s.kill()

	s.start(nil, threadReply)
	s.mention(s.ownerSK, "recall", replyTo(m2.ID))
	if r := s.waitNewReply(m2.ID, r2); sessionOf(t, r) != s2 || !strings.Contains(r.Content, "BRAVO") {
		t.Fatalf("thread 2 after restart: %q, want BRAVO from %s", r.Content, s2)
	}
	s.mention(s.ownerSK, "recall", replyTo(m1.ID))
	if r := s.waitNewReply(m1.ID, r1); sessionOf(t, r) != s1 || !strings.Contains(r.Content, "ALPHA") {
		t.Fatalf("thread 1 after restart: %q, want ALPHA from %s", r.Content, s1)
	}
	loads := s.methods("session/load")
	if len(loads) != 2 || decodeSession(t, loads[0]).SessionID != s2 || decodeSession(t, loads[1]).SessionID != s1 {
		t.Fatalf("session/load ×%d; want one per thread (%s then %s)", len(loads), s2, s1)
	}
	if n := len(s.methods("session/new")); n != 2 {
		t.Fatalf("%d session/new, want 2 (none after the restart)", n)
	}
}

func TestLRUBoundClosesOldestIdleSessionAndReplyLoadsIt(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start([]string{"--max-cached-conversation-sessions", "1"}, threadReply, "TESTAGENT_CAPS=close")
	m1, _, r1, _ := twoThreads(t, s)
	s1 := sessionOf(t, r1)
	s.waitRecorded("session/close", 1)
	if id := decodeSession(t, s.methods("session/close")[0]).SessionID; id != s1 {
		t.Fatalf("session/close closed %s, want the least recently used %s", id, s1)
	}
	s.mention(s.ownerSK, "recall", replyTo(m1.ID))
	if r := s.waitNewReply(m1.ID, r1); sessionOf(t, r) != s1 || !strings.Contains(r.Content, "ALPHA") {
		t.Fatalf("reply in the closed thread: %q, want ALPHA from %s", r.Content, s1)
	}
	loads := s.methods("session/load")
	if len(loads) != 1 || decodeSession(t, loads[0]).SessionID != s1 {
		t.Fatalf("session/load ×%d, want one of %s", len(loads), s1)
	}
}

func TestIdleTTLClosesSession(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start([]string{"--conversation-session-idle-ttl-secs", "1"}, threadReply, "TESTAGENT_CAPS=close")
	m := s.mention(s.ownerSK, "codeword=CHARLIE")
	first := s.waitReply(m.ID)
	sid := sessionOf(t, first)
	s.waitRecorded("session/close", 1)
	if id := decodeSession(t, s.methods("session/close")[0]).SessionID; id != sid {
		t.Fatalf("closed %s, want %s", id, sid)
	}
	s.mention(s.ownerSK, "recall", replyTo(m.ID))
	if r := s.waitNewReply(m.ID, first); sessionOf(t, r) != sid || !strings.Contains(r.Content, "CHARLIE") {
		t.Fatalf("reply after the idle close: %q, want CHARLIE from %s", r.Content, sid)
	}
}

func TestChannelPolicyKeepsOneSessionPerChannel(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start([]string{"--session-policy", "channel"}, threadReply)
	_, _, r1, r2 := twoThreads(t, s)
	if sessionOf(t, r1) != sessionOf(t, r2) {
		t.Fatalf("two sessions under the channel policy: %q / %q", r1.Content, r2.Content)
	}
	if !strings.Contains(r2.Content, "BRAVO") {
		t.Fatalf("reply %q", r2.Content)
	}
	want := "buzz:" + s.channel + ":channel:" + s.channel
	if got := conversationIDs(t, s); len(got) != 1 || got[0] != want {
		t.Fatalf("conversationIds %v, want [%s]", got, want)
	}
}
