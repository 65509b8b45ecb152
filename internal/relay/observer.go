package relay

import (
	"context"
	"sync"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/protocol/observerframe"
	"github.com/buzz-harness/buzz/internal/relay/store"
)

// NIP-AO observer frames (kind 24200) pass only between an agent and its owner. The relay keeps
// no enrolment table, so it learns an agent's owner from NIP-OA proof the agent itself presented:
// an auth tag on one of its frames (remembered here, per node) or on its newest kind-10100 or
// kind-0 profile (stored, so every node sees it).

// ObserverTelemetryPerSecond is the per-agent telemetry rate (upstream's); frames over it are
// refused and counted, the connection stays.
const ObserverTelemetryPerSecond = observerframe.TelemetryPerSecond

// maxObserverAgents bounds the in-memory maps; past it, stale entries are dropped.
const maxObserverAgents = 4096

type observerBook struct {
	mu     sync.Mutex
	owners map[string]string // agent → owner proven by an auth tag on the agent's frame
}

// learn records owner as agent's, proven by a frame the agent signed.
func (b *observerBook) learn(agent, owner string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.owners == nil || len(b.owners) >= maxObserverAgents {
		b.owners = map[string]string{}
	}
	b.owners[agent] = owner
}

func (b *observerBook) learned(agent string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.owners[agent]
}

// ObserverFramesDropped is how many telemetry frames the rate limit refused since start.
func (r *Relay) ObserverFramesDropped() int64 { return r.telemetry.refused.Load() }

// frameOwner is the owner an auth tag on ev proves for ev's author ("" = none or invalid).
func frameOwner(ev *nostr.Event) string {
	for _, t := range ev.Tags {
		if len(t) == 4 && t[0] == "auth" && verifyOwnerTag(ev, t) == nil {
			return t[1]
		}
	}
	return ""
}

// agentOwner is the owner proven for agent: a frame it sent to this node, else its newest
// kind-10100 profile, else its newest kind-0 profile ("" = unknown).
func (r *Relay) agentOwner(ctx context.Context, agent string) (string, error) {
	if o := r.observers.learned(agent); o != "" {
		return o, nil
	}
	if _, o, err := r.addPolicy(ctx, agent); err != nil || o != "" {
		return o, err
	}
	f := store.Filter{Filter: nostr.Filter{Kinds: []int{protocol.KindProfile}, Authors: []string{agent}}}
	evs, err := r.st.Query(ctx, r.relayAccess(), f, 1)
	if err != nil || len(evs) == 0 {
		return "", err
	}
	return frameOwner(&evs[0]), nil
}
