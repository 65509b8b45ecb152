package harness

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nbd-wtf/go-nostr"
)

// Channel subscriptions come in groups: one REQ whose #h lists up to subGroupSize channels, so
// an agent in thousands of channels holds a few dozen subscriptions, far below the relay's
// per-connection limit (1,024), and each REQ stays a few KB (the relay's frame limit is 512 KB).
// Joining or leaving re-sends only the affected group's REQ.
//
// A group's REQ carries one filter per subFilterSize channels: the relay applies a filter's
// history limit to that filter alone, so a catch-up after downtime gets up to groupHistoryLimit
// stored events per ten channels rather than per hundred.
const (
	subGroupSize      = 100
	subFilterSize     = 10 // subGroupSize/subFilterSize filters per REQ; the relay allows 10
	groupHistoryLimit = 2000
	subGroupPfx       = "chs-"
)

// maxChannels bounds the channels one harness listens to. Past it, the owner's channels (those
// the owner created or added the agent to, and the home channel) win over the others (discovery
// puts them first; a new one takes a stranger's place), so a flood of channels from others never
// pushes out the owner's.
const maxChannels = 10_000

// subGroups maps channels (or, for thread follow, thread roots) to their group subscription.
// Only the loop touches it.
type subGroups struct {
	pfx    string      // subscription id prefix: subGroupPfx, or threadSubPfx (follow.go)
	groups []*subGroup // by number: subscription id pfx+number; nil = free
	of     map[string]int
}

type subGroup struct {
	ids map[string]bool
	// owner: the group holds channels the owner shares, and only those. Others' channels never
	// share a subscription with them, so what others do to their channels (a private one taken
	// away closes its whole subscription) never touches the owner's.
	owner bool
	// pending is the earliest since of channels added since the group's REQ was last sent
	// (zero: none); dirty says the REQ must be sent again.
	pending time.Time
	dirty   bool
	// sent is the since the group's last REQ asked from: where a group the relay closed
	// starts over.
	sent time.Time
}

func newSubGroups() subGroups { return subGroups{pfx: subGroupPfx, of: map[string]int{}} }

func groupSubID(n int) string { return subGroupPfx + strconv.Itoa(n) }

// groupOf parses a group subscription id.
func groupOf(subID string) (int, bool) {
	s, ok := strings.CutPrefix(subID, subGroupPfx)
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil && n >= 0
}

func (g *subGroups) has(id string) bool { _, ok := g.of[id]; return ok }

// add puts a channel in the first group of its kind (owner-shared or not) with room; since is
// where its events must start.
func (g *subGroups) add(id string, since time.Time, owner bool) {
	if g.has(id) {
		return
	}
	n := slices.IndexFunc(g.groups, func(x *subGroup) bool {
		return x == nil || (x.owner == owner && len(x.ids) < subGroupSize)
	})
	if n < 0 {
		n = len(g.groups)
		g.groups = append(g.groups, nil)
	}
	if g.groups[n] == nil {
		g.groups[n] = &subGroup{ids: map[string]bool{}, owner: owner}
	}
	grp := g.groups[n]
	grp.ids[id] = true
	if grp.pending.IsZero() || since.Before(grp.pending) {
		grp.pending = since
	}
	grp.dirty = true
	g.of[id] = n
}

// remove takes a channel out of its group.
func (g *subGroups) remove(id string) {
	n, ok := g.of[id]
	if !ok {
		return
	}
	delete(g.of, id)
	delete(g.groups[n].ids, id)
	g.groups[n].dirty = true
}

// members lists a group's channels, sorted.
func (g *subGroups) members(n int) []string {
	if n >= len(g.groups) || g.groups[n] == nil {
		return nil
	}
	out := make([]string, 0, len(g.groups[n].ids))
	for id := range g.groups[n].ids {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// count is the number of group subscriptions in use.
func (g *subGroups) count() int {
	n := 0
	for _, grp := range g.groups {
		if grp != nil {
			n++
		}
	}
	return n
}

// subscriber is what flush needs of the live session.
type subscriber interface {
	Subscribe(id string, filters ...nostr.Filter)
	Unsubscribe(id string)
	Resume(id string) (*nostr.Timestamp, bool)
}

// flush sends the REQ of every changed group (CLOSE for an emptied one). A group's since is the
// earliest of where the live session would resume it and where its new channels must start, so
// neither the old members nor the new lose anything; what is replayed the seen set and the
// journal drop.
func (g *subGroups) flush(live subscriber, filter func(ids []string) nostr.Filter) {
	for n, grp := range g.groups {
		if grp == nil || !grp.dirty {
			continue
		}
		grp.dirty = false
		sub := g.pfx + strconv.Itoa(n)
		if len(grp.ids) == 0 {
			live.Unsubscribe(sub)
			g.groups[n] = nil
			continue
		}
		since := grp.pending
		if resume, ok := live.Resume(sub); ok {
			from := time.Unix(0, 0)
			if resume != nil {
				from = resume.Time()
			}
			if since.IsZero() || from.Before(since) {
				since = from
			}
		}
		if since.IsZero() { // only removals from a group the relay closed: start where it did
			since = grp.sent
		}
		grp.pending, grp.sent = time.Time{}, since
		var fs []nostr.Filter
		for ids := range slices.Chunk(g.members(n), subFilterSize) {
			f := filter(ids)
			f.Since, f.Limit = ptrTS(since), groupHistoryLimit
			fs = append(fs, f)
		}
		live.Subscribe(sub, fs...)
	}
}

// closed records that the relay closed group n's subscription, which would have resumed from
// since: its channels continue from there when it is sent again.
func (g *subGroups) closed(n int, since time.Time) {
	if n < len(g.groups) && g.groups[n] != nil {
		grp := g.groups[n]
		grp.dirty, grp.sent = true, since
		if grp.pending.IsZero() || since.Before(grp.pending) {
			grp.pending = since
		}
	}
}
