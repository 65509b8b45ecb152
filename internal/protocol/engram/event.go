package engram

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
)

// Query limits upstream uses: a head lookup asks for a few versions of one d tag, a listing for
// everything the agent wrote for the owner.
const (
	HeadQueryLimit = 16
	ListQueryLimit = 5000
)

// Pair is one agent↔owner memory namespace seen from one side. Both sides derive the same
// conversation key, so both can address and read every record; only the agent side can write.
type Pair struct {
	Agent, Owner string // lowercase hex pubkeys
	key          [32]byte
	agentSecret  string // set on the agent side only
}

// AgentSide is the pair as the agent sees it: its own secret key and its owner's pubkey.
func AgentSide(agentSecret, ownerPubkey string) (*Pair, error) {
	agent, err := protocol.PublicKey(agentSecret)
	if err != nil {
		return nil, fmt.Errorf("agent key: %w", err)
	}
	owner := strings.ToLower(ownerPubkey)
	if owner == agent {
		return nil, errors.New("owner must differ from the agent")
	}
	k, err := protocol.ConversationKey(agentSecret, owner)
	if err != nil {
		return nil, fmt.Errorf("owner: %w", err)
	}
	return &Pair{Agent: agent, Owner: owner, key: k, agentSecret: agentSecret}, nil
}

// OwnerSide is the pair as the owner sees it (read-only): its secret key and the agent's pubkey.
func OwnerSide(ownerSecret, agentPubkey string) (*Pair, error) {
	owner, err := protocol.PublicKey(ownerSecret)
	if err != nil {
		return nil, fmt.Errorf("owner key: %w", err)
	}
	agent := strings.ToLower(agentPubkey)
	if owner == agent {
		return nil, errors.New("agent must differ from the owner")
	}
	k, err := protocol.ConversationKey(ownerSecret, agent)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	return &Pair{Agent: agent, Owner: owner, key: k}, nil
}

// ConversationKey is the NIP-44 v2 key K_c both sides share.
func (p *Pair) ConversationKey() [32]byte { return p.key }

// DTag derives a slug's d tag: lowercase hex HMAC-SHA256 under K_c of DTagDomain, 0x00, slug.
func (p *Pair) DTag(slug string) string { return DTag(p.key, slug) }

// DTag is Pair.DTag for a bare conversation key.
func DTag(key [32]byte, slug string) string {
	m := hmac.New(sha256.New, key[:])
	m.Write([]byte(DTagDomain))
	m.Write([]byte{0})
	m.Write([]byte(slug))
	return hex.EncodeToString(m.Sum(nil))
}

// HeadFilter is the query for every stored version of one slug.
func (p *Pair) HeadFilter(slug string) nostr.Filter {
	return nostr.Filter{Kinds: []int{protocol.KindEngram}, Authors: []string{p.Agent},
		Tags: nostr.TagMap{"d": {p.DTag(slug)}, "p": {p.Owner}}, Limit: HeadQueryLimit}
}

// ListFilter is the query for every record the agent keeps for this owner.
func (p *Pair) ListFilter() nostr.Filter {
	return nostr.Filter{Kinds: []int{protocol.KindEngram}, Authors: []string{p.Agent},
		Tags: nostr.TagMap{"p": {p.Owner}}, Limit: ListQueryLimit}
}

// Build encrypts and signs a record (agent side only). Tags are exactly d and p. The NIP-44
// nonce and then the BIP-340 aux are read from entropy (crypto/rand when nil).
func (p *Pair) Build(b Body, createdAt nostr.Timestamp, entropy io.Reader) (nostr.Event, error) {
	if p.agentSecret == "" {
		return nostr.Event{}, errors.New("only the agent can write its memory")
	}
	plain, err := b.Marshal()
	if err != nil {
		return nostr.Event{}, err
	}
	content, err := protocol.Encrypt44(string(plain), p.key, entropy)
	if err != nil {
		return nostr.Event{}, err
	}
	ev := nostr.Event{
		Kind:      protocol.KindEngram,
		CreatedAt: createdAt,
		Tags:      nostr.Tags{{"d", p.DTag(b.Slug)}, {"p", p.Owner}},
		Content:   content,
	}
	if err := protocol.SignEvent(&ev, p.agentSecret, entropy); err != nil {
		return nostr.Event{}, err
	}
	return ev, nil
}

// Open validates a record and returns its body. In order: kind and author; exactly one d tag of
// 64 lowercase hex; exactly one p tag naming the owner (any case); the id and signature (before
// any decryption); NIP-44 decryption; a strict body parse; the body's slug re-deriving to d.
func (p *Pair) Open(ev *nostr.Event) (Body, error) {
	if ev.Kind != protocol.KindEngram {
		return Body{}, fmt.Errorf("engram: kind %d, want %d", ev.Kind, protocol.KindEngram)
	}
	if ev.PubKey != p.Agent {
		return Body{}, errors.New("engram: not written by the agent")
	}
	var ds, ps []string
	for _, t := range ev.Tags {
		if len(t) == 0 {
			continue
		}
		switch t[0] {
		case "d":
			ds = append(ds, tagValue(t))
		case "p":
			ps = append(ps, tagValue(t))
		}
	}
	if len(ds) != 1 || !protocol.IsHex64(ds[0]) {
		return Body{}, errors.New("engram: want exactly one d tag of 64 lowercase hex")
	}
	if len(ps) != 1 || !strings.EqualFold(ps[0], p.Owner) {
		return Body{}, errors.New("engram: want exactly one p tag naming the owner")
	}
	if err := protocol.CheckEvent(ev); err != nil {
		return Body{}, fmt.Errorf("engram: %w", err)
	}
	plain, err := protocol.Decrypt44(ev.Content, p.key)
	if err != nil {
		return Body{}, fmt.Errorf("engram: %w", err)
	}
	b, err := ParseBody([]byte(plain))
	if err != nil {
		return Body{}, fmt.Errorf("engram: %w", err)
	}
	if p.DTag(b.Slug) != ds[0] {
		return Body{}, errors.New("engram: body slug does not derive the d tag")
	}
	return b, nil
}

func tagValue(t nostr.Tag) string {
	if len(t) < 2 {
		return ""
	}
	return t[1]
}

// Record is a validated event with its decrypted body.
type Record struct {
	Event nostr.Event
	Body  Body
}

// Newer reports whether a wins over b as head: greater created_at, then the lower id.
func Newer(a, b *nostr.Event) bool {
	if a.CreatedAt != b.CreatedAt {
		return a.CreatedAt > b.CreatedAt
	}
	return a.ID < b.ID
}

// Head picks the head of slug from a query answer, discarding every event that fails Open or
// belongs to another slug. ok is false when no event survives; invalid counts the discarded
// events that were not simply another slug's (so a caller can tell "none" from "unreadable").
func (p *Pair) Head(evs []nostr.Event, slug string) (head Record, ok bool, invalid int) {
	for i := range evs {
		b, err := p.Open(&evs[i])
		if err != nil {
			invalid++
			continue
		}
		if b.Slug != slug {
			continue
		}
		if !ok || Newer(&evs[i], &head.Event) {
			head, ok = Record{Event: evs[i], Body: b}, true
		}
	}
	return head, ok, invalid
}

// NextCreatedAt is the created_at for a new version: max(now, prior head + 1), so a write always
// supersedes the head even with a lagging clock. prior is 0 when there is no head.
func NextCreatedAt(now time.Time, prior nostr.Timestamp) nostr.Timestamp {
	t := nostr.Timestamp(now.Unix())
	if prior+1 > t {
		return prior + 1
	}
	return t
}

// Listing is one live memory in `buzz mem ls`.
type Listing struct {
	Slug      string `json:"slug"`
	EventID   string `json:"event_id"`
	CreatedAt int64  `json:"created_at"`
}

// String is the `buzz mem ls` text line: slug, created_at and event id, tab-separated.
func (l Listing) String() string { return fmt.Sprintf("%s\t%d\t%s", l.Slug, l.CreatedAt, l.EventID) }

// List validates a listing query's answer, takes the head of each d tag, drops core and
// tombstones, and sorts by slug. Invalid events are skipped: one bad record must not hide the rest.
func (p *Pair) List(evs []nostr.Event) []Listing {
	heads := map[string]Record{}
	for i := range evs {
		b, err := p.Open(&evs[i])
		if err != nil {
			continue
		}
		if cur, seen := heads[b.Slug]; !seen || Newer(&evs[i], &cur.Event) {
			heads[b.Slug] = Record{Event: evs[i], Body: b}
		}
	}
	out := make([]Listing, 0, len(heads))
	for _, r := range heads {
		if r.Body.IsCore() || r.Body.Tombstone {
			continue
		}
		out = append(out, Listing{Slug: r.Body.Slug, EventID: r.Event.ID, CreatedAt: int64(r.Event.CreatedAt)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Slug < out[j].Slug })
	return out
}

// ErrCoreUnreadable means the relay answered with core records but none could be validated and
// decrypted. The harness must then show no core section at all: an outage or a key mix-up must
// never look like an empty core (which would prompt the agent to start over).
var ErrCoreUnreadable = errors.New("core memory: no record could be validated and decrypted")

// Core applies the harness's decision table to the answer of HeadFilter(CoreSlug):
//   - no events: confirmed absence, found is false (the caller shows its onboarding nudge);
//   - a valid head with a core body: its profile, found is true;
//   - only valid records of other slugs (a relay that ignored #d): absence, found is false;
//   - events but none valid: ErrCoreUnreadable.
//
// A transport error never reaches here; the caller shows no section for it either.
func (p *Pair) Core(evs []nostr.Event) (profile string, found bool, err error) {
	head, ok, invalid := p.Head(evs, CoreSlug)
	switch {
	case ok:
		return head.Body.Text, true, nil
	case len(evs) > 0 && invalid == len(evs):
		return "", false, ErrCoreUnreadable
	}
	return "", false, nil
}
