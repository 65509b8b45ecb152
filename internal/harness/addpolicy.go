package harness

import (
	"context"
	"fmt"

	"github.com/buzz-harness/buzz/internal/client"
)

// publishAddPolicy publishes the agent's kind-10100 channel_add_policy once at start, when one is
// configured, with the NIP-OA auth tag from which the relay learns the owner that owner_only
// admits. A policy that cannot be published stops the start: running without the protection the
// operator asked for would be worse than not running.
func (h *Harness) publishAddPolicy(ctx context.Context) error {
	if h.cfg.ChannelAddPolicy == "" {
		return nil
	}
	res, err := client.PublishAddPolicy(ctx, h.relay.bridge, h.cfg.ChannelAddPolicy)
	if err == nil && !res.Accepted {
		err = fmt.Errorf("relay refused it: %s", res.Message)
	}
	if err != nil {
		return fmt.Errorf("publish channel add policy: %w", err)
	}
	h.log.Info("channel add policy published", "policy", h.cfg.ChannelAddPolicy, "auth_tag", h.cfg.AuthTag != "")
	return nil
}
