package harness_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/harness"
	"github.com/buzz-harness/buzz/internal/protocol"
)

// Thread follow (follow.go) with the real relay, binary and CLI.

// say posts a kind-9 by sk in the stack's channel that mentions nobody: a reply to parent in
// root's thread, as the console and the CLI send them (top level without a parent).
func (s *stack) say(sk, root, parent, content string, tags ...nostr.Tag) nostr.Event {
	s.t.Helper()
	ev := nostr.Event{Kind: 9, Content: content, CreatedAt: nostr.Now(), Tags: nostr.Tags{{"h", s.channel}}}
	if parent != "" {
		ev.Tags = append(ev.Tags, protocol.ReplyTags(root, parent)...)
	}
	ev.Tags = append(ev.Tags, tags...)
	if err := ev.Sign(sk); err != nil {
		s.t.Fatal(err)
	}
	s.relay.Publish(s.t, sk, ev)
	return ev
}

// answeredThread has the agent answer a mention, and returns the mention (the thread's root) and
// the reply, once the agent follows the thread.
func (s *stack) answeredThread(content string) (root, reply nostr.Event) {
	s.t.Helper()
	root = s.mention(s.ownerSK, content)
	reply = s.waitReply(root.ID)
	s.waitLog("following thread\" channel="+s.channel+" root="+root.ID, 10*time.Second)
	return root, reply
}

func (s *stack) prompted(id string) bool {
	return strings.Contains(strings.Join(s.prompts(), "\n"), "Event ID: "+id)
}

func TestFollowUpWithoutAMentionInAThreadTheAgentRepliedInIsAnswered(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start(nil)
	root, reply := s.answeredThread("first question")
	follow := s.say(s.ownerSK, root.ID, reply.ID, "and a second one")
	got := s.waitNewReply(root.ID, reply)
	if !strings.Contains(got.Content, "and a second one") {
		t.Fatalf("reply %q does not answer the follow-up", got.Content)
	}
	var p string
	for _, pr := range s.prompts() {
		if strings.Contains(pr, "Event ID: "+follow.ID) {
			p = pr
		}
	}
	if !strings.Contains(p, "Followed: nobody mentioned you") || !strings.Contains(p, "[Buzz event: thread follow]") {
		t.Fatalf("the follow-up's prompt does not say it came by thread follow:\n%s", p)
	}
}

func TestThreadFollowOffNeedsAMentionAgain(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start([]string{"--thread-follow=false"})
	root := s.mention(s.ownerSK, "first question")
	reply := s.waitReply(root.ID)
	ignored := s.say(s.ownerSK, root.ID, reply.ID, "no mention here")
	mention := s.say(s.ownerSK, root.ID, reply.ID, "now with one", nostr.Tag{"p", s.agentPK})
	s.waitPrompted(mention.ID)
	if s.prompted(ignored.ID) {
		t.Fatal("with --thread-follow=false a message without a mention was prompted")
	}
}

// Other agents' messages never continue a thread on their own, whatever the author gate says:
// not one that carries an agent's NIP-OA tag, not one whose author publishes an agent profile.
func TestAnotherAgentsMessageNeverContinuesAFollowedThread(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	botSK, botPK := newKey(t)
	s.relay.Publish(t, botSK, nostr.Event{Kind: protocol.KindAgentProfile, Content: "{}", CreatedAt: nostr.Now()})
	s.relay.AddMember(t, s.ownerSK, s.channel, botPK, "bot")
	s.start([]string{"--respond-to", "anyone"})
	root, reply := s.answeredThread("question")
	fromBot := s.say(botSK, root.ID, reply.ID, "I, a bot, reply here")
	s.waitLog("sibling lookup\" author="+botPK+" sibling=false agent=true", 10*time.Second)
	person := s.say(s.ownerSK, root.ID, reply.ID, "and I am the owner")
	s.waitPrompted(person.ID)
	if s.prompted(fromBot.ID) {
		t.Fatal("another agent's message continued the thread")
	}
}

func TestPersonsFollowUpIsAnsweredUnderTheAnyoneGate(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	personSK, personPK := newKey(t)
	s.relay.Publish(t, personSK, nostr.Event{Kind: protocol.KindProfile, Content: `{"name":"Pat"}`, CreatedAt: nostr.Now()})
	s.relay.AddMember(t, s.ownerSK, s.channel, personPK, "member")
	s.start([]string{"--respond-to", "anyone"})
	root, reply := s.answeredThread("question")
	s.waitPrompted(s.say(personSK, root.ID, reply.ID, "me too: what about staging?").ID)
}

func TestReplyThatMentionsSomeoneElseIsNotTakenAsAFollowUp(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start(nil)
	root, reply := s.answeredThread("question")
	_, bobPK := newKey(t)
	toBob := s.say(s.ownerSK, root.ID, reply.ID, "Bob, can you check this?", nostr.Tag{"p", bobPK})
	next := s.say(s.ownerSK, root.ID, reply.ID, "thanks")
	s.waitPrompted(next.ID)
	if s.prompted(toBob.ID) {
		t.Fatal("a reply addressed to someone else was prompted")
	}
}

// Only threads the agent replied in are followed: a new top-level message, or one in another
// channel, still needs a mention.
func TestOtherThreadsAndChannelsStayMentionOnly(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	other := s.relay.CreateChannel(t, s.ownerSK, "other", false)
	s.relay.AddMember(t, s.ownerSK, other, s.agentPK, "bot")
	s.start(nil)
	s.answeredThread("question")
	s.say(s.ownerSK, "", "", "a new topic, no mention")
	s.relay.Publish(t, s.ownerSK, nostr.Event{Kind: 9, Content: "no mention in the other channel", CreatedAt: nostr.Now(), Tags: nostr.Tags{{"h", other}}})
	s.waitReply(s.post(other, "a mention in the other channel").ID)
	for _, p := range s.prompts() {
		if strings.Contains(p, "no mention") {
			t.Fatalf("a message without a mention outside the followed thread was prompted:\n%s", p)
		}
	}
}

func TestFollowedMessageTheAgentLeavesUnansweredGetsNoNoticeNorFallback(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start(nil, "TESTAGENT_SKIP_FOLLOWED=1")
	root, reply := s.answeredThread("question")
	skipped := s.say(s.ownerSK, root.ID, reply.ID, "ok, thanks")
	s.waitPrompted(skipped.ID)
	s.say(s.ownerSK, root.ID, reply.ID, "one more thing", nostr.Tag{"p", s.agentPK})
	answer := s.waitNewReply(root.ID, reply)
	if !strings.Contains(answer.Content, "one more thing") {
		t.Fatalf("the next reply in the thread is %q, not the answer to the mention", answer.Content)
	}
	for _, ev := range s.agentMessages(root.ID) {
		if marked(ev, harness.FailureMarker) || marked(ev, harness.FallbackMarker) {
			t.Fatalf("a followed message the agent chose not to answer got %q", ev.Content)
		}
	}
}

func TestFollowedThreadsSurviveARestart(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start(nil)
	root, reply := s.answeredThread("question")
	file := filepath.Join(s.stateDir, "follow-"+s.agentPK+".json")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if b, _ := os.ReadFile(file); strings.Contains(string(b), root.ID) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never named the followed thread", file)
		}
	}
	s.kill()
	s.start(nil)
	s.waitLog(`followed threads" threads=1 from="state dir"`, 10*time.Second)
	s.waitPrompted(s.say(s.ownerSK, root.ID, reply.ID, "after the restart").ID)
}

func TestFollowedThreadsAreRebuiltFromTheRelayForANewStateDir(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start(nil)
	root, reply := s.answeredThread("question")
	s.kill()
	s.stateDir = filepath.Join(t.TempDir(), "new-state")
	s.start(nil)
	s.waitLog(`followed threads" threads=0 from="relay history"`, 10*time.Second)
	s.waitLog("following thread\" channel="+s.channel+" root="+root.ID, 10*time.Second)
	s.waitPrompted(s.say(s.ownerSK, root.ID, reply.ID, "with a new state dir").ID)
}
