package relay

import (
	"context"
	"net/http"

	"github.com/buzz-harness/buzz/internal/protocol"
)

// forumKinds are what a forum channel holds beyond chat: posts (45001) and comments on them
// (45003). Votes (45002) are not checked here.
var forumKinds = kindSet(protocol.KindForumPost, protocol.KindForumComment)

// forumPostInForum: forum posts and comments belong in forum channels (created with
// channel_type forum). A stream channel's readers would never see them as posts, and a harness
// listening to a stream would not expect them. Chat (kind 9) is allowed in forums too, so an
// agent that answers with `buzz messages send` still can.
func forumPostInForum(_ context.Context, r *Relay, in *ingest) *result {
	if !forumKinds[in.ev.Kind] {
		return nil
	}
	if ch, ok := r.acl.get(in.channel); ok && ch.Type != protocol.TypeForum {
		return refuse(http.StatusBadRequest, protocol.ReasonInvalid.Msg("forum posts and comments (kinds 45001, 45003) belong in a forum channel"))
	}
	return nil
}

// voteOnForumPost: a vote (45002) is "+" or "-" on a forum post or comment of the same channel,
// as upstream; a vote on chat, or on nothing, would count toward no post.
func voteOnForumPost(ctx context.Context, r *Relay, in *ingest) *result {
	ev := in.ev
	if ev.Kind != protocol.KindForumVote {
		return nil
	}
	if ev.Content != "+" && ev.Content != "-" {
		return refuse(http.StatusBadRequest, protocol.ReasonInvalid.Msg(`a vote's content is "+" or "-"`))
	}
	target := protocol.TagValue(ev.Tags, "e")
	if !protocol.IsHex64(target) {
		return refuse(http.StatusBadRequest, protocol.ReasonInvalid.Msg("a vote needs an e tag naming the post"))
	}
	post, postCh, err := r.st.Event(ctx, target)
	switch {
	case err != nil:
		return refuse(http.StatusInternalServerError, protocol.ReasonError.Msg("lookup failed"))
	case post == nil || postCh != in.channel || !forumKinds[post.Kind]:
		return refuse(http.StatusBadRequest, protocol.ReasonInvalid.Msg("vote target must be a forum post or comment"))
	}
	return nil
}
