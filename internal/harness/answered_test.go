package harness

import (
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
)

// A batch of one thread reply went in flight in the same second as the reply that ended the
// thread's previous turn. That reply names the thread's root, not this batch: taking it for this
// batch's answer would mark the batch done unanswered (the soak lost a mention this way).
func TestReplyToTheThreadRootInTheSameSecondDoesNotAnswerTheNextBatch(t *testing.T) {
	root, m9 := strings.Repeat("a", 64), strings.Repeat("9", 64)
	batch := []*nostr.Event{{ID: m9, Tags: nostr.Tags{{"e", root, "", "reply"}}}}
	since := time.Unix(1_700_000_000, 0)
	previous := &nostr.Event{CreatedAt: 1_700_000_000, Tags: nostr.Tags{{"e", root, "", "root"}, {"e", strings.Repeat("5", 64), "", "reply"}}}
	if replyAnswers(previous, batch, since) {
		t.Fatal("a same-second reply to the root answered a later batch of its thread")
	}
	rootOnlyLater := &nostr.Event{CreatedAt: 1_700_000_001, Tags: nostr.Tags{{"e", root, "", "root"}}}
	if !replyAnswers(rootOnlyLater, batch, since) {
		t.Fatal("a later reply to the thread's root is not taken as the answer")
	}
	named := &nostr.Event{CreatedAt: 1_700_000_000, Tags: nostr.Tags{{"e", root, "", "root"}, {"e", m9, "", "reply"}}}
	if !replyAnswers(named, batch, since) {
		t.Fatal("a same-second reply naming the batch's event is not taken as the answer")
	}
	asking := &nostr.Event{CreatedAt: 1_700_000_005, Tags: nostr.Tags{{"e", m9, "", "reply"}, {"buzz", "permission_request"}}}
	if replyAnswers(asking, batch, since) {
		t.Fatal("a permission question was taken as the answer")
	}
}
