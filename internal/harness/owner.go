package harness

import (
	"fmt"

	"github.com/buzz-harness/buzz/internal/protocol/ownerauth"
)

// resolveOwner takes the owner from the agent's NIP-OA attestation (BUZZ_AUTH_TAG) when there is
// one: the owner who signed for this agent key is the owner, whatever --agent-owner says.
// Without a tag, --agent-owner stands. A tag that does not parse or verify is a startup error,
// not upstream's warning-and-fallback: the same tag goes on the agent's kind 10100 and to the
// MCP server, so running on with a broken credential would fail later and more quietly.
func (c *Config) resolveOwner(agent string) error {
	if c.AuthTag == "" {
		return nil
	}
	owner, err := ownerauth.ResolveOwner(c.AuthTag, agent)
	if err != nil {
		return fmt.Errorf("%s: %w", ownerauth.EnvVar, err)
	}
	if c.Owner != "" && c.Owner != owner && c.Logger != nil {
		c.Logger.Warn("the auth tag names a different owner than --agent-owner; the auth tag wins", "auth_tag_owner", owner, "agent_owner", c.Owner)
	}
	c.Owner = owner
	return nil
}
