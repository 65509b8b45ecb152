package cli

import (
	"context"
	"sort"
	"strconv"
	"strings"

	"github.com/buzz-harness/buzz/internal/client"
	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/protocol/ownerauth"
	"github.com/google/uuid"
	"github.com/nbd-wtf/go-nostr"
	"github.com/spf13/cobra"
)

// channelInfo is the CLI's view of a kind 39000 event.
type channelInfo struct {
	ChannelID   string `json:"channel_id"`
	Name        string `json:"name"`
	Description string `json:"description"`
	CreatedAt   int64  `json:"created_at"`
	Archived    bool   `json:"archived"`
	Visibility  string `json:"visibility"`
	ChannelType string `json:"channel_type"`
	Topic       string `json:"topic,omitempty"`
	Purpose     string `json:"purpose,omitempty"`
	Pubkey      string `json:"pubkey,omitempty"`
}

func toChannelInfo(ev *nostr.Event) channelInfo {
	m := protocol.ParseChannelMeta(ev)
	return channelInfo{
		ChannelID: m.ID, Name: m.Name, Description: m.About, CreatedAt: int64(ev.CreatedAt),
		Archived: m.Archived, Visibility: m.Visibility(), ChannelType: m.Type, Topic: m.Topic, Purpose: m.Purpose,
	}
}

func (a *app) channelsCommand() *cobra.Command {
	var member bool
	var visibility string
	var limit int
	list := a.leaf("list", "List channels (kind 39000)", func(ctx context.Context, cmd *cobra.Command) (any, error) {
		if visibility != "" && visibility != protocol.VisibilityOpen && visibility != protocol.VisibilityPrivate {
			return nil, usageError("--visibility must be open or private")
		}
		if limit <= 0 {
			return nil, usageError("--limit must be positive")
		}
		b, err := a.bridge()
		if err != nil {
			return nil, err
		}
		f := nostr.Filter{Kinds: []int{protocol.KindGroupMetadata}}
		if member {
			mem, err := queryAll(ctx, b, nostr.Filter{Kinds: []int{protocol.KindGroupMembers}, Tags: nostr.TagMap{"p": {b.PublicKey()}}}, limit)
			if err != nil {
				return nil, err
			}
			var ids []string
			for _, ev := range protocol.NewestByD(mem) {
				if protocol.IsMember(&ev, b.PublicKey()) {
					ids = append(ids, protocol.TagValue(ev.Tags, "d"))
				}
			}
			if len(ids) == 0 {
				return []channelInfo{}, nil
			}
			f.Tags = nostr.TagMap{"d": ids}
		}
		evs, err := queryAll(ctx, b, f, limit)
		if err != nil {
			return nil, err
		}
		out := []channelInfo{}
		for _, ev := range protocol.NewestByD(evs) {
			info := toChannelInfo(&ev)
			if visibility != "" && info.Visibility != visibility {
				continue
			}
			out = append(out, info)
		}
		if a.format == "compact" {
			compact := make([]map[string]string, len(out))
			for i, c := range out {
				compact[i] = map[string]string{"channel_id": c.ChannelID, "name": c.Name}
			}
			return compact, nil
		}
		return out, nil
	})
	list.Flags().BoolVar(&member, "member", false, "only channels you are a member of")
	list.Flags().StringVar(&visibility, "visibility", "", "only open or private channels")
	list.Flags().IntVar(&limit, "limit", 500, "maximum channels")

	var getCh string
	get := a.leaf("get", "Show one channel (not_found if unknown or not visible)", func(ctx context.Context, cmd *cobra.Command) (any, error) {
		ch, err := channelArg(getCh)
		if err != nil {
			return nil, err
		}
		b, err := a.bridge()
		if err != nil {
			return nil, err
		}
		ev, err := queryNewest(ctx, b, nostr.Filter{Kinds: []int{protocol.KindGroupMetadata}, Tags: nostr.TagMap{"d": {ch}}, Limit: 1})
		if err != nil {
			return nil, err
		}
		if ev == nil {
			return nil, unknownChannel(ch)
		}
		info := toChannelInfo(ev)
		info.Pubkey = ev.PubKey
		return info, nil
	})
	requiredString(get, &getCh, "channel", "channel UUID")

	var name, typ, vis, desc string
	var ttl int64
	create := a.leaf("create", "Create a channel (kind 9007); prints channel_id", func(ctx context.Context, cmd *cobra.Command) (any, error) {
		if typ != protocol.TypeStream && typ != protocol.TypeForum {
			return nil, usageError("--type must be stream or forum, got %q", typ)
		}
		if vis != protocol.VisibilityOpen && vis != protocol.VisibilityPrivate {
			return nil, usageError("--visibility must be open or private, got %q", vis)
		}
		if name == "" {
			return nil, usageError("--name must not be empty")
		}
		if ttl < 0 {
			return nil, usageError("--ttl must be positive seconds")
		}
		b, err := a.bridge()
		if err != nil {
			return nil, err
		}
		ch := uuid.NewString()
		tags := nostr.Tags{{"h", ch}, {"name", name}, {"visibility", vis}, {"channel_type", typ}}
		if desc != "" {
			tags = append(tags, nostr.Tag{"about", desc})
		}
		if ttl > 0 {
			tags = append(tags, nostr.Tag{"ttl", strconv.FormatInt(ttl, 10)})
		}
		res, err := publish(ctx, b, &nostr.Event{Kind: protocol.KindCreateGroup, Tags: tags})
		if err != nil {
			return nil, err
		}
		return struct {
			writeResult
			ChannelID string `json:"channel_id"`
		}{res, ch}, nil
	})
	requiredString(create, &name, "name", "channel name")
	create.Flags().StringVar(&typ, "type", protocol.TypeStream, "stream or forum")
	create.Flags().StringVar(&vis, "visibility", protocol.VisibilityOpen, "open or private")
	create.Flags().StringVar(&desc, "description", "", "channel description")
	create.Flags().Int64Var(&ttl, "ttl", 0, "channel time-to-live in seconds")

	var memCh string
	members := a.leaf("members", "List a channel's members (kind 39002)", func(ctx context.Context, cmd *cobra.Command) (any, error) {
		ch, err := channelArg(memCh)
		if err != nil {
			return nil, err
		}
		b, err := a.bridge()
		if err != nil {
			return nil, err
		}
		ms, err := channelMembers(ctx, b, ch)
		if err != nil {
			return nil, err
		}
		if ms == nil {
			// Every live channel has a member list; none visible means no such channel for us.
			return nil, unknownChannel(ch)
		}
		return ms, nil
	})
	requiredString(members, &memCh, "channel", "channel UUID")

	var policy string
	setPolicy := a.leaf("set-add-policy", "Set who may add you to channels (kind 10100 channel_add_policy)", func(ctx context.Context, cmd *cobra.Command) (any, error) {
		if err := client.CheckAddPolicy(policy); err != nil {
			return nil, usageError("--policy: %s", err)
		}
		b, err := a.bridge()
		if err != nil {
			return nil, err
		}
		// The relay takes the owner that owner_only admits from the auth tag on this event.
		if tag := a.options().AuthTag; tag != "" {
			if _, err := ownerauth.ResolveOwner(tag, b.PublicKey()); err != nil {
				return nil, usageError("--auth-tag / BUZZ_AUTH_TAG: %s", err)
			}
		}
		res, err := client.PublishAddPolicy(ctx, b, policy)
		if err != nil {
			return nil, err
		}
		if !res.Accepted {
			return nil, rejected(res.Message)
		}
		return writeResult{EventID: res.EventID, Accepted: true, Message: res.Message}, nil
	})
	requiredString(setPolicy, &policy, "policy", "anyone, owner_only or nobody")

	return group("channels", "Channels",
		list, get, create, setPolicy,
		a.channelWrite("join", "Join an open channel (kind 9021)", protocol.KindJoinRequest, false),
		a.channelWrite("leave", "Leave a channel (kind 9022)", protocol.KindLeaveRequest, false),
		members,
		a.channelWrite("add-member", "Add a member (kind 9000)", protocol.KindPutUser, true),
		a.channelWrite("remove-member", "Remove a member (kind 9001)", protocol.KindRemoveUser, true),
		a.channelMeta("topic", "Set the channel topic (kind 9002; any member)", "topic"),
		a.channelMeta("purpose", "Set the channel purpose (kind 9002; any member)", "purpose"),
		a.channelMeta("archive", "Archive the channel (kind 9002; owners and admins)", ""),
		a.channelMeta("unarchive", "Unarchive the channel (kind 9002; owners and admins)", ""),
		a.channelSearchCommand(), a.channelUpdateCommand(),
		a.channelWrite("delete", "Delete the channel (kind 9008; owners only)", protocol.KindDeleteGroup, false),
	)
}

// channelMeta builds the kind 9002 edits: topic and purpose take their text as a flag of the
// same name; archive and unarchive set the archived tag.
func (a *app) channelMeta(use, short, field string) *cobra.Command {
	var chFlag, value string
	cmd := a.leaf(use, short, func(ctx context.Context, cmd *cobra.Command) (any, error) {
		ch, err := channelArg(chFlag)
		if err != nil {
			return nil, err
		}
		var tag nostr.Tag
		switch use {
		case "archive":
			tag = nostr.Tag{"archived", "true"}
		case "unarchive":
			tag = nostr.Tag{"archived", "false"}
		default:
			if len(value) > 1024 {
				return nil, usageError("--%s is %d bytes; the limit is 1024", field, len(value))
			}
			tag = nostr.Tag{field, value}
		}
		b, err := a.bridge()
		if err != nil {
			return nil, err
		}
		return publish(ctx, b, &nostr.Event{Kind: protocol.KindEditMetadata, Tags: nostr.Tags{{"h", ch}, tag}})
	})
	requiredString(cmd, &chFlag, "channel", "channel UUID")
	if field != "" {
		requiredString(cmd, &value, field, "the new "+field+" (empty clears it)")
	}
	return cmd
}

// channelWrite builds join/leave/add-member/remove-member: an h-scoped admin event, with a
// target p (and optional role) when withTarget.
func (a *app) channelWrite(use, short string, kind int, withTarget bool) *cobra.Command {
	var chFlag, pkFlag, role string
	cmd := a.leaf(use, short, func(ctx context.Context, cmd *cobra.Command) (any, error) {
		ch, err := channelArg(chFlag)
		if err != nil {
			return nil, err
		}
		tags := nostr.Tags{{"h", ch}}
		if withTarget {
			pk, err := protocol.ParsePubkey(pkFlag)
			if err != nil {
				return nil, usageError("--pubkey: %s", err)
			}
			tags = append(tags, nostr.Tag{"p", pk})
			if role != "" {
				if !protocol.ValidRole(role) {
					return nil, usageError("--role must be owner, admin, member, guest or bot, got %q", role)
				}
				tags = append(tags, nostr.Tag{"role", role})
			}
		}
		b, err := a.bridge()
		if err != nil {
			return nil, err
		}
		return publish(ctx, b, &nostr.Event{Kind: kind, Tags: tags})
	})
	requiredString(cmd, &chFlag, "channel", "channel UUID")
	if withTarget {
		requiredString(cmd, &pkFlag, "pubkey", "member pubkey (hex or npub)")
		if kind == protocol.KindPutUser {
			cmd.Flags().StringVar(&role, "role", "", "owner, admin, member, guest or bot")
		}
	}
	return cmd
}

// channelMembers reads the newest kind 39002 for ch (nil when none is visible).
func channelMembers(ctx context.Context, b *client.Bridge, ch string) ([]protocol.Member, error) {
	ev, err := queryNewest(ctx, b, nostr.Filter{Kinds: []int{protocol.KindGroupMembers}, Tags: nostr.TagMap{"d": {ch}}, Limit: 1})
	if err != nil || ev == nil {
		return nil, err
	}
	return protocol.ParseMembers(ev), nil
}

func requiredString(cmd *cobra.Command, dst *string, name, usage string) {
	cmd.Flags().StringVar(dst, name, "", usage+" (required)")
	_ = cmd.MarkFlagRequired(name)
}

// channelSearchHit is one `channels search` result (upstream's fields).
type channelSearchHit struct {
	ChannelID   string `json:"channel_id"`
	Name        string `json:"name"`
	ChannelType string `json:"channel_type"`
	Visibility  string `json:"visibility"`
	Archived    bool   `json:"archived"`
	About       string `json:"about"`
	Topic       string `json:"topic"`
	Purpose     string `json:"purpose"`
}

func (a *app) channelSearchCommand() *cobra.Command {
	var query string
	var exact, archived bool
	var limit int
	cmd := a.leaf("search", "Find channels by name, description, topic or purpose (sorted by name)", func(ctx context.Context, cmd *cobra.Command) (any, error) {
		q := strings.ToLower(strings.TrimSpace(query))
		if q == "" {
			return nil, usageError("--query must not be blank")
		}
		if limit <= 0 {
			return nil, usageError("--limit must be positive")
		}
		b, err := a.bridge()
		if err != nil {
			return nil, err
		}
		evs, err := queryAll(ctx, b, nostr.Filter{Kinds: []int{protocol.KindGroupMetadata}}, maxChannelScan)
		if err != nil {
			return nil, err
		}
		out := []channelSearchHit{}
		for _, ev := range protocol.NewestByD(evs) {
			c := toChannelInfo(&ev)
			if c.Archived && !archived {
				continue
			}
			match := strings.ToLower(c.Name) == q
			if !exact {
				for _, field := range []string{c.Name, c.Description, c.Topic, c.Purpose} {
					match = match || strings.Contains(strings.ToLower(field), q)
				}
			}
			if match {
				out = append(out, channelSearchHit{c.ChannelID, c.Name, c.ChannelType, c.Visibility, c.Archived, c.Description, c.Topic, c.Purpose})
			}
		}
		sort.Slice(out, func(i, j int) bool {
			if out[i].Name != out[j].Name {
				return out[i].Name < out[j].Name
			}
			return out[i].ChannelID < out[j].ChannelID
		})
		if len(out) > limit {
			out = out[:limit]
		}
		return out, nil
	})
	requiredString(cmd, &query, "query", "words to look for (case-insensitive)")
	cmd.Flags().BoolVar(&exact, "exact", false, "only channels whose name is exactly the query (case-insensitive)")
	cmd.Flags().BoolVar(&archived, "include-archived", false, "include archived channels")
	cmd.Flags().IntVar(&limit, "limit", 1000, "maximum results")
	return cmd
}

// maxChannelScan bounds the channel metadata `channels search` reads.
const maxChannelScan = 5000

func (a *app) channelUpdateCommand() *cobra.Command {
	var chFlag, name, desc string
	cmd := a.leaf("update", "Rename a channel or change its description (kind 9002; owners and admins)", func(ctx context.Context, cmd *cobra.Command) (any, error) {
		ch, err := channelArg(chFlag)
		if err != nil {
			return nil, err
		}
		fl := cmd.Flags()
		if !fl.Changed("name") && !fl.Changed("description") {
			return nil, usageError("nothing to update: pass --name and/or --description")
		}
		tags := nostr.Tags{{"h", ch}}
		if fl.Changed("name") {
			if strings.TrimSpace(name) == "" {
				return nil, usageError("--name must not be empty")
			}
			tags = append(tags, nostr.Tag{"name", name})
		}
		if fl.Changed("description") {
			tags = append(tags, nostr.Tag{"about", desc})
		}
		b, err := a.bridge()
		if err != nil {
			return nil, err
		}
		return publish(ctx, b, &nostr.Event{Kind: protocol.KindEditMetadata, Tags: tags})
	})
	requiredString(cmd, &chFlag, "channel", "channel UUID")
	cmd.Flags().StringVar(&name, "name", "", "the new name")
	cmd.Flags().StringVar(&desc, "description", "", "the new description (empty clears it)")
	return cmd
}
