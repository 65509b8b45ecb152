package cli

import (
	"context"
	"encoding/json"
	"slices"
	"sort"

	"github.com/buzz-harness/buzz/internal/client"
	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/google/uuid"
	"github.com/nbd-wtf/go-nostr"
	"github.com/spf13/cobra"
)

// dmInfo is one line of dms list (upstream's shape).
type dmInfo struct {
	DMID         string   `json:"dm_id"`
	Participants []string `json:"participants"`
	CreatedAt    int64    `json:"created_at"`
	Hidden       bool     `json:"hidden,omitempty"` // with --include-hidden: you hid it (dms hide)
}

// dmOpenResult is the relay's answer to a 41010 plus the DM's channel id.
type dmOpenResult struct {
	writeResult
	DMID    string `json:"dm_id"`
	Created bool   `json:"created"`
}

func (a *app) dmsCommand() *cobra.Command {
	var limit int
	var includeHidden bool
	list := a.leaf("list", "Your direct-message channels and their participants (not the ones you hid)", func(ctx context.Context, cmd *cobra.Command) (any, error) {
		return a.dmList(ctx, limit, includeHidden)
	})
	list.Flags().IntVar(&limit, "limit", 50, "maximum DMs (max 200)")
	list.Flags().BoolVar(&includeHidden, "include-hidden", false, "also list the DMs you hid, marked hidden")

	var hideCh string
	hide := a.leaf("hide", "Hide a DM from your list (kind 41012); it stays readable, and messages still reach you", func(ctx context.Context, cmd *cobra.Command) (any, error) {
		ch, err := channelArg(hideCh)
		if err != nil {
			return nil, err
		}
		b, err := a.bridge()
		if err != nil {
			return nil, err
		}
		return publish(ctx, b, &nostr.Event{Kind: protocol.KindDMHide, Tags: nostr.Tags{{"h", ch}}})
	})
	requiredString(hide, &hideCh, "channel", "DM channel UUID")

	var openPks []string
	open := a.leaf("open", "Open (or reopen) the DM with these people (kind 41010); prints dm_id", func(ctx context.Context, cmd *cobra.Command) (any, error) {
		pks, err := dmPubkeys(openPks)
		if err != nil {
			return nil, err
		}
		b, err := a.bridge()
		if err != nil {
			return nil, err
		}
		return openDM(ctx, b, pks)
	})
	open.Flags().StringArrayVar(&openPks, "pubkey", nil, "participant, hex or npub (repeatable, 1–8; you are added)")
	_ = open.MarkFlagRequired("pubkey")

	var o sendOptions
	var sendPks []string
	send := a.leaf("send", "Send a direct message: to a DM channel, or to people (opening their DM)", func(ctx context.Context, cmd *cobra.Command) (any, error) {
		return a.dmSend(ctx, o, sendPks)
	})
	send.Flags().StringVar(&o.channel, "channel", "", "DM channel UUID (from dms list or dms open)")
	send.Flags().StringArrayVar(&sendPks, "pubkey", nil, "participant, hex or npub (repeatable; instead of --channel)")
	requiredString(send, &o.content, "content", "message text, or - to read stdin")
	send.Flags().StringVar(&o.replyTo, "reply-to", "", "event id to reply to")
	var addCh, addPk string
	add := a.leaf("add-member", "Open the DM of this DM's participants plus one more (kind 41011); prints its dm_id", func(ctx context.Context, cmd *cobra.Command) (any, error) {
		ch, err := channelArg(addCh)
		if err != nil {
			return nil, err
		}
		pk, err := protocol.ParsePubkey(addPk)
		if err != nil {
			return nil, usageError("--pubkey: %s", err)
		}
		b, err := a.bridge()
		if err != nil {
			return nil, err
		}
		res, err := publish(ctx, b, &nostr.Event{Kind: protocol.KindDMAddMember, Tags: nostr.Tags{{"h", ch}, {"p", pk}}})
		if err != nil {
			return nil, err
		}
		id, _, _ := dmReplyChannel(res.Message)
		return struct {
			writeResult
			DMID string `json:"dm_id,omitempty"`
		}{res, id}, nil
	})
	requiredString(add, &addCh, "channel", "DM channel UUID")
	requiredString(add, &addPk, "pubkey", "the new participant, hex or npub")
	return group("dms", "Direct messages (private channels of type dm)", list, open, send, add, hide)
}

// dmReplyChannel reads the channel id (and created flag) out of a DM command's
// `response:{...}` answer; ok is false when it names no channel.
func dmReplyChannel(msg string) (id string, created, ok bool) {
	var reply struct {
		ChannelID string `json:"channel_id"`
		Created   bool   `json:"created"`
	}
	reason, body := protocol.ParseReason(msg)
	if reason != protocol.ReasonResponse || json.Unmarshal([]byte(body), &reply) != nil || !protocol.IsUUID(reply.ChannelID) {
		return "", false, false
	}
	return reply.ChannelID, reply.Created, true
}

// dmPubkeys validates 1–8 participant keys, de-duplicated.
func dmPubkeys(vals []string) ([]string, error) {
	var out []string
	for _, v := range vals {
		pk, err := protocol.ParsePubkey(v)
		if err != nil {
			return nil, usageError("--pubkey: %s", err)
		}
		out = appendNew(out, pk)
	}
	if len(out) == 0 || len(out) > protocol.MaxDMParticipants-1 {
		return nil, usageError("--pubkey: a DM has 1 to %d other participants, got %d", protocol.MaxDMParticipants-1, len(out))
	}
	return out, nil
}

// openDM publishes a 41010 and reads the DM's channel id from the relay's answer. Like
// upstream's CLI it adds a fresh random d tag, so that opening the same DM twice within a
// second is two events, not a duplicate an upstream relay would answer without the channel id.
func openDM(ctx context.Context, b *client.Bridge, pks []string) (dmOpenResult, error) {
	tags := nostr.Tags{{"d", uuid.NewString()}}
	for _, pk := range pks {
		if pk != b.PublicKey() {
			tags = append(tags, nostr.Tag{"p", pk})
		}
	}
	if len(tags) == 1 {
		return dmOpenResult{}, usageError("--pubkey: a DM needs someone besides you")
	}
	res, err := publish(ctx, b, &nostr.Event{Kind: protocol.KindDMOpen, Tags: tags})
	if err != nil {
		return dmOpenResult{}, err
	}
	id, created, ok := dmReplyChannel(res.Message)
	if !ok {
		return dmOpenResult{}, &Error{Category: "relay_error", Message: "relay accepted the DM open but named no channel: " + res.Message, Code: ExitNetwork}
	}
	return dmOpenResult{writeResult: res, DMID: id, Created: created}, nil
}

func (a *app) dmList(ctx context.Context, limit int, includeHidden bool) (any, error) {
	if limit <= 0 || limit > 200 {
		return nil, usageError("--limit must be 1..200")
	}
	b, err := a.bridge()
	if err != nil {
		return nil, err
	}
	me := b.PublicKey()
	// A DM's metadata (39000) lists its participants as p tags and is readable only by them.
	evs, err := queryAll(ctx, b, nostr.Filter{Kinds: []int{protocol.KindGroupMetadata}, Tags: nostr.TagMap{"p": {me}}}, 4*limit)
	if err != nil {
		return nil, err
	}
	// The DMs you hid are the h tags of your 30622 snapshot (readable by you alone).
	hidden := map[string]bool{}
	snap, err := queryNewest(ctx, b, nostr.Filter{Kinds: []int{protocol.KindDMVisibility}, Tags: nostr.TagMap{"p": {me}, "d": {me}}, Limit: 1})
	if err != nil {
		return nil, err
	}
	if snap != nil {
		for t := range snap.Tags.FindAll("h") {
			hidden[t[1]] = true
		}
	}
	out := []dmInfo{}
	for _, ev := range protocol.NewestByD(evs) {
		if protocol.ParseChannelMeta(&ev).Type != protocol.TypeDM {
			continue
		}
		id := protocol.TagValue(ev.Tags, "d")
		if hidden[id] && !includeHidden {
			continue
		}
		parts := []string{}
		for _, t := range ev.Tags {
			if len(t) >= 2 && t[0] == "p" {
				parts = append(parts, t[1])
			}
		}
		if !slices.Contains(parts, me) {
			continue
		}
		out = append(out, dmInfo{DMID: id, Participants: parts, CreatedAt: int64(ev.CreatedAt), Hidden: hidden[id]})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].CreatedAt > out[j].CreatedAt })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// dmSend sends a kind 9 into a DM, p-tagging every other participant (as Buzz's desktop client
// does) so each one is notified. With --pubkey the DM is opened first.
func (a *app) dmSend(ctx context.Context, o sendOptions, pks []string) (any, error) {
	if (o.channel == "") == (len(pks) == 0) {
		return nil, usageError("dms send needs exactly one of --channel or --pubkey")
	}
	if o.channel != "" {
		if _, err := channelArg(o.channel); err != nil {
			return nil, err
		}
	} else {
		var err error
		if pks, err = dmPubkeys(pks); err != nil {
			return nil, err
		}
	}
	b, err := a.bridge()
	if err != nil {
		return nil, err
	}
	if o.channel == "" {
		res, err := openDM(ctx, b, pks)
		if err != nil {
			return nil, err
		}
		o.channel = res.DMID
	}
	ch, _ := channelArg(o.channel)
	meta, err := queryNewest(ctx, b, nostr.Filter{Kinds: []int{protocol.KindGroupMetadata}, Tags: nostr.TagMap{"d": {ch}}, Limit: 1})
	if err != nil {
		return nil, err
	}
	if meta == nil {
		return nil, unknownChannel(ch)
	}
	if protocol.ParseChannelMeta(meta).Type != protocol.TypeDM {
		return nil, usageError("channel %s is not a DM; use buzz messages send", ch)
	}
	members, err := channelMembers(ctx, b, ch)
	if err != nil {
		return nil, err
	}
	for _, m := range members {
		if m.Pubkey != b.PublicKey() {
			o.mentions = append(o.mentions, m.Pubkey)
		}
	}
	o.kind = protocol.KindStreamMessage
	return a.send(ctx, o)
}
