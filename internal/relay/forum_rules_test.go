package relay

import (
	"net/http"
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/relay/store"
)

func TestForumPostRefusedOutsideAForum(t *testing.T) {
	r := openTestRelay(t)
	r.acl.put(store.Channel{ID: testChannel, Visibility: protocol.VisibilityOpen, Type: protocol.TypeStream})
	r.acl.put(store.Channel{ID: otherChannel, Visibility: protocol.VisibilityOpen, Type: protocol.TypeForum})
	author := strings.Repeat("a", 64)
	for _, kind := range []int{protocol.KindForumPost, protocol.KindForumComment} {
		wantRefusal(t, forumPostInForum(t.Context(), r, wsIngest(ruleEvent(kind, author, nostr.Tag{"h", testChannel}))),
			http.StatusBadRequest, "invalid: forum posts and comments (kinds 45001, 45003) belong in a forum channel")
		wantPass(t, forumPostInForum(t.Context(), r, wsIngest(ruleEvent(kind, author, nostr.Tag{"h", otherChannel}))))
	}
	wantPass(t, forumPostInForum(t.Context(), r, wsIngest(ruleEvent(protocol.KindStreamMessage, author, nostr.Tag{"h", otherChannel}))))
}

func TestVoteOnForumPostRefusesVotesOnChatOtherChannelsAndBadContent(t *testing.T) {
	r := openTestRelay(t)
	save := func(id string, kind int, ch string) string {
		ev := &nostr.Event{ID: strings.Repeat(id, 64), PubKey: pkMember, Kind: kind, CreatedAt: 1_700_000_000,
			Tags: nostr.Tags{{"h", ch}}, Sig: strings.Repeat("0", 128)}
		if err := r.st.Update(t.Context(), func(tx store.Tx) error { return tx.SaveEvent(ev, ch) }); err != nil {
			t.Fatal(err)
		}
		return ev.ID
	}
	post, comment := save("1", protocol.KindForumPost, testChannel), save("2", protocol.KindForumComment, testChannel)
	chat, elsewhere := save("3", protocol.KindStreamMessage, testChannel), save("4", protocol.KindForumPost, otherChannel)
	vote := func(content, target string) *result {
		ev := ruleEvent(protocol.KindForumVote, pkOutside, nostr.Tag{"h", testChannel}, nostr.Tag{"e", target})
		ev.Content = content
		return voteOnForumPost(t.Context(), r, wsIngest(ev))
	}
	wantPass(t, vote("+", post))
	wantPass(t, vote("-", comment))
	for _, target := range []string{chat, elsewhere, strings.Repeat("9", 64)} {
		wantRefusal(t, vote("+", target), http.StatusBadRequest, "invalid: vote target must be a forum post or comment")
	}
	wantRefusal(t, vote("up", post), http.StatusBadRequest, `invalid: a vote's content is "+" or "-"`)
	wantRefusal(t, vote("+", "short"), http.StatusBadRequest, "invalid: a vote needs an e tag naming the post")
	wantPass(t, voteOnForumPost(t.Context(), r, wsIngest(ruleEvent(protocol.KindForumPost, pkOutside, nostr.Tag{"h", testChannel}))))
}
