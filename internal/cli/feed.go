package cli

import (
	"context"
	"slices"
	"sort"
	"strings"

	"github.com/buzz-harness/buzz/internal/client"
	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/nbd-wtf/go-nostr"
	"github.com/spf13/cobra"
)

// Feed types (upstream's names; agent_activity is an alias of activity).
const (
	feedMentions      = "mentions"
	feedNeedsAction   = "needs_action"
	feedActivity      = "activity"
	feedAgentActivity = "agent_activity"
)

var feedTypeNames = []string{feedMentions, feedNeedsAction, feedActivity, feedAgentActivity}

var (
	// mentionKinds can address someone with a p tag and expect an answer.
	mentionKinds = []int{protocol.KindTextNote, protocol.KindStreamMessage, protocol.KindStreamMessageV2, protocol.KindForumPost, protocol.KindForumComment}
	// actionKinds ask their p-tagged pubkey to act (workflow approval, reminder).
	actionKinds   = []int{protocol.KindWorkflowApproval, protocol.KindReminder}
	activityKinds = []int{protocol.KindStreamMessage, protocol.KindStreamMessageV2, protocol.KindForumPost}
	// answerKinds are how someone answers a mention: a reply or a reaction naming it in an e tag.
	answerKinds = []int{protocol.KindStreamMessage, protocol.KindStreamMessageV2, protocol.KindForumComment, protocol.KindReaction}
)

// feedItem is a normalized event plus why it is in the feed.
type feedItem struct {
	message
	FeedType string `json:"feed_type"`
}

type feedOptions struct {
	types string
	since int64
	limit int
}

func (a *app) feedCommand() *cobra.Command {
	var o feedOptions
	get := a.leaf("get", "What needs you: unanswered requests, mentions and activity, newest first", func(ctx context.Context, cmd *cobra.Command) (any, error) {
		return a.feed(ctx, o)
	})
	get.Flags().Int64Var(&o.since, "since", 0, "only events at or after this unix time")
	get.Flags().IntVar(&o.limit, "limit", 20, "maximum items (max 50)")
	get.Flags().StringVar(&o.types, "types", feedNeedsAction+","+feedMentions,
		"comma-separated, in priority order: needs_action (mentions you have not answered, approvals, reminders), mentions, activity")
	return group("feed", "Your feed: what needs you", get)
}

func parseFeedTypes(s string) ([]string, error) {
	var out []string
	for _, t := range strings.Split(s, ",") {
		t = strings.TrimSpace(t)
		if t == feedAgentActivity {
			t = feedActivity
		}
		if !slices.Contains(feedTypeNames, t) {
			return nil, usageError("invalid feed type %q: must be one of %s", t, strings.Join(feedTypeNames, ", "))
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out, nil
}

func (a *app) feed(ctx context.Context, o feedOptions) (any, error) {
	types, err := parseFeedTypes(o.types)
	if err != nil {
		return nil, err
	}
	if o.limit <= 0 || o.limit > 50 {
		return nil, usageError("--limit must be 1..50")
	}
	if o.since < 0 {
		return nil, usageError("--since must be a unix time")
	}
	b, err := a.bridge()
	if err != nil {
		return nil, err
	}
	me := b.PublicKey()
	var since *nostr.Timestamp
	if o.since > 0 {
		since = ts(nostr.Timestamp(o.since))
	}
	// One request for every type: mentions are read wider than the limit so that the
	// unanswered ones are found even behind answered ones.
	mentionF := nostr.Filter{Kinds: mentionKinds, Tags: nostr.TagMap{"p": {me}}, Since: since, Limit: 200}
	actionF := nostr.Filter{Kinds: actionKinds, Tags: nostr.TagMap{"p": {me}}, Since: since, Limit: o.limit}
	activityF := nostr.Filter{Kinds: activityKinds, Since: since, Limit: o.limit}
	wantActivity := slices.Contains(types, feedActivity)
	filters := []nostr.Filter{mentionF, actionF}
	if wantActivity {
		filters = append(filters, activityF)
	}
	evs, err := b.Query(ctx, client.F(filters...)...)
	if err != nil {
		return nil, err
	}
	var mentions, actions, activity []nostr.Event
	seen := map[string]bool{}
	for _, ev := range evs {
		if seen[ev.ID] {
			continue
		}
		seen[ev.ID] = true
		switch {
		case mentionF.Matches(&ev) && ev.PubKey != me:
			mentions = append(mentions, ev)
		case actionF.Matches(&ev):
			actions = append(actions, ev)
		}
		if wantActivity && activityF.Matches(&ev) {
			activity = append(activity, ev)
		}
	}
	var unanswered []nostr.Event
	if slices.Contains(types, feedNeedsAction) && len(mentions) > 0 {
		if unanswered, err = unansweredBy(ctx, b, me, mentions); err != nil {
			return nil, err
		}
	}
	byType := map[string][]nostr.Event{
		feedNeedsAction: append(unanswered, actions...),
		feedMentions:    mentions,
		feedActivity:    activity,
	}
	out := []feedItem{}
	taken := map[string]bool{}
	for _, t := range types {
		list := byType[t]
		sort.SliceStable(list, func(i, j int) bool { return list[i].CreatedAt > list[j].CreatedAt })
		for _, ev := range list {
			if len(out) == o.limit {
				break
			}
			if !taken[ev.ID] {
				taken[ev.ID] = true
				out = append(out, feedItem{message: toMessage(ev), FeedType: t})
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].CreatedAt > out[j].CreatedAt })
	if a.format == "compact" {
		compact := make([]map[string]any, len(out))
		for i, it := range out {
			compact[i] = map[string]any{"id": it.ID, "content": it.Content, "created_at": it.CreatedAt, "feed_type": it.FeedType}
		}
		return compact, nil
	}
	return out, nil
}

// unansweredBy returns the mentions me has neither replied to nor reacted to.
func unansweredBy(ctx context.Context, b *client.Bridge, me string, mentions []nostr.Event) ([]nostr.Event, error) {
	ids := make([]string, len(mentions))
	for i, ev := range mentions {
		ids[i] = ev.ID
	}
	answers, err := b.Query(ctx, client.Filter{Filter: nostr.Filter{Kinds: answerKinds, Authors: []string{me}, Tags: nostr.TagMap{"e": ids}, Limit: 1000}})
	if err != nil {
		return nil, err
	}
	answered := map[string]bool{}
	for _, ev := range answers {
		for _, t := range ev.Tags {
			if len(t) >= 2 && t[0] == "e" {
				answered[t[1]] = true
			}
		}
	}
	var out []nostr.Event
	for _, ev := range mentions {
		if !answered[ev.ID] {
			out = append(out, ev)
		}
	}
	return out, nil
}
