package relay

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/btcsuite/btcd/btcec/v2/schnorr"
	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/relay/store"
)

// channel_add_policy values (kind 10100 content); no profile, or any other value, means anyone.
const (
	policyAnyone    = "anyone"
	policyOwnerOnly = "owner_only"
	policyNobody    = "nobody"
)

// addPolicy reads pubkey's newest kind-10100 agent profile: its channel_add_policy, and the
// owner proven by a valid NIP-OA auth tag on that same event. Upstream records the owner from
// the auth tag presented at authentication; this relay keeps no per-user state, and the CLI
// puts the same tag on every event it signs, so the profile carries the proof itself.
func (r *Relay) addPolicy(ctx context.Context, pubkey string) (policy, owner string, err error) {
	f := store.Filter{Filter: nostr.Filter{Kinds: []int{protocol.KindAgentProfile}, Authors: []string{pubkey}}}
	evs, err := r.st.Query(ctx, r.relayAccess(), f, 1)
	if err != nil || len(evs) == 0 {
		return policyAnyone, "", err
	}
	return profilePolicy(&evs[0])
}

// profilePolicy extracts (policy, owner) from a kind-10100 event.
func profilePolicy(ev *nostr.Event) (policy, owner string, err error) {
	var body struct {
		Policy string `json:"channel_add_policy"`
	}
	if json.Unmarshal([]byte(ev.Content), &body) != nil {
		return policyAnyone, "", nil
	}
	policy = body.Policy
	if policy != policyOwnerOnly && policy != policyNobody {
		policy = policyAnyone
	}
	for _, t := range ev.Tags {
		if len(t) >= 4 && t[0] == "auth" {
			if verifyOwnerTag(ev, t) == nil {
				owner = t[1]
			}
			break
		}
	}
	return policy, owner, nil
}

// verifyOwnerTag checks a NIP-OA ["auth", owner, conditions, sig] tag on ev: owner's Schnorr
// signature over sha256("nostr:agent-auth:" + agent + ":" + conditions), owner != agent, and
// every condition satisfied by ev itself.
func verifyOwnerTag(ev *nostr.Event, tag nostr.Tag) error {
	owner, conds, sigHex := tag[1], tag[2], tag[3]
	if !protocol.IsHex64(owner) || owner == ev.PubKey {
		return errors.New("bad owner")
	}
	pkb, _ := hex.DecodeString(owner)
	pub, err := schnorr.ParsePubKey(pkb)
	if err != nil {
		return err
	}
	sigb, err := hex.DecodeString(sigHex)
	if err != nil {
		return err
	}
	sig, err := schnorr.ParseSignature(sigb)
	if err != nil {
		return err
	}
	digest := sha256.Sum256([]byte("nostr:agent-auth:" + ev.PubKey + ":" + conds))
	if !sig.Verify(digest[:], pub) {
		return errors.New("bad signature")
	}
	return checkConditions(conds, ev.Kind, int64(ev.CreatedAt))
}

// checkConditions evaluates NIP-OA clauses (kind=N, created_at<N, created_at>N, '&'-joined).
func checkConditions(conds string, kind int, createdAt int64) error {
	if conds == "" {
		return nil
	}
	for _, c := range strings.Split(conds, "&") {
		var ok bool
		switch {
		case strings.HasPrefix(c, "kind="):
			n, err := strconv.Atoi(c[len("kind="):])
			ok = err == nil && n == kind
		case strings.HasPrefix(c, "created_at<"):
			n, err := strconv.ParseInt(c[len("created_at<"):], 10, 64)
			ok = err == nil && createdAt < n
		case strings.HasPrefix(c, "created_at>"):
			n, err := strconv.ParseInt(c[len("created_at>"):], 10, 64)
			ok = err == nil && createdAt > n
		}
		if !ok {
			return errors.New("condition not met: " + c)
		}
	}
	return nil
}
