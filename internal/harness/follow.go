package harness

import (
	"cmp"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/atomicfile"
	"github.com/buzz-harness/buzz/internal/protocol"
)

// Thread follow (--thread-follow): once the agent has replied in a thread, a later message there
// from someone the author gate admits starts a turn without an @mention, as if it had mentioned
// the agent. What is followed is one small set, thread root → when the agent last replied there,
// kept by the loop and written to the state dir by a writer of its own, at most once per
// busyStateEvery: a busy agent starts threads faster than a 1,024-thread file is worth
// rewriting. The agent's own messages reach the harness on one subscription (subOwn), which
// feeds the set; the followed threads come in on group subscriptions keyed by their roots
// (threadSubPfx, beside the channel groups) that carry no #p filter, so the agent's other
// channels stay mention-only.
//
// Rules: only threads the agent itself replied in, within ThreadFollowTTL of its last reply
// there, at most maxFollowed threads (the longest quiet dropped first); a message by an agent
// (this one or any other) never continues a thread on its own, so two agents cannot keep each
// other talking; a message that mentions someone and not the agent is addressed to them.

const (
	// DefaultThreadFollowTTL is how long after the agent's last reply in a thread it follows it.
	DefaultThreadFollowTTL = 24 * time.Hour
	// maxFollowed bounds the followed threads per agent.
	maxFollowed  = 1024
	threadSubPfx = "thr-"
	// subOwn is the subscription to the agent's own messages.
	subOwn = "own-msgs"
)

// followedThread is one followed thread.
type followedThread struct {
	Channel string `json:"channel"`
	Root    string `json:"root"`
	Last    int64  `json:"last"` // unix seconds of the agent's newest reply there
}

// followSet is the followed threads by root. The loop changes it; the mutex is for the file
// writer's snapshot.
type followSet struct {
	mu      sync.Mutex
	threads map[string]followedThread
	ttl     time.Duration
	file    *atomicfile.Snapshots
	log     *slog.Logger
	// fresh: there was no file to read (a new state dir), so the set is rebuilt from the agent's
	// messages on the relay.
	fresh bool
	// floor is where this run's subscriptions start (catchUpSince): a thread followed from an
	// old reply is read from there, not from the reply, which earlier runs (or none) handled.
	floor time.Time
}

// followFile is where an agent's followed threads are kept.
func followFile(stateDir, agent string) string {
	return filepath.Join(stateDir, "follow-"+agent+".json")
}

// loadFollowSet reads path (a missing or unreadable file starts an empty, fresh set) and starts
// its writer.
func loadFollowSet(path string, ttl time.Duration, log *slog.Logger, opts ...atomicfile.Option) *followSet {
	f := &followSet{threads: map[string]followedThread{}, ttl: ttl, log: log}
	raw, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		f.fresh = true
	case err != nil:
		log.Warn("cannot read the followed threads; rebuilding them from the relay", "path", path, "err", err)
		f.fresh = true
	default:
		var list []followedThread
		if json.Unmarshal(raw, &list) != nil {
			log.Warn("ignoring an unreadable followed-threads file; rebuilding it from the relay", "path", path)
			f.fresh = true
		}
		for _, t := range list {
			if protocol.IsHex64(t.Root) && protocol.IsUUID(t.Channel) {
				f.threads[t.Root] = t
			}
		}
	}
	f.file = atomicfile.NewSnapshots(path, 0o600, f.snapshot, busyStateOpts(opts)...)
	return f
}

func (f *followSet) snapshot() ([]byte, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	list := make([]followedThread, 0, len(f.threads))
	for _, root := range slices.Sorted(maps.Keys(f.threads)) {
		list = append(list, f.threads[root])
	}
	raw, _ := json.Marshal(list)
	return raw, true
}

// note records the agent's reply at `at` in root's thread of channel. It reports whether the
// thread is newly followed, and the root dropped to make room for it ("" for none).
func (f *followSet) note(channel, root string, at, now time.Time) (added bool, evicted string) {
	if now.Sub(at) > f.ttl {
		return false, "" // an old reply (history): its thread is no longer followed
	}
	f.mu.Lock()
	old, had := f.threads[root]
	switch {
	case had && old.Channel != channel:
		f.mu.Unlock()
		return false, "" // the same root in another channel: not a reply in this thread
	case had && old.Last >= at.Unix():
		f.mu.Unlock()
		return false, ""
	}
	if !had && len(f.threads) >= maxFollowed {
		evicted = f.oldestLocked()
		delete(f.threads, evicted)
	}
	f.threads[root] = followedThread{Channel: channel, Root: root, Last: at.Unix()}
	f.mu.Unlock()
	f.file.Mark()
	return !had, evicted
}

// oldestLocked is the thread whose last reply is oldest (the smaller root on a tie).
func (f *followSet) oldestLocked() string {
	var out followedThread
	for _, t := range f.threads {
		if out.Root == "" || t.Last < out.Last || t.Last == out.Last && t.Root < out.Root {
			out = t
		}
	}
	return out.Root
}

// follows reports whether channel's thread root is followed at now.
func (f *followSet) follows(channel, root string, now time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.threads[root]
	return ok && t.Channel == channel && now.Unix()-t.Last <= int64(f.ttl/time.Second)
}

// remove forgets the threads keep refuses, and returns their roots.
func (f *followSet) remove(drop func(followedThread) bool) []string {
	f.mu.Lock()
	var out []string
	for root, t := range f.threads {
		if drop(t) {
			delete(f.threads, root)
			out = append(out, root)
		}
	}
	f.mu.Unlock()
	if len(out) > 0 {
		f.file.Mark()
	}
	return out
}

// expired forgets the threads past the TTL at now, and returns their roots.
func (f *followSet) expired(now time.Time) []string {
	return f.remove(func(t followedThread) bool { return now.Unix()-t.Last > int64(f.ttl/time.Second) })
}

// list is every followed thread.
func (f *followSet) list() []followedThread {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Collect(maps.Values(f.threads))
}

// close writes what is pending and stops the writer.
func (f *followSet) close() {
	if err := f.file.Close(); err != nil {
		f.log.Warn("cannot record the followed threads", "err", err)
	}
}

// followOn: thread follow is on, and means something (with --no-mention-filter every message
// arrives anyway).
func (h *Harness) followOn() bool { return !h.cfg.NoThreadFollow && !h.cfg.NoMentionFilter }

// startFollowing subscribes to the agent's own messages and to the followed threads whose
// channels the agent is still in, from since. A fresh follow set is rebuilt from the agent's
// messages of the last TTL, which that subscription's history brings.
func (h *Harness) startFollowing(since time.Time) {
	own := nostr.Filter{Kinds: protocol.MessageKinds, Authors: []string{h.agent}, Since: ptrTS(since)}
	if h.follows != nil {
		h.follows.floor = since
		gone := h.follows.remove(func(t followedThread) bool { return h.chans.byID[t.Channel] == nil })
		gone = append(gone, h.follows.expired(h.clock.Now())...)
		if len(gone) > 0 {
			h.log.Info("no longer following threads", "threads", len(gone))
		}
		list := h.follows.list()
		for _, t := range list {
			h.chans.threads.add(t.Root, since, false)
		}
		from := "state dir"
		if h.follows.fresh {
			own.Since, own.Limit = ptrTS(h.clock.Now().Add(-h.cfg.ThreadFollowTTL)), maxFollowed
			from = "relay history" // the own-messages subscription's history brings them
		}
		h.log.Info("followed threads", "threads", len(list), "from", from)
	}
	h.live.Subscribe(subOwn, own)
}

// ownMessage takes in one of the agent's own messages: it may answer a turn that is running or
// being checked (reply.go), and its thread is followed from now on.
func (h *Harness) ownMessage(ev *nostr.Event) {
	chID, ok := protocol.ChannelID(ev.Tags)
	if !ok || ev.PubKey != h.agent || h.chans.byID[chID] == nil {
		return
	}
	h.noteReply(ev)
	if h.follows == nil || protocol.IsPermissionRequest(ev.Tags) {
		return // a question to the owner is not a reply in the thread
	}
	root := cmp.Or(protocol.ParseThread(ev.Tags).Root, ev.ID) // a top-level post starts a thread
	added, evicted := h.follows.note(chID, root, ev.CreatedAt.Time(), h.clock.Now())
	if evicted != "" {
		h.chans.threads.remove(evicted)
	}
	if added {
		from := ev.CreatedAt.Time()
		if from.Before(h.follows.floor) {
			from = h.follows.floor
		}
		h.chans.threads.add(root, from, false)
		h.log.Debug("following thread", "channel", chID, "root", root)
	}
}

// followable reports whether an event that does not mention the agent continues a followed
// thread of channel c. The author gate (and whether the author is an agent) is admit's.
func (h *Harness) followable(c *channel, ev *nostr.Event) bool {
	if h.follows == nil || !slices.Contains(protocol.MessageKinds, ev.Kind) || agentMarked(ev) {
		return false
	}
	if len(protocol.Mentions(ev.Tags)) > 0 {
		return false // addressed to the people it mentions
	}
	root := protocol.ParseThread(ev.Tags).Root
	return root != "" && h.follows.follows(c.ID, root, h.clock.Now())
}

// agentMarked reports an event that says an agent wrote it: a NIP-OA auth tag (upstream's CLI
// puts the agent's on everything it signs), or a harness's failure notice or fallback reply.
func agentMarked(ev *nostr.Event) bool {
	for _, t := range ev.Tags {
		switch {
		case len(t) == 4 && t[0] == "auth":
			return true
		case len(t) >= 2 && (t[0] == FailureMarker || t[0] == FallbackMarker) && t[1] == "1":
			return true
		}
	}
	return false
}

// threadFilter is the live filter of a group of followed threads: their messages, whoever
// wrote them and whomever they mention.
func (h *Harness) threadFilter(roots []string) nostr.Filter {
	kinds := slices.DeleteFunc(slices.Clone(protocol.MessageKinds), func(k int) bool { return !slices.Contains(h.cfg.Kinds, k) })
	return nostr.Filter{Kinds: kinds, Tags: nostr.TagMap{"e": roots}}
}

// unfollow stops following threads (their channel was left, or they expired).
func (h *Harness) unfollow(roots []string) {
	for _, r := range roots {
		h.chans.threads.remove(r)
	}
}
