package console

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/client"
	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/protocol/turnmetric"
)

// System rows (kind 40099) and turn metrics (kind 44200): what the relay and the agent say about
// the channel and about each turn, in the shapes other Buzz clients read.

// systemRow is a 40099 row's content as the browser sees it.
type systemRow struct {
	Type   string `json:"type"`
	Actor  string `json:"actor,omitempty"`
	Target string `json:"target,omitempty"`
}

// relaySelf is the relay's own pubkey (NIP-11 "self"), fetched once it answers.
type relaySelf struct {
	url string
	mu  sync.Mutex
	pk  string
}

func (r *relaySelf) get(ctx context.Context) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pk != "" {
		return r.pk
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, protocol.HTTPBase(r.url), nil)
	if err != nil {
		return ""
	}
	req.Header.Set("Accept", "application/nostr+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var info struct {
		Self string `json:"self"`
	}
	if resp.StatusCode == http.StatusOK && json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&info) == nil && protocol.IsHex64(info.Self) {
		r.pk = info.Self
	}
	return r.pk
}

// toSystemRow reads a 40099 row, and says whether to show it: only when the relay signed it, or
// the agent it names as target did (an agent reporting on its own commands). Anyone else's row
// is a forgery as far as a reader can tell, and is dropped, as are rows that are not JSON.
func (c *chat) toSystemRow(ctx context.Context, ev *nostr.Event) (*systemRow, bool) {
	var row systemRow
	if json.Unmarshal([]byte(ev.Content), &row) != nil || row.Type == "" {
		return nil, false
	}
	if (row.Target == "" || ev.PubKey != row.Target) && ev.PubKey != c.self.get(ctx) {
		return nil, false
	}
	return &row, true
}

// turnRow is one turn's metric as the owner's browser sees it.
type turnRow struct {
	EventID      string   `json:"eventId"`
	Timestamp    string   `json:"timestamp"`
	ChannelID    string   `json:"channelId,omitempty"`
	TurnID       string   `json:"turnId,omitempty"`
	StopReason   string   `json:"stopReason,omitempty"`
	InputTokens  *uint64  `json:"inputTokens"`
	OutputTokens *uint64  `json:"outputTokens"`
	TotalTokens  *uint64  `json:"totalTokens"`
	CostUSD      *float64 `json:"costUsd"`
}

// maxTurnRows bounds the turns the console lists.
const maxTurnRows = 50

// turns reads the agent's recent turn metrics with the owner's key, newest first. A metric
// that does not decode and validate is left out.
func (c *chat) turns(ctx context.Context) ([]turnRow, error) {
	if c.agent == "" {
		return []turnRow{}, nil
	}
	evs, err := c.bridge.Query(ctx, client.F(nostr.Filter{Kinds: []int{protocol.KindTurnMetric}, Authors: []string{c.agent},
		Tags: nostr.TagMap{"p": {c.owner}}, Limit: maxTurnRows})...)
	if err != nil {
		return nil, err
	}
	out := []turnRow{}
	for i := range evs {
		m, err := turnmetric.Decode(c.ownerSK, &evs[i])
		if err != nil {
			continue
		}
		r := turnRow{EventID: evs[i].ID, Timestamp: m.Timestamp, ChannelID: m.ChannelID, TurnID: m.TurnID, StopReason: m.StopReason}
		if t := m.Turn; t != nil {
			r.InputTokens, r.OutputTokens, r.TotalTokens, r.CostUSD = t.InputTokens, t.OutputTokens, t.TotalTokens, t.CostUSD
		}
		out = append(out, r)
	}
	sort.SliceStable(out, func(i, j int) bool { return strings.Compare(out[i].Timestamp, out[j].Timestamp) > 0 })
	return out, nil
}
