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
	if replyAnswers(previous, batch, since, false) {
		t.Fatal("a same-second reply to the root answered a later batch of its thread")
	}
	rootOnlyLater := &nostr.Event{CreatedAt: 1_700_000_001, Tags: nostr.Tags{{"e", root, "", "root"}}}
	if !replyAnswers(rootOnlyLater, batch, since, false) {
		t.Fatal("a later reply to the thread's root is not taken as the answer")
	}
	named := &nostr.Event{CreatedAt: 1_700_000_000, Tags: nostr.Tags{{"e", root, "", "root"}, {"e", m9, "", "reply"}}}
	if !replyAnswers(named, batch, since, false) {
		t.Fatal("a same-second reply naming the batch's event is not taken as the answer")
	}
	asking := &nostr.Event{CreatedAt: 1_700_000_005, Tags: nostr.Tags{{"e", m9, "", "reply"}, {"buzz", "permission_request"}}}
	if replyAnswers(asking, batch, since, false) {
		t.Fatal("a permission question was taken as the answer")
	}
}

// When no earlier turn of the thread ended in the second the batch went in flight, a reply to
// the root dated in that second can only be the batch's own: taking it for something else would
// prompt the batch again after a crash and answer it twice (the soak saw this).
func TestReplyToTheThreadRootInTheSameSecondAnswersWhenNoEarlierTurnEndedInIt(t *testing.T) {
	root, m9 := strings.Repeat("a", 64), strings.Repeat("9", 64)
	batch := []*nostr.Event{{ID: m9, Tags: nostr.Tags{{"e", root, "", "reply"}}}}
	since := time.Unix(1_700_000_000, 0)
	sameSecond := &nostr.Event{CreatedAt: 1_700_000_000, Tags: nostr.Tags{{"e", root, "", "root"}}}
	if !replyAnswers(sameSecond, batch, since, true) {
		t.Fatal("the batch's own same-second reply to the root is not taken as its answer")
	}
	earlier := &nostr.Event{CreatedAt: 1_699_999_999, Tags: nostr.Tags{{"e", root, "", "root"}}}
	if replyAnswers(earlier, batch, since, true) {
		t.Fatal("a reply from before the batch went in flight answered it")
	}
}

func TestOwnSecondNeedsNoTurnEndInThatSecondAndAProcessRunningBeforeIt(t *testing.T) {
	k, other := convKey{Channel: "a"}, convKey{Channel: "b"}
	start := time.Unix(1_700_000_010, 500_000_000)
	now := start
	convs := newConversations(func() time.Time { return now }, func() float64 { return 1 })
	lastEnd := func(k convKey) time.Time {
		if c := convs.get(k); c != nil {
			return c.lastEnd
		}
		return time.Time{}
	}
	var e turnEnds
	if e.ownSecond(lastEnd(k), start) {
		t.Fatal("own second before the process started taking turns")
	}
	e.since = time.Unix(1_700_000_010, 100_000_000)
	if e.ownSecond(lastEnd(k), start) {
		t.Fatal("own second in the process's first second: an earlier process's turn may have ended in it")
	}
	e.since = time.Unix(1_700_000_009, 0)
	if !e.ownSecond(lastEnd(k), start) {
		t.Fatal("no turn ended in the second, yet it is not the batch's own")
	}
	convs.update(k, func(c *conversation) { c.lastEnd = time.Unix(1_700_000_010, 200_000_000) })
	if e.ownSecond(lastEnd(k), start) {
		t.Fatal("a turn of the conversation ended in the same second, yet it counts as the batch's own")
	}
	if !e.ownSecond(lastEnd(other), start) {
		t.Fatal("another conversation's turn end took the second away")
	}
	now = time.Unix(1_700_000_013, 0)
	convs.each(func(*conversation) {})
	if convs.get(k) != nil {
		t.Fatal("a conversation whose only state is a turn end older than two seconds was kept")
	}
}
