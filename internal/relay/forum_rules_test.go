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
