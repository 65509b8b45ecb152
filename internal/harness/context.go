package harness

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/client"
	"github.com/buzz-harness/buzz/internal/prompt"
	"github.com/buzz-harness/buzz/internal/protocol"
)

const fetchTimeout = 3 * time.Second

// standing assembles the agent's standing context for a channel session: configured base,
// persona and team text, plus core memory and the channel canvas from the relay (best effort).
func (h *Harness) standing(ctx context.Context, ch channel, withRelay bool) prompt.Standing {
	s := prompt.Standing{Base: h.cfg.BasePrompt, System: h.cfg.SystemPrompt, Team: h.cfg.TeamInstructions}
	if !withRelay {
		return s
	}
	if h.cfg.Memory {
		if evs, err := h.query(ctx, nostr.Filter{Kinds: []int{protocol.KindEngram}, Authors: []string{h.agent},
			Tags: nostr.TagMap{"d": {"core"}}, Limit: 1}); err == nil && len(evs) > 0 {
			s.Core = evs[0].Content
		}
	}
	if ch.Type != protocol.TypeDM {
		if evs, err := h.query(ctx, nostr.Filter{Kinds: []int{protocol.KindCanvas}, Tags: nostr.TagMap{"h": {ch.ID}}, Limit: 1}); err == nil && len(evs) > 0 {
			s.Canvas = &prompt.Canvas{EventID: evs[0].ID, Modified: evs[0].CreatedAt.Time(), ChannelID: ch.ID}
		}
	}
	return s
}

// query runs one bridge query with the fetch timeout and a single retry.
func (h *Harness) query(ctx context.Context, filters ...nostr.Filter) ([]nostr.Event, error) {
	fs := make([]client.Filter, len(filters))
	for i, f := range filters {
		fs[i] = client.Filter{Filter: f}
	}
	var err error
	for attempt := 0; attempt < 2; attempt++ {
		qctx, cancel := context.WithTimeout(ctx, fetchTimeout)
		var evs []nostr.Event
		evs, err = h.bridge.Query(qctx, fs...)
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

// renderTurn fetches what the prompt needs (thread or conversation context, profiles) and renders it.
func (h *Harness) renderTurn(ctx context.Context, in turnInput, sess *chanSession) prompt.Rendered {
	evs := make([]nostr.Event, len(in.batch.Items))
	for i, it := range in.batch.Items {
		evs[i] = *it.Event
	}
	last := evs[len(evs)-1]
	pin := prompt.Input{
		Events:          evs,
		Channel:         prompt.Channel{ID: in.channel.ID, Name: in.channel.Name, Type: in.channel.Type, Description: in.channel.About},
		Self:            h.agent,
		Delivered:       sess.Delivered,
		IncludeStanding: sess.Route == RouteUserMessage && !sess.StandingSent,
	}
	if pin.IncludeStanding {
		if sess.opening != nil {
			pin.Standing = *sess.opening
		} else {
			pin.Standing = h.standing(ctx, in.channel, true)
		}
	}
	sess.opening = nil // only the first prompt of a session can use it
	pin.Context = h.fetchContext(ctx, in.channel, last)
	pin.Profiles = h.profiles(ctx, evs, pin.Context)
	return prompt.Build(pin)
}

// fetchContext returns the thread window of the last event's thread, or the DM conversation;
// nil for top-level channel messages or when the fetch fails (the prompt still goes out).
func (h *Harness) fetchContext(ctx context.Context, ch channel, last nostr.Event) *prompt.ThreadWindow {
	limit := h.cfg.ContextMessageLimit
	if limit <= 0 {
		return nil
	}
	ref := protocol.ParseThread(last.Tags)
	switch {
	case ref.Root != "":
		replies := nostr.Filter{Kinds: protocol.MessageKinds, Tags: nostr.TagMap{"e": {ref.Root}, "h": {ch.ID}}, Limit: limit + 1}
		mine := replies
		mine.Authors, mine.Limit = []string{h.agent}, 1
		evs, err := h.query(ctx, nostr.Filter{IDs: []string{ref.Root}, Limit: 1}, replies, mine)
		if err != nil {
			h.log.Warn("thread context fetch failed", "channel", ch.ID, "err", err)
			return nil
		}
		var agentNewest *nostr.Event
		for i := range evs {
			if evs[i].PubKey == h.agent && evs[i].ID != ref.Root && (agentNewest == nil || evs[i].CreatedAt > agentNewest.CreatedAt) {
				agentNewest = &evs[i]
			}
		}
		count := int64(-1)
		if w := prompt.BuildThreadContext(ref.Root, evs, agentNewest, limit, -1); w.Truncated {
			cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			n, err := h.bridge.Count(cctx, client.Filter{Filter: nostr.Filter{Kinds: protocol.MessageKinds, Tags: replies.Tags}})
			cancel()
			if err == nil {
				count = n
			}
		}
		w := prompt.BuildThreadContext(ref.Root, evs, agentNewest, limit, count)
		return &w
	case ch.Type == protocol.TypeDM:
		evs, err := h.query(ctx, nostr.Filter{Kinds: protocol.MessageKinds, Tags: nostr.TagMap{"h": {ch.ID}}, Limit: limit})
		if err != nil {
			h.log.Warn("conversation context fetch failed", "channel", ch.ID, "err", err)
			return nil
		}
		w := prompt.BuildConversationContext(evs, limit)
		return &w
	}
	return nil
}

// profileTTL is how long a fetched kind-0 profile (or its absence) is trusted.
const profileTTL = 5 * time.Minute

// profileCache keeps recently fetched profiles so a turn does not query kind 0 every time.
// Turn goroutines share it.
type profileCache struct {
	mu      sync.Mutex
	entries map[string]cachedProfile
}

type cachedProfile struct {
	p  prompt.Profile
	at time.Time
}

// profiles labels the batch's authors, mentioned pubkeys and context authors from kind 0.
// An "auth" tag of four elements (NIP-OA) marks an agent.
func (h *Harness) profiles(ctx context.Context, evs []nostr.Event, w *prompt.ThreadWindow) map[string]prompt.Profile {
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
	now := h.now()
	out := map[string]prompt.Profile{}
	var missing []string
	h.profileCache.mu.Lock()
	for pk := range want {
		if c, ok := h.profileCache.entries[pk]; ok && now.Sub(c.at) < profileTTL {
			out[pk] = c.p
		} else {
			missing = append(missing, pk)
		}
	}
	h.profileCache.mu.Unlock()
	if len(missing) == 0 {
		return out
	}
	got, err := h.query(ctx, nostr.Filter{Kinds: []int{protocol.KindProfile}, Authors: missing, Limit: len(missing)})
	if err != nil {
		return out
	}
	fetched := map[string]prompt.Profile{}
	for _, e := range got {
		if _, dup := fetched[e.PubKey]; !dup { // newest first
			fetched[e.PubKey] = parseProfile(&e)
		}
	}
	h.profileCache.mu.Lock()
	defer h.profileCache.mu.Unlock()
	if h.profileCache.entries == nil || len(h.profileCache.entries) > 10000 {
		h.profileCache.entries = map[string]cachedProfile{}
	}
	for _, pk := range missing {
		p := fetched[pk] // zero Profile when none exists: remembered too
		h.profileCache.entries[pk] = cachedProfile{p: p, at: now}
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
