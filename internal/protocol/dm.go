package protocol

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"

	"github.com/google/uuid"
	"github.com/nbd-wtf/go-nostr"
)

// Direct-message command kinds (upstream buzz-core). A DM is a private channel of type "dm"
// whose members are its participants; the relay creates it when it receives a 41010.
const (
	KindDMOpen      = 41010 // ["p", participant]… (1–8, the signer is added); reply names channel_id
	KindDMAddMember = 41011 // ["h", dm], ["p", new participant]…: opens the DM of the merged set
	KindDMHide      = 41012 // ["h", dm]: hide from the signer's list (the relay republishes their 30622)
)

// MaxDMParticipants is the size cap of a DM, the signer included.
const MaxDMParticipants = 9

// DMChannelID is a DM's channel id: SHA-256 over its participants' sorted 32-byte keys
// (upstream's participant hash), the first 16 bytes as an RFC 9562 version-8 UUID.
func DMChannelID(sorted []string) string {
	h := sha256.New()
	for _, pk := range sorted {
		b, _ := hex.DecodeString(pk)
		h.Write(b)
	}
	var u uuid.UUID
	copy(u[:], h.Sum(nil))
	u[6] = u[6]&0x0f | 0x80 // version 8 (custom)
	u[8] = u[8]&0x3f | 0x80 // RFC 9562 variant
	return u.String()
}

// DMOpenChannel is the DM a 41010 opens: that of its signer and p keys (lowercased, sorted,
// de-duplicated); false when a key is not 64 hex or the set is too small or too large.
func DMOpenChannel(ev *nostr.Event) (string, bool) {
	if ev.Kind != KindDMOpen {
		return "", false
	}
	set := []string{ev.PubKey}
	for _, t := range ev.Tags {
		if len(t) >= 2 && t[0] == "p" {
			pk := strings.ToLower(t[1])
			if !IsHex64(pk) {
				return "", false
			}
			set = append(set, pk)
		}
	}
	slices.Sort(set)
	set = slices.Compact(set)
	if len(set) < 2 || len(set) > MaxDMParticipants {
		return "", false
	}
	return DMChannelID(set), true
}
