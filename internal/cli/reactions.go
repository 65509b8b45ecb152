package cli

import (
	"context"
	"sort"

	"github.com/buzz-harness/buzz/internal/client"
	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/nbd-wtf/go-nostr"
	"github.com/spf13/cobra"
)

func (a *app) reactionsCommand() *cobra.Command {
	var evFlag, emoji string
	add := a.leaf("add", "React to an event (kind 7)", func(ctx context.Context, cmd *cobra.Command) (any, error) {
		return a.react(ctx, evFlag, emoji)
	})
	requiredString(add, &evFlag, "event", "event id to react to")
	add.Flags().StringVar(&emoji, "emoji", "+", "reaction emoji or +/-")

	var rmEvent, rmEmoji string
	remove := a.leaf("remove", "Take back your reaction (kind 5 deleting your kind 7)", func(ctx context.Context, cmd *cobra.Command) (any, error) {
		return a.unreact(ctx, rmEvent, rmEmoji)
	})
	requiredString(remove, &rmEvent, "event", "event id you reacted to")
	remove.Flags().StringVar(&rmEmoji, "emoji", "+", "the emoji to take back")

	var listEvent string
	list := a.leaf("list", "Reactions on an event, counted per emoji", func(ctx context.Context, cmd *cobra.Command) (any, error) {
		return a.reactions(ctx, listEvent)
	})
	list.Aliases = []string{"get"} // upstream's name
	requiredString(list, &listEvent, "event", "event id")
	return group("reactions", "Reactions", add, remove, list)
}

func (a *app) unreact(ctx context.Context, event, emoji string) (any, error) {
	id, err := eventIDArg("event", event)
	if err != nil {
		return nil, err
	}
	if emoji == "" {
		return nil, usageError("--emoji must not be empty")
	}
	b, err := a.bridge()
	if err != nil {
		return nil, err
	}
	mine, err := b.Query(ctx, client.Filter{Filter: nostr.Filter{Kinds: []int{protocol.KindReaction}, Tags: nostr.TagMap{"e": {id}}, Authors: []string{b.PublicKey()}, Limit: 100}})
	if err != nil {
		return nil, err
	}
	var own *nostr.Event
	for i := range mine {
		if mine[i].Content == emoji {
			own = &mine[i]
			break
		}
	}
	if own == nil {
		return nil, notFound("no reaction %q of yours on event %s", emoji, id)
	}
	tags := nostr.Tags{{"e", own.ID}, {"k", "7"}}
	// Keep the deletion in the reaction's channel, so only its readers see it.
	if ch, ok := protocol.ChannelID(own.Tags); ok {
		tags = append(tags, nostr.Tag{"h", ch})
	}
	return publish(ctx, b, &nostr.Event{Kind: protocol.KindDeletion, Tags: tags})
}

// reactionCount is one emoji's tally on an event.
type reactionCount struct {
	Emoji   string   `json:"emoji"`
	Count   int      `json:"count"`
	Pubkeys []string `json:"pubkeys"`
}

func (a *app) reactions(ctx context.Context, event string) (any, error) {
	id, err := eventIDArg("event", event)
	if err != nil {
		return nil, err
	}
	b, err := a.bridge()
	if err != nil {
		return nil, err
	}
	// The target and its reactions in one request: an invisible target is not_found, not [].
	evs, err := b.Query(ctx,
		client.Filter{Filter: nostr.Filter{IDs: []string{id}, Limit: 1}},
		client.Filter{Filter: nostr.Filter{Kinds: []int{protocol.KindReaction}, Tags: nostr.TagMap{"e": {id}}, Limit: 1000}})
	if err != nil {
		return nil, err
	}
	found := false
	byEmoji := map[string][]string{}
	for _, ev := range evs {
		if ev.ID == id {
			found = true
			continue
		}
		if ev.Kind != protocol.KindReaction || protocol.TagValue(ev.Tags, "e") != id {
			continue
		}
		e := ev.Content
		if e == "" {
			e = "+" // NIP-25: empty content is a like
		}
		byEmoji[e] = appendNew(byEmoji[e], ev.PubKey)
	}
	if !found {
		return nil, notFound("event %s not found (or not visible to you)", id)
	}
	out := []reactionCount{}
	for e, pks := range byEmoji {
		sort.Strings(pks)
		out = append(out, reactionCount{Emoji: e, Count: len(pks), Pubkeys: pks})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Emoji < out[j].Emoji })
	return map[string]any{"reactions": out}, nil
}
