package harness

import (
	"github.com/nbd-wtf/go-nostr"
)

// listensTo asks the subscription rules (--subscribe, --config; internal/subrules) whether an
// event that passed the author gate is one the agent listens to, and with which prompt tag. The
// channel subscription already narrows what arrives; this decides each event.
func (h *Harness) listensTo(c *channel, ev *nostr.Event) (tag string, ok bool) {
	tag, ok = h.cfg.Rules.Match(ev, c.ID, h.agent)
	if !ok {
		h.log.Debug("no subscription rule matches the event", "event", ev.ID, "channel", c.ID, "kind", ev.Kind)
	}
	return tag, ok
}
