package stack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/google/uuid"
	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/atomicfile"
	"github.com/buzz-harness/buzz/internal/client"
	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/protocol/ownerauth"
)

// state is what the data dir remembers besides keys: the general channel, the agent's name,
// and whose stack it is (the owner's npub and the owner dir its key was last loaded from), so a
// start that cannot find that key says so instead of making a new owner.
type state struct {
	GeneralChannel string `json:"generalChannel"`
	AgentName      string `json:"agentName"`
	Owner          string `json:"owner,omitempty"`
	OwnerDir       string `json:"ownerDir,omitempty"`
}

const stateFile = "stack.json"

func readState(dataDir string) (state, error) {
	var st state
	b, err := os.ReadFile(filepath.Join(dataDir, stateFile))
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("%s: %w", stateFile, err)
	}
	return st, nil
}

func writeState(dataDir string, st state) error {
	b, _ := json.MarshalIndent(st, "", "  ")
	return atomicfile.WriteFile(filepath.Join(dataDir, stateFile), append(b, '\n'), 0o600)
}

type booted struct {
	ChannelID string
	AgentName string
	AuthTag   string // the owner's NIP-OA attestation of the agent, BUZZ_AUTH_TAG form
}

// bootstrap makes sure the relay has what the stack needs, creating only what is missing: the
// #general channel, private, with owner and agent as members, and both profiles. It is
// idempotent, so a later start changes nothing (and a relay database that was deleted is
// repopulated); a #general made open by an older version is turned private. It also issues the
// agent's auth tag, signed by the owner, which the harness puts on the agent's channel add policy.
func bootstrap(ctx context.Context, relayURL, dataDir string, ids Identities, agentName string) (booted, error) {
	st, err := readState(dataDir)
	if err != nil {
		return booted{}, err
	}
	if st.AgentName != "" {
		agentName = st.AgentName // the name the agent was given on first start is kept
	}
	owner := client.NewBridge(relayURL, ids.Owner.SecretKey)
	agent := client.NewBridge(relayURL, ids.Agent.SecretKey)
	if err := waitHealthy(ctx, owner); err != nil {
		return booted{}, err
	}

	tag, err := ownerauth.Issue(ids.Owner.SecretKey, ids.Agent.Pubkey, "", nil)
	if err != nil {
		return booted{}, fmt.Errorf("agent auth tag: %w", err)
	}
	agent.AuthTag = tag.JSON() // on the agent's profile: what sibling agents and Desktop's "managed by" read

	// #general is private: what the owner tells the agent there is nobody else's to read.
	ch := st.GeneralChannel
	if ch != "" {
		evs, err := owner.Query(ctx, client.F(nostr.Filter{Kinds: []int{protocol.KindGroupMetadata}, Tags: nostr.TagMap{"d": {ch}}, Limit: 1})...)
		if err != nil {
			return booted{}, err
		}
		if len(evs) == 0 {
			ch = ""
		} else if protocol.ParseChannelMeta(&evs[0]).Visibility() != protocol.VisibilityPrivate {
			if err := publish(ctx, owner, protocol.KindEditMetadata, nostr.Tags{{"h", ch}, {"visibility", protocol.VisibilityPrivate}}, ""); err != nil {
				return booted{}, fmt.Errorf("make #general private: %w", err)
			}
		}
	}
	if ch == "" {
		ch = uuid.NewString()
		if err := publish(ctx, owner, protocol.KindCreateGroup, nostr.Tags{{"h", ch}, {"name", "general"},
			{"about", "Talk with your agent"}, {"visibility", protocol.VisibilityPrivate}, {"channel_type", protocol.TypeStream}}, ""); err != nil {
			return booted{}, fmt.Errorf("create #general: %w", err)
		}
	}
	mems, err := owner.Query(ctx, client.F(nostr.Filter{Kinds: []int{protocol.KindGroupMembers}, Tags: nostr.TagMap{"d": {ch}}, Limit: 1})...)
	if err != nil {
		return booted{}, err
	}
	isMember := false
	for i := range mems {
		isMember = isMember || protocol.IsMember(&mems[i], ids.Agent.Pubkey)
	}
	if !isMember {
		if err := publish(ctx, owner, protocol.KindPutUser, nostr.Tags{{"h", ch}, {"p", ids.Agent.Pubkey}}, ""); err != nil {
			return booted{}, fmt.Errorf("add the agent to #general: %w", err)
		}
	}
	if err := ensureProfile(ctx, agent, agentName, "Your Buzz agent", ids.Owner.Pubkey); err != nil {
		return booted{}, fmt.Errorf("agent profile: %w", err)
	}
	if err := ensureProfile(ctx, owner, "owner", "", ""); err != nil {
		return booted{}, fmt.Errorf("owner profile: %w", err)
	}
	if st.GeneralChannel != ch || st.AgentName != agentName {
		st.GeneralChannel, st.AgentName = ch, agentName
		if err := writeState(dataDir, st); err != nil {
			return booted{}, err
		}
	}
	return booted{ChannelID: ch, AgentName: agentName, AuthTag: tag.JSON()}, nil
}

// ensureProfile publishes a kind 0 profile unless one exists (a profile changed later by the
// user is kept). With owner set, the profile must carry an auth tag by that owner (the bridge's
// AuthTag): one that has a valid one is left alone, one without (an older stack's, or one a
// tool rewrote with empty tags) is published again, same content, with the tag.
func ensureProfile(ctx context.Context, b *client.Bridge, name, about, owner string) error {
	evs, err := b.Query(ctx, client.F(nostr.Filter{Kinds: []int{protocol.KindProfile}, Authors: []string{b.PublicKey()}, Limit: 1})...)
	if err != nil {
		return err
	}
	if cur := protocol.NewestEvent(evs); cur != nil {
		if owner == "" || ownerauth.IsSibling(cur, owner, time.Now().Unix()) {
			return nil
		}
		at := nostr.Now()
		if at <= cur.CreatedAt {
			at = cur.CreatedAt + 1 // a replaceable tie goes to the lower id
		}
		return publishEvent(ctx, b, &nostr.Event{Kind: protocol.KindProfile, Tags: nostr.Tags{}, Content: cur.Content, CreatedAt: at})
	}
	p := map[string]string{"name": name, "display_name": name}
	if about != "" {
		p["about"] = about
	}
	content, _ := json.Marshal(p)
	return publish(ctx, b, protocol.KindProfile, nostr.Tags{}, string(content))
}

func publish(ctx context.Context, b *client.Bridge, kind int, tags nostr.Tags, content string) error {
	return publishEvent(ctx, b, &nostr.Event{Kind: kind, Tags: tags, Content: content, CreatedAt: nostr.Now()})
}

func publishEvent(ctx context.Context, b *client.Bridge, ev *nostr.Event) error {
	res, err := b.Publish(ctx, ev)
	if err != nil {
		return err
	}
	if !res.Accepted {
		return errors.New(res.Message)
	}
	return nil
}

// waitHealthy polls the relay (served from this process, so normally ready at once).
func waitHealthy(ctx context.Context, b *client.Bridge) error {
	for {
		_, err := b.Count(ctx, client.F(nostr.Filter{Kinds: []int{protocol.KindProfile}, Authors: []string{b.PublicKey()}})...)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("relay did not answer: %w", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
