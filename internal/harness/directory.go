package harness

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/buzz-harness/buzz/internal/client"
	"github.com/buzz-harness/buzz/internal/clock"
)

// The directory entry: the agent's kind-10100 fields Buzz Desktop reads to offer the agent in
// other people's @ autocomplete (agent_type, name, channels, channel_ids, capabilities, status,
// respond_to, respond_to_allowlist). The harness owns these fields and nothing else of the
// entry: every write reads the current entry and keeps the rest (channel_add_policy, fields
// other tools set; client.UpdateAgentProfile). It is reconciled once the start's discovery is
// done, and again when the channels the harness listens to change. --no-publish-directory
// turns it off.
//
// The loop only marks the entry stale (subscribe, leave) and, on its once-a-second tick, hands
// the fields it builds to a worker; the worker does the network round trips. A burst of
// membership changes goes out as one write: after a write the worker waits directoryDebounce
// and then sends the newest fields only.
const (
	directoryDebounce = 5 * time.Second
	directoryRetry    = 30 * time.Second // after a failed or refused write
	directoryTimeout  = 10 * time.Second // one read-merge-write
	// maxDirectoryChannels bounds the channels listed (those the owner shares first): 10,000
	// channel ids would not fit the relay's 512 KiB frame.
	maxDirectoryChannels = 1000
)

// directory is the hand-off between the loop and the worker.
type directory struct {
	stale   bool                // loop only: the fields changed since the last hand-off
	pending chan map[string]any // capacity 1: the newest fields the worker has not taken yet
}

func newDirectory() *directory { return &directory{pending: make(chan map[string]any, 1)} }

// directoryChanged marks the entry stale (a no-op with --no-publish-directory).
func (h *Harness) directoryChanged() {
	if h.dir != nil {
		h.dir.stale = true
	}
}

// flushDirectory hands a stale entry's fields to the worker.
func (h *Harness) flushDirectory() {
	if h.dir == nil || !h.dir.stale {
		return
	}
	h.dir.stale = false
	h.dir.offer(h.directoryFields())
}

// offer replaces fields the worker has not taken yet with f. The loop is the only sender, so
// the send never blocks.
func (d *directory) offer(f map[string]any) {
	select {
	case <-d.pending:
	default:
	}
	d.pending <- f
}

// directoryFields is the directory entry's fields as the loop sees them now.
func (h *Harness) directoryFields() map[string]any {
	all := slices.SortedFunc(maps.Values(h.chans.byID), func(a, b *channel) int {
		if a.ID < b.ID {
			return -1
		}
		if a.ID > b.ID {
			return 1
		}
		return 0
	})
	listed, _ := keepChannels(all, maxDirectoryChannels)
	names, ids := make([]string, len(listed)), make([]string, len(listed))
	for i, c := range listed {
		names[i], ids[i] = c.Name, c.ID
	}
	respondTo, allow := string(h.cfg.RespondTo), []string(nil)
	switch h.cfg.RespondTo {
	case RespondOwnerOnly:
		// As upstream: with a known owner, owner-only is an allowlist of the owner, which
		// Desktop understands.
		if h.cfg.Owner != "" {
			respondTo, allow = string(RespondAllowlist), []string{h.cfg.Owner}
		}
	case RespondAllowlist:
		allow = slices.Collect(maps.Keys(h.cfg.Allowlist))
		if h.cfg.Owner != "" && !h.cfg.Allowlist[h.cfg.Owner] {
			allow = append(allow, h.cfg.Owner) // the gate admits the owner too
		}
		slices.Sort(allow)
	}
	f := map[string]any{
		"agent_type":   "agent",
		"channels":     names,
		"channel_ids":  ids,
		"capabilities": []string{},
		"status":       "online",
		"respond_to":   respondTo,
		// nil removes it: outside allowlist mode a list left from an earlier run would mislead.
		"respond_to_allowlist": nil,
	}
	if allow != nil {
		f["respond_to_allowlist"] = allow
	}
	if h.cfg.SessionTitle != "" {
		f["name"] = h.cfg.SessionTitle
	}
	return f
}

// runDirectory is the worker: it writes each set of fields the loop hands over, no more than
// once per directoryDebounce, retrying a failed write after directoryRetry, until ctx ends.
func runDirectory(ctx context.Context, d *directory, clk clock.Clock, log *slog.Logger, write func(context.Context, map[string]any) error) {
	var last time.Time
	wait := func(dur time.Duration) bool {
		select {
		case <-ctx.Done():
			return false
		case <-clock.After(clk, dur):
			return true
		}
	}
	for {
		var f map[string]any
		select {
		case <-ctx.Done():
			return
		case f = <-d.pending:
		}
		if !last.IsZero() {
			if dur := last.Add(directoryDebounce).Sub(clk.Now()); dur > 0 && !wait(dur) {
				return
			}
		}
		for {
			select {
			case f = <-d.pending: // newer fields came while waiting
			default:
			}
			err := write(ctx, f)
			last = clk.Now()
			if err == nil {
				break
			}
			log.Warn("directory entry not published; retrying", "err", err, "in", directoryRetry)
			if !wait(directoryRetry) {
				return
			}
		}
	}
}

// writeDirectory is one read-merge-write of the directory fields; nothing is written when the
// entry already says the same.
func (h *Harness) writeDirectory(ctx context.Context, f map[string]any) error {
	ctx, cancel := context.WithTimeout(ctx, directoryTimeout)
	defer cancel()
	res, published, err := client.UpdateAgentProfile(ctx, h.relay.bridge, f, false)
	if err == nil && !res.Accepted {
		err = fmt.Errorf("relay refused it: %s", res.Message)
	}
	if err != nil {
		return err
	}
	if published {
		h.log.Info("directory entry published", "channels", len(f["channel_ids"].([]string)), "respond_to", f["respond_to"])
	}
	return nil
}
