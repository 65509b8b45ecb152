package prompt

import (
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr"
)

func TestEachEventShowsItsOwnRuleTag(t *testing.T) {
	a, b := msg(5, alice, "a post", nostr.Tag{"p", agent}), msg(6, bob, "a comment")
	blocks := renderBlocks(Input{Channel: stdChannel, Events: []nostr.Event{a, b},
		EventTags: map[string]string{a.ID: "@mention", b.ID: "forum"}})
	events := blocks[len(blocks)-1]
	if !strings.Contains(events, "--- Event 1 (@mention) ---") || !strings.Contains(events, "--- Event 2 (forum) ---") {
		t.Fatalf("event headers do not carry their rules' tags:\n%s", events)
	}
}

func TestContextNamesTheRuleOfTheNewestEvent(t *testing.T) {
	ev := msg(5, alice, "deploy please")
	blocks := renderBlocks(Input{Channel: stdChannel, Events: []nostr.Event{ev}, EventTags: map[string]string{ev.ID: "deploys"}})
	if !strings.HasPrefix(blocks[0], "[Context]\nSubscription rule: deploys\n") {
		t.Fatalf("[Context] does not name the rule:\n%s", blocks[0])
	}
	plain := renderBlocks(Input{Channel: stdChannel, Events: []nostr.Event{ev}})
	if strings.Contains(plain[0], "Subscription rule") {
		t.Fatalf("a plain mention names a rule:\n%s", plain[0])
	}
}
