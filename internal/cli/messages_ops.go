package cli

import (
	"context"
	"encoding/json"
	"sort"
	"strings"

	"github.com/buzz-harness/buzz/internal/client"
	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/google/uuid"
	"github.com/nbd-wtf/go-nostr"
	"github.com/spf13/cobra"
)

// searchKinds are the message kinds messages search looks in (upstream).
var searchKinds = []int{protocol.KindStreamMessage, protocol.KindStreamMessageV2, protocol.KindForumPost, protocol.KindForumComment}

// shape formats evs for output in the order given (normalize sorts first).
func (a *app) shape(evs []nostr.Event) any {
	if a.format == "compact" {
		out := make([]map[string]any, len(evs))
		for i, ev := range evs {
			out[i] = map[string]any{"id": ev.ID, "content": ev.Content, "created_at": int64(ev.CreatedAt)}
		}
		return out
	}
	out := make([]message, len(evs))
	for i, ev := range evs {
		out[i] = toMessage(ev)
	}
	return out
}

func toMessage(ev nostr.Event) message {
	tags := ev.Tags
	if tags == nil {
		tags = nostr.Tags{}
	}
	return message{ID: ev.ID, Pubkey: ev.PubKey, Kind: ev.Kind, Content: ev.Content, CreatedAt: int64(ev.CreatedAt), Tags: tags}
}

type searchOptions struct {
	query, author, channel string
	since                  int64
	limit                  int
}

func (a *app) searchCommand() *cobra.Command {
	var o searchOptions
	cmd := a.leaf("search", "Search messages in every channel you can read (best match first)", func(ctx context.Context, cmd *cobra.Command) (any, error) {
		return a.search(ctx, o)
	})
	cmd.Flags().StringVar(&o.query, "query", "", "words to search for")
	cmd.Flags().StringVar(&o.author, "author", "", "only messages by this author: hex, npub or exact display name")
	cmd.Flags().StringVar(&o.channel, "channel", "", "only this channel (UUID; default every channel you can read)")
	cmd.Flags().Int64Var(&o.since, "since", 0, "only messages at or after this unix time")
	cmd.Flags().IntVar(&o.limit, "limit", 20, "maximum results (max 100)")
	return cmd
}

func (a *app) search(ctx context.Context, o searchOptions) (any, error) {
	q := strings.TrimSpace(o.query)
	if q == "" && strings.TrimSpace(o.author) == "" {
		return nil, usageError("messages search needs --query or --author")
	}
	if o.limit <= 0 || o.limit > 100 {
		return nil, usageError("--limit must be 1..100")
	}
	if o.since < 0 {
		return nil, usageError("--since must be a unix time")
	}
	b, err := a.bridge()
	if err != nil {
		return nil, err
	}
	f := nostr.Filter{Kinds: searchKinds, Limit: o.limit, Search: q}
	if o.channel != "" {
		ch, err := channelArg(o.channel)
		if err != nil {
			return nil, err
		}
		f.Tags = nostr.TagMap{"h": {ch}}
	}
	if o.since > 0 {
		f.Since = ts(nostr.Timestamp(o.since))
	}
	if o.author != "" {
		pk, err := a.resolveAuthor(ctx, b, o.author)
		if err != nil {
			return nil, err
		}
		f.Authors = []string{pk}
	}
	evs, err := b.Query(ctx, client.Filter{Filter: f})
	if err != nil {
		return nil, err
	}
	if q == "" {
		// No relevance to keep: newest first, as upstream prints an author's messages.
		sort.SliceStable(evs, func(i, j int) bool { return evs[i].CreatedAt > evs[j].CreatedAt })
	}
	return a.shape(evs), nil
}

// resolveAuthor takes a hex or npub key, else an exact display name (or name) matched against
// profiles the relay's search finds; more than one match is ambiguous.
func (a *app) resolveAuthor(ctx context.Context, b *client.Bridge, s string) (string, error) {
	s = strings.TrimSpace(s)
	if pk, err := protocol.ParsePubkey(s); err == nil {
		return pk, nil
	}
	evs, err := b.Query(ctx, client.Filter{Filter: nostr.Filter{Kinds: []int{protocol.KindProfile}, Search: s, Limit: 100}})
	if err != nil {
		return "", err
	}
	var found []string
	for _, ev := range protocol.NewestByAuthor(evs) {
		var p struct {
			DisplayName string `json:"display_name"`
			Name        string `json:"name"`
		}
		if json.Unmarshal([]byte(ev.Content), &p) != nil {
			continue
		}
		if strings.EqualFold(p.DisplayName, s) || strings.EqualFold(p.Name, s) {
			found = appendNew(found, ev.PubKey)
		}
	}
	switch len(found) {
	case 0:
		return "", notFound("--author %q matches no user's name (pass a hex or npub key)", s)
	case 1:
		return found[0], nil
	}
	sort.Strings(found)
	return "", usageError("--author %q matches %d users (%s); pass a hex or npub key", s, len(found), strings.Join(found, ", "))
}

// targetInChannel fetches a message by id and its channel: not_found when it is not visible,
// a usage error when it belongs to no channel.
func targetInChannel(ctx context.Context, b *client.Bridge, id string) (*nostr.Event, string, error) {
	ev, err := queryOne(ctx, b, nostr.Filter{IDs: []string{id}})
	if err != nil {
		return nil, "", err
	}
	if ev == nil {
		return nil, "", notFound("event %s not found (or not visible to you)", id)
	}
	ch, ok := protocol.ChannelID(ev.Tags)
	if !ok {
		return nil, "", usageError("event %s has no h tag, so it belongs to no channel", id)
	}
	return ev, ch, nil
}

func (a *app) editCommand() *cobra.Command {
	var event, content string
	cmd := a.leaf("edit", "Edit one of your messages (kind 40003)", func(ctx context.Context, cmd *cobra.Command) (any, error) {
		id, err := eventIDArg("event", event)
		if err != nil {
			return nil, err
		}
		text, err := a.readContent("content", content)
		if err != nil {
			return nil, err
		}
		if strings.TrimSpace(text) == "" {
			return nil, usageError("content is blank")
		}
		b, err := a.bridge()
		if err != nil {
			return nil, err
		}
		orig, ch, err := targetInChannel(ctx, b, id)
		if err != nil {
			return nil, err
		}
		if orig.PubKey != b.PublicKey() {
			return nil, usageError("event %s is not yours; only its author can edit it", id)
		}
		return publish(ctx, b, &nostr.Event{Kind: protocol.KindEdit, Content: text, Tags: nostr.Tags{{"h", ch}, {"e", id}}})
	})
	requiredString(cmd, &event, "event", "id of the message to edit")
	requiredString(cmd, &content, "content", "the new text, or - to read stdin")
	return cmd
}

func (a *app) deleteCommand() *cobra.Command {
	var event, actionID, reasonCode, publicReason string
	cmd := a.leaf("delete", "Delete a message (kind 9005): yours, or any as a channel owner/admin", func(ctx context.Context, cmd *cobra.Command) (any, error) {
		id, err := eventIDArg("event", event)
		if err != nil {
			return nil, err
		}
		if actionID != "" && uuid.Validate(actionID) != nil {
			return nil, usageError("--action-id must be a UUID, got %q", actionID)
		}
		b, err := a.bridge()
		if err != nil {
			return nil, err
		}
		_, ch, err := targetInChannel(ctx, b, id)
		if err != nil {
			return nil, err
		}
		tags := nostr.Tags{{"h", ch}, {"e", id}}
		for _, t := range [][2]string{{"action_id", actionID}, {"reason_code", reasonCode}, {"public_reason", publicReason}} {
			if t[1] != "" {
				tags = append(tags, nostr.Tag{t[0], t[1]})
			}
		}
		return publish(ctx, b, &nostr.Event{Kind: protocol.KindDeleteEvent, Tags: tags})
	})
	requiredString(cmd, &event, "event", "id of the message to delete")
	cmd.Flags().StringVar(&actionID, "action-id", "", "moderation action UUID")
	cmd.Flags().StringVar(&reasonCode, "reason-code", "", "moderation reason code")
	cmd.Flags().StringVar(&publicReason, "public-reason", "", "reason shown to the channel")
	return cmd
}
