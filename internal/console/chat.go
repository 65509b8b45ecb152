package console

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/client"
	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/protocol/engram"
)

// Limits for what the composer may send and how much history a channel view loads.
const (
	maxContentBytes = 64 << 10
	historyLimit    = 300
	reactionLimit   = 2000 // reactions loaded with a channel's history
	maxEmojiRunes   = 32
	liveSubID       = "console-messages"
)

// chatKinds are shown as messages: chat, code diffs (buzz messages send-diff), and a forum's
// posts and comments.
var chatKinds = []int{protocol.KindStreamMessage, protocol.KindStreamMessageV2, protocol.KindDiffMessage, protocol.KindForumPost, protocol.KindForumComment}

type person struct {
	Pubkey  string `json:"pubkey"`
	Npub    string `json:"npub"`
	Name    string `json:"name"`
	Role    string `json:"role,omitempty"`
	IsAgent bool   `json:"isAgent,omitempty"`
	IsOwner bool   `json:"isOwner,omitempty"`
}

type channelInfo struct {
	ID      string   `json:"id"`
	Name    string   `json:"name"`
	Type    string   `json:"type"` // stream or forum (dm: a DM)
	Members []person `json:"members"`
	// Home marks the stack's own #general; anyone can name a channel "general".
	Home bool `json:"home,omitempty"`
	// Owners are the members with the owner role, so a lookalike shows whose it is.
	Owners []person `json:"owners"`
}

// message is one chat message as the browser sees it.
type message struct {
	ID        string   `json:"id"`
	Channel   string   `json:"channel"`
	Kind      int      `json:"kind"`
	Pubkey    string   `json:"pubkey"`
	Name      string   `json:"name"`
	Content   string   `json:"content"`
	CreatedAt int64    `json:"createdAt"`
	Root      string   `json:"root,omitempty"`
	Parent    string   `json:"parent,omitempty"`
	Mentions  []string `json:"mentions"`
	IsAgent   bool     `json:"isAgent,omitempty"`
	IsOwner   bool     `json:"isOwner,omitempty"`
	// Reactions to this message (history only; live ones arrive as their own stream events).
	Reactions []reaction `json:"reactions,omitempty"`
	// System is set for a kind-40099 row (Content is then the raw JSON).
	System *systemRow `json:"system,omitempty"`
	// Permission marks the agent's question to the owner (--permissions ask): the page shows
	// its numbered options as buttons that answer it.
	Permission bool `json:"permission,omitempty"`
	// PermissionOptions are the question's options, from its option tags (never its text, where
	// a tool title can forge "2. Reject" lines): button i answers i+1.
	PermissionOptions []string `json:"permissionOptions,omitempty"`
	// Attachments are its NIP-92 files (attachments.go).
	Attachments []attachment `json:"attachments,omitempty"`
	// Broadcast marks a thread reply sent to the channel too (["broadcast","1"]): the page shows
	// it in the channel as well as in its thread.
	Broadcast bool `json:"broadcast,omitempty"`
	// Diff describes a kind-40008 code diff (Content is the diff): the page shows it as one.
	Diff *diffMeta `json:"diff,omitempty"`
}

// reaction is one kind-7 reaction, shown under the message it targets.
type reaction struct {
	ID      string `json:"id"`
	Channel string `json:"channel"`
	Target  string `json:"target"` // id of the event reacted to
	Pubkey  string `json:"pubkey"`
	Name    string `json:"name"`
	Emoji   string `json:"emoji"` // the content as sent: an emoji, "+" (like) or "-" (dislike)
}

// typing says the agent is working in a channel (Root "") or in a thread (kind 20002).
type typing struct {
	Channel string `json:"channel"`
	Pubkey  string `json:"pubkey"`
	Root    string `json:"root,omitempty"`
}

// deletion is a kind 5: the browser drops the named reactions if Pubkey wrote them (the relay
// deletes only an author's own events).
type deletion struct {
	Channel string   `json:"channel"`
	Pubkey  string   `json:"pubkey"`
	IDs     []string `json:"ids"`
}

// maxDeletionIDs bounds the ids one kind 5 can name on the stream.
const maxDeletionIDs = 100

// liveEvent is one server-sent event for the browsers: a "message", a "reaction", "typing" or
// an "unreact" (a deletion).
type liveEvent struct {
	name string
	data any
}

// relayBridge is what chat needs of the relay's HTTP bridge.
type relayBridge interface {
	Query(ctx context.Context, filters ...client.Filter) ([]nostr.Event, error)
	Publish(ctx context.Context, ev *nostr.Event) (client.PublishResult, error)
	PublicKey() string
	blobBridge // attachments.go
}

// chat reads and posts channel messages as the owner and pushes new ones to browsers.
type chat struct {
	bridge relayBridge
	live   *client.Live
	owner  string
	agent  string
	home   string // the stack's #general ("" = none)
	log    *slog.Logger
	hub    *hub

	mem     *engram.Pair // owner side of the agent's memory; nil without an agent
	ownerSK string       // decrypts the agent's turn metrics
	self    *relaySelf   // the relay's pubkey, which signs its own system rows

	mu    sync.Mutex
	names map[string]string // pubkey → profile name
}

// memoryResp is the agent's core memory as the owner reads it: State is "found" (Profile set),
// "absent" (the relay has none), "unreadable" (records exist but none validate and decrypt) or
// "none" (no agent configured).
type memoryResp struct {
	State     string `json:"state"`
	Profile   string `json:"profile,omitempty"`
	EventID   string `json:"eventId,omitempty"`
	CreatedAt int64  `json:"createdAt,omitempty"`
}

// memory reads the agent's core engram with the owner's key (NIP-AE: both sides share K_c).
func (c *chat) memory(ctx context.Context) (memoryResp, error) {
	if c.mem == nil {
		return memoryResp{State: "none"}, nil
	}
	evs, err := c.bridge.Query(ctx, client.F(c.mem.HeadFilter(engram.CoreSlug))...)
	if err != nil {
		return memoryResp{}, err
	}
	head, ok, invalid := c.mem.Head(evs, engram.CoreSlug)
	switch {
	case ok:
		return memoryResp{State: "found", Profile: head.Body.Text, EventID: head.Event.ID, CreatedAt: int64(head.Event.CreatedAt)}, nil
	case len(evs) > 0 && invalid == len(evs):
		return memoryResp{State: "unreadable"}, nil
	}
	return memoryResp{State: "absent"}, nil
}

func newChat(relayURL, ownerKey, agent, home string, log *slog.Logger) (*chat, error) {
	sk, err := protocol.ParseSecretKey(ownerKey)
	if err != nil {
		return nil, err
	}
	b := client.NewBridge(relayURL, sk)
	var mem *engram.Pair
	if agent != "" {
		if mem, err = engram.OwnerSide(sk, agent); err != nil {
			return nil, err
		}
	}
	return &chat{
		ownerSK: sk,
		self:    &relaySelf{url: relayURL},
		mem:     mem,
		bridge:  b,
		live:    client.NewLive(client.LiveConfig{RelayURL: relayURL, SecretKey: sk, Logger: log}),
		owner:   b.PublicKey(),
		agent:   agent,
		home:    home,
		log:     log,
		hub:     newHub(),
		names:   map[string]string{},
	}, nil
}

// run subscribes to the owner's channels and fans new messages out to browsers. It returns once
// the relay session and the channel-list retry it starts are gone.
func (c *chat) run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	done := make(chan error, 1)
	wg.Go(func() { done <- c.live.Run(ctx) })
	wg.Go(func() {
		// The channel list is read over HTTP; retry briefly in case the relay is still starting.
		for i := 0; i < 20 && ctx.Err() == nil; i++ {
			qctx, qcancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := c.state(qctx)
			qcancel()
			if err == nil {
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(250 * time.Millisecond):
			}
		}
	})
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-done:
			return err
		case in, ok := <-c.live.Events():
			if !ok {
				return <-done
			}
			if in.Event == nil {
				continue
			}
			ch, _ := protocol.ChannelID(in.Event.Tags)
			switch in.Event.Kind {
			case protocol.KindTyping:
				if c.agent != "" && in.Event.PubKey == c.agent {
					c.hub.publish(liveEvent{"typing", typing{Channel: ch, Pubkey: in.Event.PubKey, Root: protocol.ParseThread(in.Event.Tags).Root}})
				}
				continue
			case protocol.KindDeletion:
				d := deletion{Channel: ch, Pubkey: in.Event.PubKey, IDs: []string{}}
				for _, t := range in.Event.Tags {
					if len(t) >= 2 && t[0] == "e" && protocol.IsHex64(t[1]) && len(d.IDs) < maxDeletionIDs {
						d.IDs = append(d.IDs, t[1])
					}
				}
				c.hub.publish(liveEvent{"unreact", d})
				continue
			}
			if in.Event.Kind == protocol.KindReaction {
				if r, ok := c.toReaction(ctx, in.Event, ch); ok {
					c.hub.publish(liveEvent{"reaction", r})
				}
				continue
			}
			if m, ok := c.toEntry(ctx, in.Event, ch); ok {
				c.hub.publish(liveEvent{"message", m})
			}
		}
	}
}

// state lists the owner's channels with members and names, and keeps the live subscription
// covering all of them.
func (c *chat) state(ctx context.Context) (stateResp, error) {
	// The newest 500 lists naming the owner, and the home channel's by name: anyone can open
	// DMs naming the owner, and 500 of them must not push the stack's #general off the list.
	listFilters := []nostr.Filter{{Kinds: []int{protocol.KindGroupMembers}, Tags: nostr.TagMap{"p": {c.owner}}, Limit: 500}}
	if c.home != "" {
		listFilters = append(listFilters, nostr.Filter{Kinds: []int{protocol.KindGroupMembers}, Tags: nostr.TagMap{"d": {c.home}}, Limit: 1})
	}
	mems, err := c.bridge.Query(ctx, client.F(listFilters...)...)
	if err != nil {
		return stateResp{}, err
	}
	members := map[string][]protocol.Member{}
	for _, ev := range protocol.NewestByD(mems) {
		ms := protocol.ParseMembers(&ev)
		for _, m := range ms {
			if m.Pubkey == c.owner {
				members[protocol.TagValue(ev.Tags, "d")] = ms
				break
			}
		}
	}
	ids := make([]string, 0, len(members))
	for id := range members {
		ids = append(ids, id)
	}
	st := stateResp{Mode: "full", Channels: []channelInfo{}}
	var metas []nostr.Event
	if len(ids) > 0 {
		metaFilters := []nostr.Filter{{Kinds: []int{protocol.KindGroupMetadata}, Tags: nostr.TagMap{"d": ids}, Limit: 500}}
		if members[c.home] != nil {
			metaFilters = append(metaFilters, nostr.Filter{Kinds: []int{protocol.KindGroupMetadata}, Tags: nostr.TagMap{"d": {c.home}}, Limit: 1})
		}
		if metas, err = c.bridge.Query(ctx, client.F(metaFilters...)...); err != nil {
			return stateResp{}, err
		}
	}
	pks := []string{c.owner}
	if c.agent != "" {
		pks = append(pks, c.agent)
	}
	for _, ms := range members {
		for _, m := range ms {
			pks = append(pks, m.Pubkey)
		}
	}
	c.loadNames(ctx, pks)
	for _, ev := range protocol.NewestByD(metas) {
		meta := protocol.ParseChannelMeta(&ev)
		if meta.Archived {
			continue
		}
		ci := channelInfo{ID: meta.ID, Name: meta.Name, Type: meta.Type, Members: []person{}, Owners: []person{}, Home: meta.ID == c.home}
		for _, m := range members[meta.ID] {
			p := c.person(m.Pubkey)
			p.Role = m.Role
			ci.Members = append(ci.Members, p)
			if m.Role == protocol.RoleOwner {
				ci.Owners = append(ci.Owners, p)
			}
		}
		st.Channels = append(st.Channels, ci)
	}
	sortChannels(st.Channels)
	owner := c.person(c.owner)
	st.Owner = &owner
	if c.agent != "" {
		agent := c.person(c.agent)
		st.Agent = &agent
	}
	if len(ids) > 0 {
		sort.Strings(ids)
		since := nostr.Timestamp(time.Now().Add(-10 * time.Second).Unix())
		kinds := append([]int{protocol.KindReaction, protocol.KindDeletion, protocol.KindTyping, protocol.KindSystemMessage}, chatKinds...)
		c.live.Subscribe(liveSubID, nostr.Filter{Kinds: kinds, Tags: nostr.TagMap{"h": ids}, Since: &since})
	}
	return st, nil
}

// sortChannels orders the list the same way on every load: the stack's own #general first, then
// by name, then by id (two channels may share a name).
func sortChannels(cs []channelInfo) {
	sort.Slice(cs, func(i, j int) bool {
		a, b := cs[i], cs[j]
		if a.Home != b.Home {
			return a.Home
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.ID < b.ID
	})
}

// history returns a channel's recent messages, oldest first, each with its reactions.
func (c *chat) history(ctx context.Context, ch string) ([]message, error) {
	ch = strings.ToLower(strings.TrimSpace(ch))
	if !protocol.IsUUID(ch) {
		return nil, &badRequest{"channel must be a channel UUID"}
	}
	got, err := c.bridge.Query(ctx, client.F(
		nostr.Filter{Kinds: append([]int{protocol.KindSystemMessage}, chatKinds...), Tags: nostr.TagMap{"h": {ch}}, Limit: historyLimit},
		nostr.Filter{Kinds: []int{protocol.KindReaction}, Tags: nostr.TagMap{"h": {ch}}, Limit: reactionLimit})...)
	if err != nil {
		return nil, err
	}
	var evs, reactions []nostr.Event
	for _, ev := range got {
		if ev.Kind == protocol.KindReaction {
			reactions = append(reactions, ev)
		} else {
			evs = append(evs, ev)
		}
	}
	sort.SliceStable(evs, func(i, j int) bool {
		if evs[i].CreatedAt != evs[j].CreatedAt {
			return evs[i].CreatedAt < evs[j].CreatedAt
		}
		return evs[i].ID < evs[j].ID
	})
	pks := make([]string, 0, len(got))
	for _, ev := range got {
		pks = append(pks, ev.PubKey)
	}
	c.loadNames(ctx, pks)
	out := make([]message, 0, len(evs))
	at := map[string]int{} // message id → index in out
	for i := range evs {
		m, ok := c.toEntry(ctx, &evs[i], ch)
		if !ok {
			continue
		}
		at[evs[i].ID] = len(out)
		out = append(out, m)
	}
	sort.SliceStable(reactions, func(i, j int) bool { return reactions[i].CreatedAt < reactions[j].CreatedAt })
	for i := range reactions {
		r, ok := c.toReaction(ctx, &reactions[i], ch)
		if j, shown := at[r.Target]; ok && shown {
			out[j].Reactions = append(out[j].Reactions, r)
		}
	}
	return out, nil
}

// toReaction reads a kind-7 event; NIP-25 puts the reacted-to event in the last e tag.
func (c *chat) toReaction(ctx context.Context, ev *nostr.Event, ch string) (reaction, bool) {
	target := ""
	for _, t := range ev.Tags {
		if len(t) >= 2 && t[0] == "e" {
			target = t[1]
		}
	}
	if !protocol.IsHex64(target) {
		return reaction{}, false
	}
	if _, ok := c.name(ev.PubKey); !ok {
		c.loadNames(ctx, []string{ev.PubKey})
	}
	emoji := ev.Content
	if r := []rune(emoji); len(r) > maxEmojiRunes { // an emoji or a :shortcode:, not an essay
		emoji = string(r[:maxEmojiRunes]) + "…"
	}
	r := reaction{ID: ev.ID, Channel: ch, Target: target, Pubkey: ev.PubKey, Emoji: emoji}
	if r.Name, _ = c.name(ev.PubKey); r.Name == "" {
		r.Name = shortNpub(ev.PubKey)
	}
	return r, true
}

// send posts the composer's message as the owner: @name mentions of channel members become p
// tags, and a reply gets NIP-10 root/reply tags.
func (c *chat) send(ctx context.Context, req postReq) (message, error) {
	ch := strings.ToLower(strings.TrimSpace(req.Channel))
	if !protocol.IsUUID(ch) {
		return message{}, &badRequest{"channel must be a channel UUID"}
	}
	if strings.TrimSpace(req.Content) == "" && len(req.Attachments) == 0 {
		return message{}, &badRequest{"message is empty"}
	}
	atts, err := c.imetaOf(req.Attachments)
	if err != nil {
		return message{}, err
	}
	content := protocol.ContentWithAttachments(req.Content, atts)
	if len(content) > maxContentBytes || !utf8.ValidString(content) {
		return message{}, &badRequest{"message must be valid UTF-8 of at most 64 KiB"}
	}
	kind, err := c.postKind(ctx, ch, req.ReplyTo != "")
	if err != nil {
		return message{}, err
	}
	tags := nostr.Tags{{"h", ch}}
	if req.ReplyTo != "" {
		parentID := strings.ToLower(strings.TrimSpace(req.ReplyTo))
		if !protocol.IsHex64(parentID) {
			return message{}, &badRequest{"replyTo must be a 64-hex event id"}
		}
		parents, err := c.bridge.Query(ctx, client.F(nostr.Filter{IDs: []string{parentID}, Limit: 1})...)
		if err != nil {
			return message{}, err
		}
		if len(parents) == 0 {
			return message{}, &badRequest{"the message you reply to was not found"}
		}
		root := protocol.ParseThread(parents[0].Tags).Root
		if root == "" {
			root = parentID
		}
		tags = append(tags, protocol.ReplyTags(root, parentID)...)
	}
	members, err := c.memberNames(ctx, ch)
	if err != nil {
		return message{}, err
	}
	var all []string
	for _, pks := range members {
		all = append(all, pks...)
	}
	for _, pk := range req.Mention {
		if !slices.Contains(all, pk) {
			return message{}, &badRequest{"mention must name channel members by pubkey"}
		}
	}
	names, ambiguous := resolveNames(members, c.agent, req.Mention)
	if amb := MentionedPubkeys(req.Content, ambiguous); len(amb) > 0 {
		var parts []string
		for _, name := range amb {
			parts = append(parts, fmt.Sprintf("@%s matches %d members", name, len(members[name])))
		}
		return message{}, &badRequest{strings.Join(parts, "; ") + ": pick the member from the mention list"}
	}
	mentioned := MentionedPubkeys(req.Content, names)
	for _, pk := range req.Mention {
		if !slices.Contains(mentioned, pk) {
			mentioned = append(mentioned, pk)
		}
	}
	for _, pk := range mentioned {
		tags = append(tags, nostr.Tag{"p", pk})
	}
	for _, a := range atts {
		tags = append(tags, a.Tag())
	}
	ev := &nostr.Event{Kind: kind, Content: content, Tags: tags, CreatedAt: nostr.Now()}
	res, err := c.bridge.Publish(ctx, ev)
	if err != nil {
		return message{}, err
	}
	if !res.Accepted {
		return message{}, &badRequest{"relay refused the message: " + res.Message}
	}
	return c.toMessage(ctx, ev, ch), nil
}

// postKind is what the composer posts in ch: chat, or in a forum a post (45001) and, in a
// thread, a comment (45003).
func (c *chat) postKind(ctx context.Context, ch string, reply bool) (int, error) {
	evs, err := c.bridge.Query(ctx, client.F(nostr.Filter{Kinds: []int{protocol.KindGroupMetadata}, Tags: nostr.TagMap{"d": {ch}}, Limit: 1})...)
	if err != nil {
		return 0, err
	}
	for _, ev := range protocol.NewestByD(evs) {
		if protocol.ParseChannelMeta(&ev).Type == protocol.TypeForum {
			if reply {
				return protocol.KindForumComment, nil
			}
			return protocol.KindForumPost, nil
		}
	}
	return protocol.KindStreamMessage, nil
}

// memberNames maps each member's profile name, lowercased (mentions match case-insensitively),
// to the members of that name: anyone may take any name, so one name can be several members.
func (c *chat) memberNames(ctx context.Context, ch string) (map[string][]string, error) {
	evs, err := c.bridge.Query(ctx, client.F(nostr.Filter{Kinds: []int{protocol.KindGroupMembers}, Tags: nostr.TagMap{"d": {ch}}, Limit: 1})...)
	if err != nil {
		return nil, err
	}
	var pks []string
	for _, ev := range protocol.NewestByD(evs) {
		for _, m := range protocol.ParseMembers(&ev) {
			pks = append(pks, m.Pubkey)
		}
	}
	c.loadNames(ctx, pks)
	out := map[string][]string{}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, pk := range pks {
		if n := strings.ToLower(c.names[pk]); n != "" && !slices.Contains(out[n], pk) {
			out[n] = append(out[n], pk)
		}
	}
	return out, nil
}

// resolveNames picks the member each name mentions: the only one of that name; else the stack's
// agent when it is one of them (a stranger naming itself "agent" does not get the owner's
// @agent); else the one of them the composer named explicitly. The names still naming several
// members are returned apart (name → name), for the caller to refuse when the text uses them.
func resolveNames(members map[string][]string, agent string, explicit []string) (names, ambiguous map[string]string) {
	names, ambiguous = map[string]string{}, map[string]string{}
	for name, pks := range members {
		var picked []string
		switch {
		case len(pks) == 1:
			picked = pks
		case agent != "" && slices.Contains(pks, agent):
			picked = []string{agent}
		default:
			for _, pk := range pks {
				if slices.Contains(explicit, pk) {
					picked = append(picked, pk)
				}
			}
		}
		if len(picked) == 1 {
			names[name] = picked[0]
		} else {
			ambiguous[name] = name
		}
	}
	return names, ambiguous
}

// MentionedPubkeys returns, in order of first appearance, the pubkeys whose name appears as
// "@name" in text (case-insensitive, not inside a longer word or name, not inside code).
func MentionedPubkeys(text string, names map[string]string) []string {
	lower := strings.ToLower(maskCode(text))
	type hit struct {
		at int
		pk string
	}
	var hits []hit
	for name, pk := range names {
		n := "@" + strings.ToLower(name)
		for from := 0; ; {
			i := strings.Index(lower[from:], n)
			if i < 0 {
				break
			}
			i += from
			end := i + len(n)
			before := i == 0 || !nameByte(lower[i-1])
			after := end == len(lower) || !nameByte(lower[end]) || (lower[end] == '.' && (end+1 == len(lower) || !nameByte(lower[end+1])))
			if before && after {
				hits = append(hits, hit{i, pk})
				break
			}
			from = i + 1
		}
	}
	sort.Slice(hits, func(i, j int) bool { return hits[i].at < hits[j].at })
	var out []string
	seen := map[string]bool{}
	for _, h := range hits {
		if !seen[h.pk] {
			seen[h.pk] = true
			out = append(out, h.pk)
		}
	}
	return out
}

// maskCode blanks code: text between a run of backticks and the next run of the same length
// (inline spans and ``` fences alike), so "@name" in code is not a mention. An unclosed run is
// literal text. Length is kept.
func maskCode(text string) string {
	b := []byte(text)
	for i := 0; i < len(b); {
		if b[i] != '`' {
			i++
			continue
		}
		n := 0
		for i+n < len(b) && b[i+n] == '`' {
			n++
		}
		end := -1
		for j := i + n; j < len(b); {
			if b[j] != '`' {
				j++
				continue
			}
			m := 0
			for j+m < len(b) && b[j+m] == '`' {
				m++
			}
			if m == n {
				end = j
				break
			}
			j += m
		}
		if end < 0 {
			i += n
			continue
		}
		for k := i + n; k < end; k++ {
			b[k] = ' '
		}
		i = end + n
	}
	return string(b)
}

// nameByte reports bytes that continue a name (so "@ann" does not match "@anna").
func nameByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= '0' && b <= '9' || b == '_' || b == '-' || b == '.' || b >= 0x80
}

// toEntry is a chat message, or a system row the page may show; ok is false for a row it must not.
func (c *chat) toEntry(ctx context.Context, ev *nostr.Event, ch string) (message, bool) {
	if ev.Kind != protocol.KindSystemMessage {
		return c.toMessage(ctx, ev, ch), true
	}
	row, ok := c.toSystemRow(ctx, ev)
	if !ok {
		return message{}, false
	}
	m := c.toMessage(ctx, ev, ch)
	m.System = row
	return m, true
}

func (c *chat) toMessage(ctx context.Context, ev *nostr.Event, ch string) message {
	if _, ok := c.name(ev.PubKey); !ok {
		c.loadNames(ctx, []string{ev.PubKey})
	}
	th := protocol.ParseThread(ev.Tags)
	m := message{
		ID: ev.ID, Channel: ch, Kind: ev.Kind, Pubkey: ev.PubKey, Content: ev.Content, CreatedAt: int64(ev.CreatedAt),
		Root: th.Root, Parent: th.Parent, Mentions: protocol.Mentions(ev.Tags),
		IsAgent: ev.PubKey == c.agent, IsOwner: ev.PubKey == c.owner,
		Permission: ev.PubKey == c.agent && protocol.IsPermissionRequest(ev.Tags),
	}
	if m.Mentions == nil {
		m.Mentions = []string{}
	}
	if m.Permission {
		m.PermissionOptions = protocol.PermissionOptions(ev.Tags)
	}
	m.Attachments = c.attachments(ev.Tags)
	if ev.Kind == protocol.KindDiffMessage {
		m.Diff = diffOf(ev.Tags)
	}
	m.Broadcast = protocol.TagValue(ev.Tags, "broadcast") == "1"
	m.Name, _ = c.name(ev.PubKey)
	if m.Name == "" {
		m.Name = shortNpub(ev.PubKey)
	}
	return m
}

func (c *chat) name(pk string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, ok := c.names[pk]
	return n, ok
}

func (c *chat) person(pk string) person {
	n, _ := c.name(pk)
	if n == "" {
		n = shortNpub(pk)
	}
	return person{Pubkey: pk, Npub: protocol.Npub(pk), Name: n, IsAgent: pk == c.agent, IsOwner: pk == c.owner}
}

// loadNames fetches profiles (kind 0) for pubkeys not yet known. A pubkey without a profile is
// remembered as "" so it is not asked for again on every message.
func (c *chat) loadNames(ctx context.Context, pks []string) {
	c.mu.Lock()
	var want []string
	seen := map[string]bool{}
	for _, pk := range pks {
		if _, ok := c.names[pk]; !ok && !seen[pk] && protocol.IsHex64(pk) {
			seen[pk] = true
			want = append(want, pk)
		}
	}
	c.mu.Unlock()
	if len(want) == 0 {
		return
	}
	evs, err := c.bridge.Query(ctx, client.F(nostr.Filter{Kinds: []int{protocol.KindProfile}, Authors: want, Limit: 500})...)
	if err != nil {
		c.log.Warn("console: profile lookup failed", "err", err)
		return
	}
	newest := map[string]nostr.Event{}
	for _, ev := range protocol.NewestByAuthor(evs) {
		newest[ev.PubKey] = ev
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, pk := range want {
		c.names[pk] = ""
		if ev, ok := newest[pk]; ok {
			c.names[pk] = profileName(ev.Content)
		}
	}
}

// profileName picks the name a person is mentioned by: name, else display_name.
func profileName(content string) string {
	var p struct {
		Name        string `json:"name"`
		DisplayName string `json:"display_name"`
	}
	if json.Unmarshal([]byte(content), &p) != nil {
		return ""
	}
	if n := strings.TrimSpace(p.Name); n != "" {
		return n
	}
	return strings.TrimSpace(p.DisplayName)
}

func shortNpub(pk string) string {
	n := protocol.Npub(pk)
	if len(n) > 16 {
		return n[:12] + "…" + n[len(n)-4:]
	}
	return n
}

// hub fans live messages and reactions out to the open event streams; a stream that falls behind loses
// messages rather than stalling the others (the browser reloads history on reconnect).
type hub struct {
	mu   sync.Mutex
	subs map[chan liveEvent]struct{}
}

func newHub() *hub { return &hub{subs: map[chan liveEvent]struct{}{}} }

func (h *hub) subscribe(ctx context.Context) <-chan liveEvent {
	ch := make(chan liveEvent, 256)
	h.mu.Lock()
	h.subs[ch] = struct{}{}
	h.mu.Unlock()
	context.AfterFunc(ctx, func() {
		h.mu.Lock()
		delete(h.subs, ch)
		close(ch)
		h.mu.Unlock()
	})
	return ch
}

func (h *hub) publish(m liveEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		select {
		case ch <- m:
		default:
		}
	}
}

// diffMeta is what a kind-40008 diff message says about its diff (upstream's tags).
type diffMeta struct {
	Repo        string `json:"repo"`
	Commit      string `json:"commit"`
	File        string `json:"file,omitempty"`
	Lang        string `json:"lang,omitempty"`
	Description string `json:"description,omitempty"`
	PR          string `json:"pr,omitempty"`
}

func diffOf(tags nostr.Tags) *diffMeta {
	v := func(name string) string { return protocol.TagValue(tags, name) }
	return &diffMeta{Repo: v("repo"), Commit: v("commit"), File: v("file"), Lang: v("l"), Description: v("description"), PR: v("pr")}
}
