// Package ownerauth implements NIP-OA owner attestation: an owner key signs, once, that an agent
// key may publish under its own name, optionally bounded by kind and created_at clauses. The
// credential travels as a four-element tag ["auth", owner, conditions, sig], and as that tag's
// JSON in BUZZ_AUTH_TAG. Verifying it tells the harness and the CLI who the agent's owner is, and
// tells an agent which other agents are its siblings (same owner). Pure functions, no I/O.
package ownerauth

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
)

// EnvVar holds the agent's attestation as a JSON array.
const EnvVar = "BUZZ_AUTH_TAG"

// TagName is the tag's first element.
const TagName = "auth"

const domain = "nostr:agent-auth:"

// Tag is a parsed attestation. Conditions is kept exactly as signed: it is part of the signed
// message, so it must never be reordered or normalised.
type Tag struct {
	Owner      string // lowercase hex x-only pubkey
	Conditions string
	Sig        string // lowercase hex BIP-340 signature
}

// Parse reads the BUZZ_AUTH_TAG form: a JSON array of exactly four strings, "auth", the owner
// (64 lowercase hex), conditions in the NIP-OA grammar, and the signature (128 lowercase hex).
// It checks shape only; Verify checks the signature.
func Parse(s string) (Tag, error) {
	var elems []json.RawMessage
	if err := json.Unmarshal([]byte(strings.TrimSpace(s)), &elems); err != nil {
		return Tag{}, errors.New("auth tag: not a JSON array")
	}
	strs := make([]string, len(elems))
	for i, e := range elems {
		if len(e) == 0 || e[0] != '"' || json.Unmarshal(e, &strs[i]) != nil {
			return Tag{}, fmt.Errorf("auth tag: element %d is not a string", i)
		}
	}
	return FromTag(nostr.Tag(strs))
}

// FromTag reads an auth tag from an event's tags, with the same checks as Parse.
func FromTag(t nostr.Tag) (Tag, error) {
	if len(t) != 4 {
		return Tag{}, fmt.Errorf("auth tag: want 4 elements, got %d", len(t))
	}
	if t[0] != TagName {
		return Tag{}, fmt.Errorf("auth tag: first element is %q, want %q", t[0], TagName)
	}
	if !protocol.IsHex64(t[1]) {
		return Tag{}, errors.New("auth tag: owner must be 64 lowercase hex characters")
	}
	if err := ValidateConditions(t[2]); err != nil {
		return Tag{}, err
	}
	if !isLowerHex(t[3], 128) {
		return Tag{}, errors.New("auth tag: signature must be 128 lowercase hex characters")
	}
	return Tag{Owner: t[1], Conditions: t[2], Sig: t[3]}, nil
}

// NostrTag is the tag as it appears on an event.
func (t Tag) NostrTag() nostr.Tag { return nostr.Tag{TagName, t.Owner, t.Conditions, t.Sig} }

// JSON is the BUZZ_AUTH_TAG form: compact, with < > & unescaped (encoding/json's default HTML
// escaping would change the conditions' bytes).
func (t Tag) JSON() string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode([]string(t.NostrTag()))
	return strings.TrimSuffix(b.String(), "\n")
}

// message is SHA-256 of "nostr:agent-auth:" + agent + ":" + conditions.
func message(agent, conditions string) [32]byte {
	return sha256.Sum256([]byte(domain + agent + ":" + conditions))
}

// Issue signs an attestation by the owner for agentPubkey under conditions ("" for none).
// The BIP-340 aux randomness is read from entropy (crypto/rand when nil).
func Issue(ownerSecret, agentPubkey, conditions string, entropy io.Reader) (Tag, error) {
	signer, err := protocol.SignerFor(ownerSecret)
	if err != nil {
		return Tag{}, fmt.Errorf("owner key: %w", err)
	}
	agent := strings.ToLower(agentPubkey)
	if !protocol.IsHex64(agent) {
		return Tag{}, errors.New("agent pubkey must be 64 hex characters")
	}
	owner := signer.PublicKey()
	if agent == owner {
		return Tag{}, errors.New("owner and agent must differ (self-attestation is refused)")
	}
	if err := ValidateConditions(conditions); err != nil {
		return Tag{}, err
	}
	sig, err := signer.SignHash(message(agent, conditions), entropy)
	if err != nil {
		return Tag{}, err
	}
	return Tag{Owner: owner, Conditions: conditions, Sig: sig}, nil
}

// ResolveOwner reads BUZZ_AUTH_TAG's value and returns the owner it attests for agentPubkey, as
// the harness and the CLI do at startup. A caller that gets an error falls back to a configured
// owner (and says so).
func ResolveOwner(authTagJSON, agentPubkey string) (string, error) {
	tag, err := Parse(authTagJSON)
	if err != nil {
		return "", err
	}
	if err := tag.Verify(agentPubkey); err != nil {
		return "", err
	}
	return tag.Owner, nil
}

// Verify checks that the owner signed this attestation for agentPubkey. It does not look at the
// time bounds; use VerifyAt wherever the result grants authority.
func (t Tag) Verify(agentPubkey string) error {
	if _, err := FromTag(t.NostrTag()); err != nil {
		return err
	}
	if t.Owner == agentPubkey {
		return errors.New("auth tag: owner equals the agent (self-attestation)")
	}
	if !protocol.VerifyHash(message(agentPubkey, t.Conditions), t.Owner, t.Sig) {
		return errors.New("auth tag: the owner's signature does not verify for this agent")
	}
	return nil
}

// VerifyAt is Verify plus the created_at bounds, judged against the created_at of the signed
// event that carries or presents the tag (never the local clock). Both bounds are strict.
func (t Tag) VerifyAt(agentPubkey string, createdAt int64) error {
	if err := t.Verify(agentPubkey); err != nil {
		return err
	}
	return t.check(-1, createdAt)
}

// Allows reports whether an event of kind at createdAt satisfies every clause.
func (t Tag) Allows(kind int, createdAt int64) bool { return t.check(kind, createdAt) == nil }

// check evaluates the clauses; kind < 0 skips kind clauses.
func (t Tag) check(kind int, createdAt int64) error {
	if t.Conditions == "" {
		return nil
	}
	for _, c := range strings.Split(t.Conditions, "&") {
		name, n, err := parseClause(c)
		if err != nil {
			return err
		}
		switch {
		case name == "kind=" && kind >= 0 && int64(kind) != n:
			return fmt.Errorf("auth tag: allows kind %d only, not %d", n, kind)
		case name == "created_at<" && !(createdAt < n):
			return fmt.Errorf("auth tag: expired (created_at %d is not before %d)", createdAt, n)
		case name == "created_at>" && !(createdAt > n):
			return fmt.Errorf("auth tag: not yet valid (created_at %d is not after %d)", createdAt, n)
		}
	}
	return nil
}

// ValidateConditions checks the NIP-OA grammar: "" or clauses joined by "&", each kind=<0..65535>,
// created_at<<0..2^32-1> or created_at><0..2^32-1>, canonical decimals, no whitespace, no empty
// clause.
func ValidateConditions(c string) error {
	if c == "" {
		return nil
	}
	for _, clause := range strings.Split(c, "&") {
		if _, _, err := parseClause(clause); err != nil {
			return err
		}
	}
	return nil
}

func parseClause(c string) (name string, n int64, err error) {
	var max int64
	switch {
	case strings.HasPrefix(c, "kind="):
		name, max = "kind=", 65535
	case strings.HasPrefix(c, "created_at<"):
		name, max = "created_at<", 4294967295
	case strings.HasPrefix(c, "created_at>"):
		name, max = "created_at>", 4294967295
	case c == "":
		return "", 0, errors.New("auth tag: empty clause in conditions (leading, trailing or double &)")
	default:
		return "", 0, fmt.Errorf("auth tag: unsupported condition %q", c)
	}
	d := c[len(name):]
	if d == "" || len(d) > 10 || (len(d) > 1 && d[0] == '0') || !isDigits(d) {
		return "", 0, fmt.Errorf("auth tag: %q needs a canonical decimal", c)
	}
	n, _ = strconv.ParseInt(d, 10, 64)
	if n > max {
		return "", 0, fmt.Errorf("auth tag: %q is out of range (max %d)", c, max)
	}
	return name, n, nil
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func isLowerHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// OfEvent returns the event's attestation if it has exactly one auth tag and that tag verifies
// for the event's author and allows the event's kind and created_at. The event's own id and
// signature are checked first: an auth tag on an invalid event proves nothing. Two or more auth
// tags count as none.
func OfEvent(ev *nostr.Event) (Tag, error) {
	if err := protocol.CheckEvent(ev); err != nil {
		return Tag{}, err
	}
	var found []nostr.Tag
	for _, t := range ev.Tags {
		if len(t) > 0 && t[0] == TagName {
			found = append(found, t)
		}
	}
	if len(found) != 1 {
		return Tag{}, fmt.Errorf("auth tag: event has %d auth tags, want exactly one", len(found))
	}
	tag, err := FromTag(found[0])
	if err != nil {
		return Tag{}, err
	}
	if err := tag.Verify(ev.PubKey); err != nil {
		return Tag{}, err
	}
	if err := tag.check(ev.Kind, int64(ev.CreatedAt)); err != nil {
		return Tag{}, err
	}
	return tag, nil
}

// IsSibling reports whether profile (the author's kind-0 event) carries a valid attestation by
// owner, making its author another agent of the same owner. The profile must be a validly signed
// kind 0 with exactly one auth tag, naming owner (any case), verifying for the profile's author,
// within its time bounds both at the profile's created_at and at now (unix seconds): a holder
// who backdates its profile cannot revive an attestation that has expired since. Anything else is
// "not a sibling".
func IsSibling(profile *nostr.Event, owner string, now int64) bool {
	if profile == nil || profile.Kind != protocol.KindProfile {
		return false
	}
	var found []nostr.Tag
	for _, t := range profile.Tags {
		if len(t) > 0 && t[0] == TagName {
			found = append(found, t)
		}
	}
	if len(found) != 1 || len(found[0]) < 2 || !strings.EqualFold(found[0][1], owner) {
		return false
	}
	if protocol.CheckEvent(profile) != nil {
		return false
	}
	tag, err := FromTag(found[0])
	if err != nil {
		return false
	}
	return tag.VerifyAt(profile.PubKey, int64(profile.CreatedAt)) == nil && tag.check(-1, now) == nil
}
