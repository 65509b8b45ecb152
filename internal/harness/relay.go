package harness

import (
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/client"
	"github.com/buzz-harness/buzz/internal/clock"
	"github.com/buzz-harness/buzz/internal/prompt"
	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/protocol/engram"
)

const fetchTimeout = 3 * time.Second

// relayClient is the harness's one-shot calls to the relay: over the HTTP bridge the reads a
// prompt needs (standing context, thread or conversation context, profiles) and membership
// lookups; publishes over the socket while it is up (client.SocketFirst). Turn goroutines and the
// loop share it; only the profile cache is mutable.
type relayClient struct {
	bridge   *client.Bridge
	sock     *client.SocketFirst // publishes (and the reply check queries) over the socket while it is up, else the bridge
	self     string              // the agent's pubkey hex
	cfg      *Config
	log      *slog.Logger
	clock    clock.Clock
	profiles profileCache
	// discoverPage and discoverPages override discoverPage and maxDiscoverPages (tests page
	// through a few channels at a time).
	discoverPage, discoverPages int
}

// standing assembles the agent's standing context for a channel session: configured base,
// persona and team text, plus core memory and the channel canvas from the relay (best effort).
func (rc *relayClient) standing(ctx context.Context, ch channel, withRelay bool) prompt.Standing {
	s := prompt.Standing{Base: rc.cfg.BasePrompt, System: rc.cfg.SystemPrompt, Team: rc.cfg.TeamInstructions}
	if rc.cfg.Owner != "" {
		s.Owner = &prompt.Owner{Pubkey: rc.cfg.Owner, Name: rc.ownerLabel(ctx, withRelay)}
	}
	if !withRelay {
		return s
	}
	if rc.cfg.Memory {
		s.Core = rc.coreMemory(ctx)
	}
	if ch.Type != protocol.ChannelDM {
		if evs, err := rc.query(ctx, nostr.Filter{Kinds: []int{protocol.KindCanvas}, Tags: nostr.TagMap{"h": {ch.ID}}, Limit: 1}); err == nil && len(evs) > 0 {
			s.Canvas = &prompt.Canvas{EventID: evs[0].ID, Modified: evs[0].CreatedAt.Time(), ChannelID: ch.ID}
		}
	}
	return s
}

// ownerLabel is the owner's profile label for the standing context: from the profile cache, or
// fetched when withRelay; "" when unknown (the key alone names the owner).
func (rc *relayClient) ownerLabel(ctx context.Context, withRelay bool) string {
	rc.profiles.mu.Lock()
	c, ok := rc.profiles.entries[rc.cfg.Owner]
	rc.profiles.mu.Unlock()
	switch {
	case ok:
		return c.p.Label
	case !withRelay:
		return ""
	}
	return rc.fetchProfiles(ctx, []string{rc.cfg.Owner})[rc.cfg.Owner].Label
}

// CoreNudge is the core-memory section when the agent has confirmed-no core record yet: it tells
// the agent what core memory is for and how to write it.
const CoreNudge = "You have no core memory yet. Core memory is the short profile you carry into every " +
	"new session: who you are, who you work for, your rules and your goals. Ask your user about " +
	"yourself, then save it by piping the text to `buzz mem set core -`."

// coreMemory fetches the agent's core engram (NIP-AE) for a new session's standing context: the
// profile when there is one, CoreNudge when the relay confirms there is none, and "" (no
// section) without an owner or when the answer is unreadable or the relay unreachable — an outage
// must never look like an empty memory and invite the agent to start over.
func (rc *relayClient) coreMemory(ctx context.Context) string {
	if rc.cfg.Owner == "" {
		return ""
	}
	p, err := engram.AgentSide(rc.cfg.SecretKey, rc.cfg.Owner)
	if err != nil {
		rc.log.Warn("core memory: no key pair", "err", err)
		return ""
	}
	evs, err := rc.query(ctx, p.HeadFilter(engram.CoreSlug))
	if err != nil {
		rc.log.Warn("core memory: query failed; no memory section", "err", err)
		return ""
	}
	profile, found, err := p.Core(evs)
	switch {
	case err != nil:
		rc.log.Warn("core memory: unreadable; no memory section", "err", err, "events", len(evs))
		return ""
	case !found || strings.TrimSpace(profile) == "":
		return CoreNudge
	}
	return profile
}

// query runs one bridge query with the fetch timeout and a single retry.
func (rc *relayClient) query(ctx context.Context, filters ...nostr.Filter) ([]nostr.Event, error) {
	fs := make([]client.Filter, len(filters))
	for i, f := range filters {
		fs[i] = client.Filter{Filter: f}
	}
	return retryQuery(ctx, func(ctx context.Context) ([]nostr.Event, error) { return rc.bridge.Query(ctx, fs...) })
}

// querySocket is query over the socket while it is up (rc.sock): for the reply check, which
// reads after every turn that looks silent, where a bridge call's NIP-98 header costs a curve
// operation on each side and a replay record at the relay.
func (rc *relayClient) querySocket(ctx context.Context, filters ...nostr.Filter) ([]nostr.Event, error) {
	return retryQuery(ctx, func(ctx context.Context) ([]nostr.Event, error) { return rc.sock.Query(ctx, filters...) })
}

// retryQuery runs q with the fetch timeout and a single retry.
func retryQuery(ctx context.Context, q func(context.Context) ([]nostr.Event, error)) ([]nostr.Event, error) {
	var err error
	for attempt := 0; attempt < 2; attempt++ {
		qctx, cancel := context.WithTimeout(ctx, fetchTimeout)
		var evs []nostr.Event
		evs, err = q(qctx)
		cancel()
		if err == nil {
			return evs, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
	}
	return nil, err
}

// renderTurn fetches what the prompt needs (thread or conversation context, profiles) and renders
// it; stale are the profiles to refresh once the prompt is out (profileLabels).
func (rc *relayClient) renderTurn(ctx context.Context, in turnInput, sess *convSession) (r prompt.Rendered, stale []string) {
	evs := make([]nostr.Event, len(in.batch.Items))
	tags := map[string]string{}
	var followed map[string]bool
	for i, it := range in.batch.Items {
		evs[i] = *it.Event
		switch it.Tag {
		case "":
		case prompt.FollowTag: // it came by thread follow (follow.go)
			if followed == nil {
				followed = map[string]bool{}
			}
			followed[it.Event.ID] = true
		default:
			tags[it.Event.ID] = it.Tag
		}
	}
	last := evs[len(evs)-1]
	pin := prompt.Input{
		Events:          evs[in.batch.Carried:],
		Cancelled:       evs[:in.batch.Carried],
		Reason:          in.batch.Reason,
		EventTags:       tags,
		Channel:         prompt.Channel{ID: in.channel.ID, Name: in.channel.Name, Type: string(in.channel.Type), Description: in.channel.About},
		Self:            rc.self,
		Delivered:       sess.Delivered,
		IncludeStanding: sess.Route == RouteUserMessage && !sess.StandingSent,
		Followed:        followed,
	}
	if pin.IncludeStanding {
		if sess.opening != nil {
			pin.Standing = *sess.opening
		} else {
			pin.Standing = rc.standing(ctx, in.channel, true)
		}
	}
	sess.opening = nil // only the first prompt of a session can use it
	pin.Context = rc.fetchContext(ctx, in.channel, contextRoot(in.conv, &last))
	pin.Profiles, stale = rc.profileLabels(ctx, evs, pin.Context)
	return prompt.Build(pin), stale
}

// contextRoot is the thread whose messages a prompt shows: the conversation's own thread under
// the thread policy (none while its root is the newest event: nothing has been said in it yet),
// else the newest event's NIP-10 root.
func contextRoot(k convKey, last *nostr.Event) string {
	if k.Root != "" {
		if k.Root == last.ID {
			return ""
		}
		return k.Root
	}
	return protocol.ParseThread(last.Tags).Root
}

// fetchContext returns the thread window of root's thread, or the DM conversation; nil for
// top-level channel messages or when the fetch fails (the prompt still goes out).
func (rc *relayClient) fetchContext(ctx context.Context, ch channel, root string) *prompt.ThreadWindow {
	limit := rc.cfg.ContextMessageLimit
	if limit <= 0 {
		return nil
	}
	ref := protocol.ThreadRef{Root: root}
	switch {
	case ref.Root != "":
		replies := nostr.Filter{Kinds: protocol.MessageKinds, Tags: nostr.TagMap{"e": {ref.Root}, "h": {ch.ID}}, Limit: limit + 1}
		mine := replies
		mine.Authors, mine.Limit = []string{rc.self}, 1
		// Every query names this channel: an e tag written by anyone may point at an event of a
		// channel the sender cannot read but the agent can, and that must not reach the prompt.
		root := nostr.Filter{IDs: []string{ref.Root}, Tags: nostr.TagMap{"h": {ch.ID}}, Limit: 1}
		evs, err := rc.query(ctx, root, replies, mine)
		if err != nil {
			rc.log.Warn("thread context fetch failed", "channel", ch.ID, "err", err)
			return nil
		}
		evs = inChannel(evs, ch.ID)
		var agentNewest *nostr.Event
		for i := range evs {
			if evs[i].PubKey == rc.self && evs[i].ID != ref.Root && (agentNewest == nil || evs[i].CreatedAt > agentNewest.CreatedAt) {
				agentNewest = &evs[i]
			}
		}
		count := int64(-1)
		if w := prompt.BuildThreadContext(ref.Root, evs, agentNewest, limit, -1); w.Truncated {
			cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			n, err := rc.bridge.Count(cctx, client.Filter{Filter: nostr.Filter{Kinds: protocol.MessageKinds, Tags: replies.Tags}})
			cancel()
			if err == nil {
				count = n
			}
		}
		w := prompt.BuildThreadContext(ref.Root, evs, agentNewest, limit, count)
		return &w
	case ch.Type == protocol.ChannelDM:
		evs, err := rc.query(ctx, nostr.Filter{Kinds: protocol.MessageKinds, Tags: nostr.TagMap{"h": {ch.ID}}, Limit: limit})
		if err != nil {
			rc.log.Warn("conversation context fetch failed", "channel", ch.ID, "err", err)
			return nil
		}
		w := prompt.BuildConversationContext(inChannel(evs, ch.ID), limit)
		return &w
	}
	return nil
}

// inChannel keeps the events whose h tag is channel, whatever the relay answered.
func inChannel(evs []nostr.Event, channel string) []nostr.Event {
	out := evs[:0]
	for _, ev := range evs {
		if id, _ := protocol.ChannelID(ev.Tags); id == channel {
			out = append(out, ev)
		}
	}
	return out
}

// profileTTL is how long a fetched kind-0 profile (or its absence) is trusted. Past it, the
// cached label is still used and a refresh is fetched while the agent works: people mention an
// agent minutes apart, so otherwise nearly every mention waited for a profile query.
const profileTTL = 5 * time.Minute

// profileCache keeps recently fetched profiles so a turn does not query kind 0 every time.
// Turn goroutines share it.
type profileCache struct {
	mu         sync.Mutex
	entries    map[string]cachedProfile
	refreshing map[string]bool // stale entries a turn is fetching again
}

type cachedProfile struct {
	p  prompt.Profile
	at time.Time
}

// profileLabels labels the batch's authors, mentioned pubkeys and context authors from kind 0.
// An "auth" tag of four elements (NIP-OA) marks an agent. Only pubkeys never seen are fetched
// here; stale lists those whose labels are past profileTTL, for the caller to refreshProfiles
// once the prompt is out.
func (rc *relayClient) profileLabels(ctx context.Context, evs []nostr.Event, w *prompt.ThreadWindow) (labels map[string]prompt.Profile, stale []string) {
	want := map[string]bool{}
	for _, e := range evs {
		want[e.PubKey] = true
		for _, p := range protocol.Mentions(e.Tags) {
			want[p] = true
		}
	}
	if w != nil {
		for _, e := range w.Messages {
			want[e.PubKey] = true
		}
	}
	now := rc.clock.Now()
	labels = map[string]prompt.Profile{}
	var missing []string
	rc.profiles.mu.Lock()
	for pk := range want {
		c, ok := rc.profiles.entries[pk]
		if !ok {
			missing = append(missing, pk)
			continue
		}
		labels[pk] = c.p
		if now.Sub(c.at) >= profileTTL && !rc.profiles.refreshing[pk] {
			if rc.profiles.refreshing == nil {
				rc.profiles.refreshing = map[string]bool{}
			}
			rc.profiles.refreshing[pk] = true
			stale = append(stale, pk)
		}
	}
	rc.profiles.mu.Unlock()
	if len(missing) > 0 {
		maps.Copy(labels, rc.fetchProfiles(ctx, missing))
	}
	return labels, stale
}

// profileSaysAgent reports whether pk's cached profile marks an agent (a NIP-OA auth tag).
func (rc *relayClient) profileSaysAgent(pk string) bool {
	rc.profiles.mu.Lock()
	defer rc.profiles.mu.Unlock()
	return rc.profiles.entries[pk].p.IsAgent
}

// refreshProfiles fetches the profiles of stale pubkeys again (a failed fetch keeps the old
// labels; a later turn tries again).
func (rc *relayClient) refreshProfiles(ctx context.Context, stale []string) {
	rc.fetchProfiles(ctx, stale)
	rc.profiles.mu.Lock()
	defer rc.profiles.mu.Unlock()
	for _, pk := range stale {
		delete(rc.profiles.refreshing, pk)
	}
}

// fetchProfiles queries kind 0 of pks and caches each one's profile, or that it has none; nil
// if the query failed.
func (rc *relayClient) fetchProfiles(ctx context.Context, pks []string) map[string]prompt.Profile {
	got, err := rc.query(ctx, nostr.Filter{Kinds: []int{protocol.KindProfile}, Authors: pks, Limit: len(pks)})
	if err != nil {
		return nil
	}
	fetched := map[string]prompt.Profile{}
	for _, e := range got {
		if _, dup := fetched[e.PubKey]; !dup { // newest first
			fetched[e.PubKey] = parseProfile(&e)
		}
	}
	now := rc.clock.Now()
	out := make(map[string]prompt.Profile, len(pks))
	rc.profiles.mu.Lock()
	defer rc.profiles.mu.Unlock()
	if rc.profiles.entries == nil || len(rc.profiles.entries) > 10000 {
		rc.profiles.entries = map[string]cachedProfile{}
	}
	for _, pk := range pks {
		p := fetched[pk] // zero Profile when none exists: remembered too
		rc.profiles.entries[pk] = cachedProfile{p: p, at: now}
		out[pk] = p
	}
	return out
}

func parseProfile(e *nostr.Event) prompt.Profile {
	var p struct {
		DisplayName string `json:"display_name"`
		Name        string `json:"name"`
		NIP05       string `json:"nip05"`
	}
	_ = json.Unmarshal([]byte(e.Content), &p)
	label := p.DisplayName
	if label == "" {
		label = p.Name
	}
	if label == "" {
		label = p.NIP05
	}
	agent := false
	for _, t := range e.Tags {
		if len(t) == 4 && t[0] == "auth" {
			agent = true
		}
	}
	return prompt.Profile{Label: label, IsAgent: agent}
}

// publishLater publishes from a goroutine of tasks, bounded by ten seconds (and by the run).
func (rc *relayClient) publishLater(ctx context.Context, tasks *sync.WaitGroup, ev *nostr.Event) {
	tasks.Go(func() {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		rc.publish(pctx, ev)
	})
}

// publish sends one event (rc.sock); failures are logged, never retried.
func (rc *relayClient) publish(ctx context.Context, ev *nostr.Event) {
	res, err := rc.sock.Publish(ctx, ev)
	if err != nil {
		rc.log.Warn("publish failed", "kind", ev.Kind, "err", err)
		return
	}
	if !res.Accepted {
		rc.log.Warn("relay refused event", "kind", ev.Kind, "message", res.Message)
	}
}

// answered reports whether the agent has posted, since a batch went in flight, a message in ch
// that answers it (replyAnswers): the sign that a turn's reply landed even though its outcome was
// not recorded (the harness or the agent died first). On a failed query it says no: answering
// twice beats never answering.
func (rc *relayClient) answered(ctx context.Context, ch string, evs []*nostr.Event, since time.Time, ownSecond bool) bool {
	got, err := rc.query(ctx, nostr.Filter{Kinds: []int{protocol.KindStreamMessage}, Authors: []string{rc.self},
		Tags: nostr.TagMap{"h": {ch}}, Since: ptrTS(since), Limit: 100})
	if err != nil {
		return false
	}
	for i := range got {
		if replyAnswers(&got[i], evs, since, ownSecond) {
			return true
		}
	}
	return false
}

// replyAnswers reports whether the agent's message r answers a batch that went in flight at
// since. Naming one of the batch's events is an answer. Naming only their thread's root (agents
// often reply to the root) counts when r is dated after since's second, or in it when ownSecond
// says no earlier turn of the conversation ended in that second: created_at has one-second
// resolution, and a previous turn's reply in the same second names the same root — taking it
// for this batch's answer would lose the batch; ignoring this batch's own same-second reply
// answers it twice.
func replyAnswers(r *nostr.Event, evs []*nostr.Event, since time.Time, ownSecond bool) bool {
	if protocol.IsPermissionRequest(r.Tags) {
		return false // asking the owner is not answering the turn
	}
	ids, roots := map[string]bool{}, map[string]bool{}
	for _, ev := range evs {
		ids[ev.ID] = true
		if root := protocol.ParseThread(ev.Tags).Root; root != "" {
			roots[root] = true
		}
	}
	sec := int64(r.CreatedAt)
	later := sec > since.Unix() || ownSecond && sec == since.Unix()
	for _, t := range r.Tags {
		if len(t) < 2 || t[0] != "e" {
			continue
		}
		if ids[t[1]] || later && roots[t[1]] {
			return true
		}
	}
	return false
}

// Discovery pages through the agent's member lists this many at a time (the relay caps a
// query's limit; paging goes on until a page comes back empty, so any cap is fine), and asks for
// channel metadata this many ids at a time.
const (
	discoverPage      = 500
	discoverMetaChunk = 200
	// maxDiscoverPages stops a discovery that never ends (a relay ignoring the cursor).
	maxDiscoverPages = 4 * maxChannels / discoverPage
)

// memberChannels lists the channels the agent is a member of now (39002 #p self → 39000 #d),
// restricted to cfg.Channels; archived channels are left out. It pages past the relay's query
// limit: an agent added to thousands of channels still finds every one. The owner's channels
// (ownerChannels: those the owner created or added the agent to, and the home channel) come
// first and are marked OwnerShared; they are read from the owner's own events, which nobody else
// can add to, so they are found even when others have added the agent to more channels than
// discovery reads. A channel that merely lists the owner as a member is not the owner's: anyone
// may open a group DM naming the agent and the owner.
func (rc *relayClient) memberChannels(ctx context.Context) ([]*channel, error) {
	var ids []string
	owned := map[string]bool{}
	seen := map[string]bool{}
	visit := func(list *nostr.Event) {
		d := protocol.TagValue(list.Tags, "d")
		if protocol.IsUUID(d) && !seen[d] && protocol.IsMember(list, rc.self) {
			seen[d] = true
			ids = append(ids, d)
		}
	}
	mine, err := rc.ownerChannels(ctx)
	if err != nil {
		return nil, err
	}
	for chunk := range slices.Chunk(mine, discoverMetaChunk) {
		lists, err := rc.bridge.Query(ctx, client.Filter{Filter: nostr.Filter{
			Kinds: []int{protocol.KindGroupMembers}, Tags: nostr.TagMap{"d": chunk}, Limit: len(chunk) * 2}})
		if err != nil {
			return nil, err
		}
		for i := range lists {
			visit(&lists[i])
		}
	}
	rank := make(map[string]int, len(mine))
	for i, id := range mine {
		rank[id] = i
	}
	for _, id := range ids {
		owned[id] = true
	}
	// In ownerChannels' order: the home channel leads.
	slices.SortFunc(ids, func(a, b string) int { return rank[a] - rank[b] })
	if err := rc.pageMemberLists(ctx, rc.self, visit); err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return nil, nil
	}
	byID := map[string]protocol.ChannelMeta{}
	for chunk := range slices.Chunk(ids, discoverMetaChunk) {
		metas, err := rc.bridge.Query(ctx, client.Filter{Filter: nostr.Filter{
			Kinds: []int{protocol.KindGroupMetadata}, Tags: nostr.TagMap{"d": chunk}, Limit: len(chunk) * 2}})
		if err != nil {
			return nil, err
		}
		for i := range metas {
			m := protocol.ParseChannelMeta(&metas[i])
			if _, dup := byID[m.ID]; !dup { // newest first
				byID[m.ID] = m
			}
		}
	}
	var out []*channel
	for _, id := range ids {
		if rc.cfg.Channels != nil && !rc.cfg.Channels[id] {
			continue
		}
		m, ok := byID[id]
		switch {
		case !ok:
			out = append(out, &channel{ID: id, Name: "unknown", Type: protocol.ChannelUnknown, OwnerShared: owned[id]})
		case m.Archived:
			continue
		default:
			c := channelFromMeta(m)
			c.OwnerShared = owned[id]
			out = append(out, c)
		}
	}
	return out, nil
}

// ownerActs are the owner's events that make a channel the owner's for the agent: creating it
// (9007), adding the agent (9000 #p agent) and opening a DM with it (41010 #p agent).
func (rc *relayClient) ownerActs() []nostr.Filter {
	owner, self := []string{rc.cfg.Owner}, []string{rc.self}
	return []nostr.Filter{
		{Kinds: []int{protocol.KindCreateGroup}, Authors: owner},
		{Kinds: []int{protocol.KindPutUser}, Authors: owner, Tags: nostr.TagMap{"p": self}},
		{Kinds: []int{protocol.KindDMOpen}, Authors: owner, Tags: nostr.TagMap{"p": self}},
	}
}

// actChannel is the channel an owner act names.
func actChannel(ev *nostr.Event) (string, bool) {
	if ev.Kind == protocol.KindDMOpen {
		return protocol.DMOpenChannel(ev)
	}
	return protocol.ChannelID(ev.Tags)
}

// ownerChannels are the ids of the channels the agent always listens to, whether or not it is
// a member: the home channel, then those the owner created or added the agent to (ownerActs),
// newest first. The caller keeps those the agent is a member of.
func (rc *relayClient) ownerChannels(ctx context.Context) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	add := func(id string) {
		if protocol.IsUUID(id) && !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	add(rc.cfg.HomeChannel)
	if rc.cfg.Owner == "" {
		return out, nil
	}
	for _, f := range rc.ownerActs() {
		err := rc.pageEvents(ctx, f, func(ev *nostr.Event) {
			if id, ok := actChannel(ev); ok {
				add(id)
			}
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ownerMade reports whether the owner created channel id or added the agent to it (a DM: opened
// it with the agent), from the owner's own events.
func (rc *relayClient) ownerMade(ctx context.Context, id string, dm bool) (bool, error) {
	if id == rc.cfg.HomeChannel {
		return true, nil
	}
	if rc.cfg.Owner == "" {
		return false, nil
	}
	fs := rc.ownerActs()
	fs[0].Tags = nostr.TagMap{"h": {id}}
	fs[1].Tags["h"] = []string{id}
	fs[0].Limit, fs[1].Limit = 1, 1
	if dm { // a 41010 names its DM by its keys only
		fs[2].Limit = 100
	} else {
		fs = fs[:2]
	}
	evs, err := rc.query(ctx, fs...)
	if err != nil {
		return false, err
	}
	for i := range evs {
		if got, ok := actChannel(&evs[i]); ok && got == id {
			return true, nil
		}
	}
	return false, nil
}

// pageMemberLists calls visit for every member list (39002) naming pubkey.
func (rc *relayClient) pageMemberLists(ctx context.Context, pubkey string, visit func(*nostr.Event)) error {
	return rc.pageEvents(ctx, nostr.Filter{Kinds: []int{protocol.KindGroupMembers}, Tags: nostr.TagMap{"p": {pubkey}}}, visit)
}

// pageEvents calls visit for every event of f, a page at a time along the relay's
// (created_at desc, id asc) cursor until a page comes back empty, or maxDiscoverPages pages.
func (rc *relayClient) pageEvents(ctx context.Context, nf nostr.Filter, visit func(*nostr.Event)) error {
	page := rc.discoverPage
	if page <= 0 {
		page = discoverPage
	}
	nf.Limit = page
	f := client.Filter{Filter: nf}
	pages := rc.discoverPages
	if pages <= 0 {
		pages = maxDiscoverPages
	}
	for n := 0; ; n++ {
		if n == pages {
			rc.log.Warn("channel discovery: too many events; using what was found", "kinds", nf.Kinds, "pages", n)
			return nil
		}
		evs, err := rc.bridge.Query(ctx, f)
		if err != nil {
			return err
		}
		if len(evs) == 0 {
			return nil
		}
		for i := range evs {
			visit(&evs[i])
		}
		last := evs[len(evs)-1]
		until := last.CreatedAt
		f.Until, f.BeforeID = &until, last.ID
	}
}

// memberInfo is what a membership lookup found.
type memberInfo struct {
	member  bool // the agent is in the channel
	ownerIn bool // the owner created it or added the agent (ownerMade), or it is the home channel
	meta    *protocol.ChannelMeta
}

// membership reads whether the agent (and its owner) is in a channel now, and the channel's
// metadata.
func (rc *relayClient) membership(ctx context.Context, id string) (memberInfo, error) {
	evs, err := rc.query(ctx,
		nostr.Filter{Kinds: []int{protocol.KindGroupMembers}, Tags: nostr.TagMap{"d": {id}}, Limit: 1},
		nostr.Filter{Kinds: []int{protocol.KindGroupMetadata}, Tags: nostr.TagMap{"d": {id}}, Limit: 1})
	if err != nil {
		return memberInfo{}, err
	}
	var info memberInfo
	for i := range evs {
		switch evs[i].Kind {
		case protocol.KindGroupMembers:
			info.member = protocol.IsMember(&evs[i], rc.self)
		case protocol.KindGroupMetadata:
			m := protocol.ParseChannelMeta(&evs[i])
			info.meta = &m
		}
	}
	if info.member {
		dm := info.meta == nil || info.meta.ReportedType() == protocol.ChannelDM
		if info.ownerIn, err = rc.ownerMade(ctx, id, dm); err != nil {
			return memberInfo{}, err
		}
	}
	return info, nil
}
