package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/buzz-harness/buzz/internal/client"
	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/nbd-wtf/go-nostr"
	"github.com/spf13/cobra"
)

const maxContentBytes = 64 << 10

// Kinds read by messages get / thread (upstream).
var (
	historyKinds = []int{protocol.KindStreamMessage, protocol.KindStreamMessageV2, protocol.KindDiffMessage, protocol.KindForumPost, protocol.KindForumComment}
	threadKinds  = []int{protocol.KindStreamMessage, protocol.KindStreamMessageV2, protocol.KindEdit, protocol.KindDiffMessage, protocol.KindForumComment}
)

// message is the normalized output of a read.
type message struct {
	ID        string     `json:"id"`
	Pubkey    string     `json:"pubkey"`
	Kind      int        `json:"kind"`
	Content   string     `json:"content"`
	CreatedAt int64      `json:"created_at"`
	Tags      nostr.Tags `json:"tags"`
}

// normalize sorts evs oldest first (ties: first, then by id) and shapes them for output.
func (a *app) normalize(evs []nostr.Event, first string) any {
	sort.SliceStable(evs, func(i, j int) bool {
		if evs[i].CreatedAt != evs[j].CreatedAt {
			return evs[i].CreatedAt < evs[j].CreatedAt
		}
		if (evs[i].ID == first) != (evs[j].ID == first) {
			return evs[i].ID == first
		}
		return evs[i].ID < evs[j].ID
	})
	return a.shape(evs)
}

func (a *app) messagesCommand() *cobra.Command {
	return group("messages", "Channel messages", a.sendCommand(), a.getCommand(), a.threadCommand(),
		a.searchCommand(), a.editCommand(), a.deleteCommand(), a.sendDiffCommand(), a.voteCommand())
}

// sendOptions are the inputs of messages send.
type sendOptions struct {
	channel, content, replyTo string
	mentions                  []string
	kind                      int
	broadcast                 bool
	files                     []string // uploaded and attached (upload.go)
}

func (a *app) sendCommand() *cobra.Command {
	var o sendOptions
	cmd := a.leaf("send", "Send a message (kind 9) with NIP-10 reply tags and @mentions", func(ctx context.Context, cmd *cobra.Command) (any, error) {
		return a.send(ctx, o)
	})
	requiredString(cmd, &o.channel, "channel", "channel UUID")
	requiredString(cmd, &o.content, "content", "message text, or - to read stdin")
	cmd.Flags().StringVar(&o.replyTo, "reply-to", "", "event id to reply to")
	cmd.Flags().StringArrayVar(&o.mentions, "mention", nil, "pubkey to mention, hex or npub (repeatable)")
	cmd.Flags().IntVar(&o.kind, "kind", protocol.KindStreamMessage, "9 (message), 45001 (forum post) or 45003 (forum comment)")
	cmd.Flags().BoolVar(&o.broadcast, "broadcast", false, "mark the message as a broadcast")
	cmd.Flags().StringArrayVar(&o.files, "file", nil, "upload this file to the relay and attach it (NIP-92 imeta; repeatable)")
	return cmd
}

type sendResult struct {
	EventID        string   `json:"event_id"`
	Accepted       bool     `json:"accepted"`
	Message        string   `json:"message"`
	MentionPubkeys []string `json:"mention_pubkeys"`
}

func (a *app) send(ctx context.Context, o sendOptions) (any, error) {
	ch, err := channelArg(o.channel)
	if err != nil {
		return nil, err
	}
	switch o.kind {
	case protocol.KindStreamMessage, protocol.KindForumPost:
	case protocol.KindForumComment:
		if o.replyTo == "" {
			return nil, usageError("--kind 45003 (forum comment) needs --reply-to")
		}
	default:
		return nil, usageError("--kind must be 9, 45001 or 45003")
	}
	content, err := a.readContent("content", o.content)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(content) == "" && len(o.files) == 0 {
		return nil, usageError("content is blank")
	}
	if len(o.files) > protocol.MaxAttachments {
		return nil, usageError("at most %d --file per message", protocol.MaxAttachments)
	}
	files, err := readUploads(o.files) // before any request: a bad path fails first
	if err != nil {
		return nil, err
	}
	var parent string
	if o.replyTo != "" {
		if parent, err = eventIDArg("reply-to", o.replyTo); err != nil {
			return nil, err
		}
	}
	explicit, err := explicitMentions(o.mentions)
	if err != nil {
		return nil, err
	}

	b, err := a.bridge()
	if err != nil {
		return nil, err
	}
	tags := nostr.Tags{{"h", ch}}
	if parent != "" {
		replyTags, err := replyTagsFor(ctx, b, ch, parent)
		if err != nil {
			return nil, err
		}
		tags = append(tags, replyTags...)
	}
	mentions, err := resolveMentions(ctx, b, ch, content, explicit)
	if err != nil {
		return nil, err
	}
	if len(files) > 0 {
		atts, err := uploadAll(ctx, b, files)
		if err != nil {
			return nil, err
		}
		for _, att := range atts {
			tags = append(tags, att.Tag())
		}
		if content = protocol.ContentWithAttachments(content, atts); len(content) > maxContentBytes {
			return nil, usageError("content with the attachments' URLs is %d bytes; the limit is %d (64 KiB)", len(content), maxContentBytes)
		}
	}
	for _, pk := range mentions {
		tags = append(tags, nostr.Tag{"p", pk})
	}
	if o.broadcast {
		tags = append(tags, nostr.Tag{"broadcast", "1"})
	}
	ev := &nostr.Event{Kind: o.kind, Content: content, Tags: tags}
	res, err := publish(ctx, b, ev)
	if err != nil {
		return nil, err
	}
	mentioned := []string{}
	for _, t := range ev.Tags {
		if len(t) >= 2 && t[0] == "p" {
			mentioned = append(mentioned, t[1])
		}
	}
	return sendResult{EventID: res.EventID, Accepted: res.Accepted, Message: res.Message, MentionPubkeys: mentioned}, nil
}

func explicitMentions(vals []string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, v := range vals {
		pk, err := protocol.ParsePubkey(v)
		if err != nil {
			return nil, usageError("--mention: %s", err)
		}
		if !seen[pk] {
			seen[pk] = true
			out = append(out, pk)
		}
	}
	if len(out) > mentionCap {
		return nil, usageError("at most %d mentions per message", mentionCap)
	}
	return out, nil
}

// replyTagsFor fetches the parent and builds NIP-10 tags: a direct reply to a top-level message
// carries only a reply marker; a reply inside a thread carries root and reply.
func replyTagsFor(ctx context.Context, b *client.Bridge, ch, parentID string) (nostr.Tags, error) {
	parent, err := queryOne(ctx, b, nostr.Filter{IDs: []string{parentID}})
	if err != nil {
		return nil, err
	}
	if parent == nil {
		return nil, notFound("--reply-to event %s not found (or not visible to you)", parentID)
	}
	if pch, _ := protocol.ChannelID(parent.Tags); pch != ch {
		return nil, usageError("--reply-to event %s is not in channel %s", parentID, ch)
	}
	return protocol.ReplyTags(threadRoot(parent), parent.ID), nil
}

// threadRoot is the root of the thread ev belongs to, as upstream's CLI derives it: an event with
// a reply marker is inside a thread (its root marker, else its reply target, is the root); one
// with only a root marker, or none, counts as top-level and roots its own thread.
func threadRoot(ev *nostr.Event) string {
	for _, t := range ev.Tags {
		if len(t) >= 4 && t[0] == "e" && t[3] == "reply" {
			return protocol.ParseThread(ev.Tags).Root
		}
	}
	return ev.ID
}

// resolveMentions returns the message's p-tag pubkeys: explicit ones, nostr:npub URIs, and @names
// resolved against channel members' profiles. Every mentioned pubkey must be a channel member.
func resolveMentions(ctx context.Context, b *client.Bridge, ch, content string, explicit []string) ([]string, error) {
	text := StripCode(content)
	explicit = appendNew(explicit, NostrURIPubkeys(text)...)
	if !strings.Contains(text, "@") && len(explicit) == 0 {
		return nil, nil
	}
	members, err := channelMembers(ctx, b, ch)
	if err != nil {
		return nil, fmt.Errorf("fetch channel members for mentions: %w", err)
	}
	memberSet := map[string]bool{}
	var memberPks []string
	for _, m := range members {
		memberSet[m.Pubkey] = true
		memberPks = append(memberPks, m.Pubkey)
	}
	all := explicit
	if strings.Contains(text, "@") {
		profiles := map[string]string{}
		if len(memberPks) > 0 {
			evs, err := b.Query(ctx, client.Filter{Filter: nostr.Filter{Kinds: []int{protocol.KindProfile}, Authors: memberPks, Limit: len(memberPks) * 2}})
			if err != nil {
				return nil, fmt.Errorf("fetch member profiles for mentions: %w", err)
			}
			for _, ev := range protocol.NewestByAuthor(evs) {
				if memberSet[ev.PubKey] {
					profiles[ev.PubKey] = ev.Content
				}
			}
		}
		names := AtMentions(text, knownNames(profiles))
		res := resolveNames(names, profiles)
		if len(explicit) == 0 && (len(res.Unresolved) > 0 || len(res.Ambiguous) > 0) {
			return nil, unresolvedError(res)
		}
		all = appendNew(all, res.Pubkeys...)
	}
	if len(all) > mentionCap {
		all = all[:mentionCap]
	}
	var missing []string
	for _, pk := range all {
		if !memberSet[pk] {
			missing = append(missing, pk)
		}
	}
	if len(missing) > 0 {
		return nil, missingMembersError(ch, missing)
	}
	return all, nil
}

func unresolvedError(res mentionResolution) *Error {
	var parts []string
	for _, n := range res.Unresolved {
		parts = append(parts, "@"+n+" matches no channel member")
	}
	amb := make([]string, 0, len(res.Ambiguous))
	for n := range res.Ambiguous {
		amb = append(amb, n)
	}
	sort.Strings(amb)
	for _, n := range amb {
		parts = append(parts, fmt.Sprintf("@%s matches %d members (%s)", n, len(res.Ambiguous[n]), strings.Join(res.Ambiguous[n], ", ")))
	}
	return usageError("%s; pass --mention <pubkey> to tag someone explicitly", strings.Join(parts, "; "))
}

// missingMembersError refuses a mention of non-members; the message is JSON so agents can act on it.
func missingMembersError(ch string, missing []string) *Error {
	hint := make([]string, len(missing))
	for i, pk := range missing {
		hint[i] = fmt.Sprintf("buzz channels add-member --channel %s --pubkey %s", ch, pk)
	}
	msg, _ := json.Marshal(map[string]any{
		"reason":                 "mentioned pubkeys are not members of the channel",
		"missing_member_pubkeys": missing,
		"add_member_command":     strings.Join(hint, " && "),
	})
	return usageError("%s", msg)
}

func appendNew(dst []string, vals ...string) []string {
	for _, v := range vals {
		dup := false
		for _, d := range dst {
			if d == v {
				dup = true
				break
			}
		}
		if !dup {
			dst = append(dst, v)
		}
	}
	return dst
}

// getOptions are the inputs of messages get; nil since/before mean unbounded.
type getOptions struct {
	channel, kinds string
	limit          int
	since, before  *int64
}

func (a *app) getCommand() *cobra.Command {
	var o getOptions
	var since, before int64
	cmd := a.leaf("get", "Recent channel messages, oldest first", func(ctx context.Context, cmd *cobra.Command) (any, error) {
		if cmd.Flags().Changed("since") {
			o.since = &since
		}
		if cmd.Flags().Changed("before") {
			o.before = &before
		}
		return a.getMessages(ctx, o)
	})
	requiredString(cmd, &o.channel, "channel", "channel UUID")
	cmd.Flags().IntVar(&o.limit, "limit", 50, "maximum messages (max 200)")
	cmd.Flags().Int64Var(&since, "since", 0, "only messages at or after this unix time")
	cmd.Flags().Int64Var(&before, "before", 0, "only messages at or before this unix time")
	cmd.Flags().StringVar(&o.kinds, "kinds", "", "comma-separated kinds (default 9,40002,40008,45001,45003)")
	return cmd
}

func (a *app) getMessages(ctx context.Context, o getOptions) (any, error) {
	ch, err := channelArg(o.channel)
	if err != nil {
		return nil, err
	}
	if o.limit <= 0 || o.limit > 200 {
		return nil, usageError("--limit must be 1..200")
	}
	ks := historyKinds
	if o.kinds != "" {
		if ks, err = parseKinds(o.kinds); err != nil {
			return nil, err
		}
	}
	f := nostr.Filter{Kinds: ks, Tags: nostr.TagMap{"h": {ch}}, Limit: o.limit}
	if o.since != nil {
		f.Since = ts(nostr.Timestamp(*o.since))
	}
	if o.before != nil {
		f.Until = ts(nostr.Timestamp(*o.before))
	}
	b, err := a.bridge()
	if err != nil {
		return nil, err
	}
	evs, err := queryInChannel(ctx, b, ch, client.Filter{Filter: f})
	if err != nil {
		return nil, err
	}
	return a.normalize(evs, ""), nil
}

// queryInChannel runs filters scoped to ch together with one for ch's metadata (39000), in one
// request, so that a channel that does not exist or is not visible is not_found rather than an
// empty list. The metadata event is not part of the result.
func queryInChannel(ctx context.Context, b *client.Bridge, ch string, filters ...client.Filter) ([]nostr.Event, error) {
	meta := client.Filter{Filter: nostr.Filter{Kinds: []int{protocol.KindGroupMetadata}, Tags: nostr.TagMap{"d": {ch}}, Limit: 1}}
	evs, err := b.Query(ctx, append(filters, meta)...)
	if err != nil {
		return nil, err
	}
	found := false
	out := evs[:0]
	for _, ev := range evs {
		if ev.Kind == protocol.KindGroupMetadata && protocol.TagValue(ev.Tags, "d") == ch {
			found = true
			continue
		}
		out = append(out, ev)
	}
	if !found {
		return nil, unknownChannel(ch)
	}
	return out, nil
}

func unknownChannel(ch string) *Error {
	return notFound("channel %s not found (or not visible to you)", ch)
}

func parseKinds(s string) ([]int, error) {
	var out []int
	for _, p := range strings.Split(s, ",") {
		k, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || k < 0 || k > 65535 {
			return nil, usageError("--kinds: %q is not an event kind", p)
		}
		out = append(out, k)
	}
	return out, nil
}

// threadOptions are the inputs of messages thread.
type threadOptions struct {
	channel, event string
	limit, depth   int
}

func (a *app) threadCommand() *cobra.Command {
	var o threadOptions
	cmd := a.leaf("thread", "A message's whole thread (root and replies), oldest first", func(ctx context.Context, cmd *cobra.Command) (any, error) {
		return a.thread(ctx, o)
	})
	requiredString(cmd, &o.channel, "channel", "channel UUID")
	requiredString(cmd, &o.event, "event", "any event id in the thread")
	cmd.Flags().IntVar(&o.limit, "limit", 100, "maximum replies (max 500)")
	cmd.Flags().IntVar(&o.depth, "depth-limit", 0, "only replies this many levels deep or less (1: direct replies)")
	return cmd
}

func (a *app) thread(ctx context.Context, o threadOptions) (any, error) {
	ch, err := channelArg(o.channel)
	if err != nil {
		return nil, err
	}
	id, err := eventIDArg("event", o.event)
	if err != nil {
		return nil, err
	}
	if o.limit <= 0 || o.limit > 500 {
		return nil, usageError("--limit must be 1..500")
	}
	b, err := a.bridge()
	if err != nil {
		return nil, err
	}
	sel, err := queryOne(ctx, b, nostr.Filter{IDs: []string{id}})
	if err != nil {
		return nil, err
	}
	if sel == nil {
		return nil, notFound("event %s not found (or not visible to you)", id)
	}
	if c, _ := protocol.ChannelID(sel.Tags); c != ch {
		return nil, notFound("event %s is not in channel %s", id, ch)
	}
	root := threadRoot(sel)
	replies := client.Filter{Filter: nostr.Filter{Kinds: threadKinds, Tags: nostr.TagMap{"h": {ch}, "e": {root}}, Limit: o.limit}}
	if o.depth > 0 {
		replies.DepthLimit = o.depth
	}
	rootF := client.Filter{Filter: nostr.Filter{IDs: []string{root}, Tags: nostr.TagMap{"h": {ch}}, Limit: 1}}
	evs, err := b.Query(ctx, replies, rootF)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	uniq := evs[:0]
	for _, ev := range evs {
		if !seen[ev.ID] {
			seen[ev.ID] = true
			uniq = append(uniq, ev)
		}
	}
	if o.depth > 0 {
		uniq = withinDepth(uniq, root, o.depth)
	}
	return a.normalize(uniq, root), nil // root first even within its second
}

// withinDepth keeps the root and the replies at most depth levels below it (a direct reply is
// level 1). Our relay ignores the depth_limit filter extension, so the CLI applies it to what
// came back. A reply whose parent was not returned is at least level 2.
func withinDepth(evs []nostr.Event, root string, depth int) []nostr.Event {
	parentOf := map[string]string{}
	for _, ev := range evs {
		parentOf[ev.ID] = protocol.ParseThread(ev.Tags).Parent
	}
	var level func(id string, seen int) int
	level = func(id string, seen int) int {
		switch p, ok := parentOf[id]; {
		case id == root:
			return 0
		case p == root:
			return 1
		case !ok || p == "" || seen > len(evs):
			return 2
		default:
			return level(p, seen+1) + 1
		}
	}
	out := evs[:0]
	for _, ev := range evs {
		if level(ev.ID, 0) <= depth {
			out = append(out, ev)
		}
	}
	return out
}
