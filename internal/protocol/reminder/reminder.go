// Package reminder is NIP-ER: private reminders as addressable kind-30300 events. The relay sees
// only the author, a random d tag and the public not_before due time; what the reminder is about
// (its target, note and status) is NIP-44-encrypted to the author. The buzz CLI and buzz-acp
// both build and read reminders here.
package reminder

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
)

// Kind is NIP-ER's reminder kind.
const Kind = protocol.KindPrivateReminder

// Statuses.
const (
	Pending   = "pending"
	Done      = "done"
	Cancelled = "cancelled"
)

// Target is what a reminder is about: a message. ChannelID and RootID are ours (NIP-ER ignores
// unknown fields): the channel and thread a harness wakes the agent in.
type Target struct {
	ID           string   `json:"id,omitempty"`
	A            string   `json:"a,omitempty"`
	Relays       []string `json:"relays,omitempty"`
	Preview      string   `json:"preview,omitempty"`
	EventID      string   `json:"eventId,omitempty"`
	ChannelID    string   `json:"channelId,omitempty"`
	AuthorPubkey string   `json:"authorPubkey,omitempty"`
	RootID       string   `json:"rootId,omitempty"`
}

// Content is the decrypted body.
type Content struct {
	Target *Target `json:"target,omitempty"`
	Status string  `json:"status"`
	Note   string  `json:"note,omitempty"`
}

// Reminder is one decoded head.
type Reminder struct {
	D         string       `json:"reminder_id"`
	EventID   string       `json:"event_id"`
	NotBefore *int64       `json:"not_before"`
	CreatedAt int64        `json:"created_at"`
	Content   Content      `json:"content"`
	Event     *nostr.Event `json:"-"`
}

// Due reports whether r is pending and its not_before has passed at now.
func (r Reminder) Due(now time.Time) bool {
	return r.Content.Status == Pending && r.NotBefore != nil && *r.NotBefore <= now.Unix()
}

// NewID is a fresh random d tag (128 bits, as NIP-ER asks).
func NewID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// maxNotBefore is the largest not_before NIP-ER allows (2^53 - 1).
const maxNotBefore = 9007199254740991

// ParseNotBefore reads a not_before tag value strictly: ASCII digits, no sign, no leading zero
// (except "0"), at most 2^53 - 1.
func ParseNotBefore(s string) (int64, error) {
	bad := errors.New("malformed not_before")
	if s == "" || len(s) > 16 || (len(s) > 1 && s[0] == '0') {
		return 0, bad
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, bad
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n > maxNotBefore {
		return 0, bad
	}
	return n, nil
}

// CheckTags is the relay's check of a reminder's public tags: exactly one non-empty d, at most
// one valid not_before, and an expiration (if any) after it.
func CheckTags(tags nostr.Tags) error {
	var ds, nbs []string
	var exp string
	for _, t := range tags {
		if len(t) < 2 {
			continue
		}
		switch t[0] {
		case "d":
			ds = append(ds, t[1])
		case "not_before":
			nbs = append(nbs, t[1])
		case "expiration":
			exp = t[1]
		}
	}
	if len(ds) != 1 || ds[0] == "" {
		return errors.New("a reminder needs exactly one non-empty d tag")
	}
	if len(nbs) > 1 {
		return errors.New("malformed not_before")
	}
	if len(nbs) == 1 {
		nb, err := ParseNotBefore(nbs[0])
		if err != nil {
			return err
		}
		if exp != "" {
			if e, err := strconv.ParseInt(exp, 10, 64); err == nil && e <= nb {
				return errors.New("expiration before not_before")
			}
		}
	}
	return nil
}

// NotBefore is a reminder event's due time, if it has exactly one valid not_before.
func NotBefore(ev *nostr.Event) (int64, bool) {
	var vals []string
	for _, t := range ev.Tags {
		if len(t) >= 2 && t[0] == "not_before" {
			vals = append(vals, t[1])
		}
	}
	if len(vals) != 1 {
		return 0, false
	}
	n, err := ParseNotBefore(vals[0])
	return n, err == nil
}

func selfKey(sk string) ([32]byte, error) {
	pk, err := protocol.PublicKey(sk)
	if err != nil {
		return [32]byte{}, err
	}
	return protocol.ConversationKey(sk, pk)
}

// Build signs a reminder version: d, the content encrypted to the author, and notBefore (nil
// for a done or cancelled one, which then expires in 30 days, as NIP-ER suggests).
func Build(sk, d string, c Content, notBefore *int64, createdAt time.Time) (*nostr.Event, error) {
	if c.Status == Pending && (c.Target == nil && c.Note == "") {
		return nil, errors.New("a pending reminder needs a target or a note")
	}
	body, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	key, err := selfKey(sk)
	if err != nil {
		return nil, err
	}
	ct, err := protocol.Encrypt44(string(body), key, rand.Reader)
	if err != nil {
		return nil, err
	}
	tags := nostr.Tags{{"d", d}}
	if notBefore != nil {
		tags = append(tags, nostr.Tag{"not_before", strconv.FormatInt(*notBefore, 10)})
	} else {
		tags = append(tags, nostr.Tag{"expiration", strconv.FormatInt(createdAt.Add(30*24*time.Hour).Unix(), 10)})
	}
	tags = append(tags, nostr.Tag{"alt", "Encrypted reminder"})
	ev := &nostr.Event{Kind: Kind, CreatedAt: nostr.Timestamp(createdAt.Unix()), Tags: tags, Content: ct}
	if err := ev.Sign(sk); err != nil {
		return nil, err
	}
	return ev, nil
}

// Open verifies and decrypts a reminder of the key's own. A done or cancelled version keeps no
// due time even if it carries one (NIP-ER: terminal state wins).
func Open(sk string, ev *nostr.Event) (Reminder, error) {
	pk, err := protocol.PublicKey(sk)
	if err != nil {
		return Reminder{}, err
	}
	if ev.Kind != Kind || ev.PubKey != pk {
		return Reminder{}, errors.New("not a reminder of this key")
	}
	if err := protocol.CheckEvent(ev); err != nil {
		return Reminder{}, err
	}
	key, err := selfKey(sk)
	if err != nil {
		return Reminder{}, err
	}
	plain, err := protocol.Decrypt44(ev.Content, key)
	if err != nil {
		return Reminder{}, fmt.Errorf("decrypt: %w", err)
	}
	var c Content
	if err := json.Unmarshal([]byte(plain), &c); err != nil {
		return Reminder{}, fmt.Errorf("content: %w", err)
	}
	switch c.Status {
	case Pending, Done, Cancelled:
	default:
		return Reminder{}, fmt.Errorf("unknown status %q", c.Status)
	}
	r := Reminder{D: protocol.TagValue(ev.Tags, "d"), EventID: ev.ID, CreatedAt: int64(ev.CreatedAt), Content: c, Event: ev}
	if nb, ok := NotBefore(ev); ok && c.Status == Pending {
		r.NotBefore = &nb
	}
	return r, nil
}

// Heads decodes the newest readable version of each reminder (NIP-01: newest created_at, then
// lowest id), skipping what does not open.
func Heads(sk string, evs []nostr.Event) []Reminder {
	best := map[string]Reminder{}
	var order []string
	for i := range evs {
		r, err := Open(sk, &evs[i])
		if err != nil {
			continue
		}
		old, ok := best[r.D]
		if !ok {
			order = append(order, r.D)
		}
		if !ok || r.CreatedAt > old.CreatedAt || (r.CreatedAt == old.CreatedAt && r.EventID < old.EventID) {
			best[r.D] = r
		}
	}
	out := make([]Reminder, 0, len(order))
	for _, d := range order {
		out = append(out, best[d])
	}
	return out
}
