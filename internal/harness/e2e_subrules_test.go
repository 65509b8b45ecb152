package harness_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
)

// forumChannel creates a forum channel owned by the stack's owner, with the agent in it.
func (s *stack) forumChannel(name string) string {
	s.t.Helper()
	id := uuid.NewString()
	s.relay.Publish(s.t, s.ownerSK, nostr.Event{Kind: protocol.KindCreateGroup, Tags: nostr.Tags{
		{"h", id}, {"name", name}, {"visibility", protocol.VisibilityOpen}, {"channel_type", protocol.TypeForum}}})
	s.relay.AddMember(s.t, s.ownerSK, id, s.agentPK, "bot")
	return id
}

// postKind publishes an event of kind in channel as sk.
func (s *stack) postKind(sk, channel string, kind int, content string, tags ...nostr.Tag) nostr.Event {
	s.t.Helper()
	ev := nostr.Event{Kind: kind, Content: content, CreatedAt: nostr.Now(), Tags: append(nostr.Tags{{"h", channel}}, tags...)}
	if err := ev.Sign(sk); err != nil {
		s.t.Fatal(err)
	}
	s.relay.Publish(s.t, sk, ev)
	return ev
}

func writeRules(t *testing.T, doc string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "buzz-acp.toml")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestConfigRuleListensToAForumWithoutAMention: a forum rule hears posts in its channel that
// mention nobody, while the general channel still needs a mention (no --no-mention-filter).
func TestConfigRuleListensToAForumWithoutAMention(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	forum := s.forumChannel("ideas")
	rules := writeRules(t, `
[[rules]]
name = "forum"
channels = ["`+forum+`"]
kinds = [45001, 45003]
prompt_tag = "forum post"

[[rules]]
name = "mentions"
channels = "all"
kinds = [9]
require_mention = true
`)
	s.start([]string{"--subscribe", "config", "--config", rules})

	post := s.postKind(s.ownerSK, forum, protocol.KindForumPost, "an idea nobody was mentioned in")
	s.waitReply(post.ID)
	quiet := s.postKind(s.ownerSK, s.channel, protocol.KindStreamMessage, "chat that mentions nobody")
	m := s.mention(s.ownerSK, "now with a mention")
	s.waitReply(m.ID)

	all := strings.Join(s.prompts(), "\n")
	if !strings.Contains(all, "Subscription rule: forum post") || !strings.Contains(all, "[Buzz event: forum post]") {
		t.Fatalf("the forum post's prompt does not name its rule:\n%s", all)
	}
	if strings.Contains(all, quiet.ID) {
		t.Fatal("an unmentioned kind-9 in the general channel was prompted")
	}
}

// TestConfigFilterDecidesWhichEventsStartTurns: the filter expression reads the content.
func TestConfigFilterDecidesWhichEventsStartTurns(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	rules := writeRules(t, `
[[rules]]
name = "deploys"
channels = "all"
kinds = [9]
filter = 'str_contains(content, "deploy") && author == "`+s.ownerPK+`"'
`)
	s.start([]string{"--subscribe", "config", "--config", rules})
	skipped := s.postKind(s.ownerSK, s.channel, protocol.KindStreamMessage, "lunch?")
	hit := s.postKind(s.ownerSK, s.channel, protocol.KindStreamMessage, "please deploy main")
	s.waitReply(hit.ID)
	if strings.Contains(strings.Join(s.prompts(), "\n"), skipped.ID) {
		t.Fatal("an event the filter rejects was prompted")
	}
}

// TestChannelNoRuleCoversIsNotSubscribed: a rule for one channel leaves the others unheard,
// mentions included.
func TestChannelNoRuleCoversIsNotSubscribed(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	forum := s.forumChannel("ideas")
	rules := writeRules(t, "[[rules]]\nname = \"forum\"\nchannels = [\""+forum+"\"]\n")
	s.start([]string{"--subscribe", "config", "--config", rules})
	s.waitLog("no subscription rule covers the channel", 20*time.Second)
	post := s.postKind(s.ownerSK, forum, protocol.KindForumPost, "heard")
	s.waitReply(post.ID)
}

func TestConfigFilterThatDoesNotParseStopsTheStartNamingTheRule(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	rules := writeRules(t, "[[rules]]\nname = \"broken\"\nchannels = \"all\"\nfilter = 'kind =='\n")
	cmd, logs := s.command([]string{"--subscribe", "config", "--config", rules})
	if err := cmd.Run(); err == nil {
		t.Fatalf("buzz-acp started with a filter that does not parse:\n%s", logs.String())
	}
	if out := logs.String(); !strings.Contains(out, `rule "broken": filter:`) {
		t.Fatalf("the error does not name the rule:\n%s", out)
	}
}
