// Package observerframe implements NIP-AO observer frames: ephemeral kind-24200 events between an
// agent and its owner, NIP-44 encrypted, tagged exactly [p, recipient], [agent, agent],
// [frame, telemetry|control]. Telemetry goes agent → owner (what the harness is doing), control
// owner → agent (cancel a turn, switch model, answer a permission question). Build* is the
// sending side, Open the receiving side, Addressing the envelope the relay checks. Pure
// functions, no I/O.
package observerframe

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
)

// Frame directions (the frame tag's value).
const (
	Telemetry = "telemetry"
	Control   = "control"
)

// Telemetry kinds (Event.Kind).
const (
	KindHarnessStarted     = "harness_started"
	KindAgentInitialized   = "agent_initialized"
	KindSessionResolved    = "session_resolved"
	KindTurnStarted        = "turn_started"
	KindACPRead            = "acp_read"
	KindACPWrite           = "acp_write"
	KindTurnLiveness       = "turn_liveness"
	KindTurnCompleted      = "turn_completed"
	KindTurnError          = "turn_error"
	KindPermissionTerminal = "permission_terminal"
	KindControlResult      = "control_result"
)

// Control types (Command.Type).
const (
	CancelTurn         = "cancel_turn"
	SwitchModel        = "switch_model"
	SwitchEffort       = "switch_effort"
	PermissionDecision = "permission_decision"
)

// TelemetryPerSecond is the relay's per-agent telemetry rate (upstream's): relays refuse the
// frames over it, so senders keep under it.
const TelemetryPerSecond = 100

// MaxSkew is how far a control frame's created_at may be from the receiver's clock.
const MaxSkew = 300 * time.Second

// MaxPlaintext bounds a telemetry frame's JSON before encryption: NIP-44 v2 takes at most
// 65,535 bytes, and the envelope must fit the relay's frame cap with room to spare.
const MaxPlaintext = 60_000

// Event is a telemetry frame's payload (NIP-AO ObserverEvent). Payload is the kind's data; for
// acp_read / acp_write it is the raw ACP JSON-RPC message.
type Event struct {
	Seq        uint64          `json:"seq"`
	Timestamp  string          `json:"timestamp"` // RFC 3339 with milliseconds
	Kind       string          `json:"kind"`
	AgentIndex int             `json:"agentIndex"`
	ChannelID  string          `json:"channelId,omitempty"`
	SessionID  string          `json:"sessionId,omitempty"`
	TurnID     string          `json:"turnId,omitempty"`
	Payload    json.RawMessage `json:"payload"`
}

// Command is a control frame's payload; which fields are set depends on Type.
type Command struct {
	Type         string `json:"type"`
	ChannelID    string `json:"channelId,omitempty"`
	ModelID      string `json:"modelId,omitempty"`
	Effort       string `json:"effort,omitempty"`
	RequestNonce string `json:"requestNonce,omitempty"`
	OptionID     string `json:"optionId,omitempty"`
}

// Timestamp formats t as frames carry it.
func Timestamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

// BuildTelemetry encrypts and signs one telemetry frame from the agent to its owner. created_at
// is now. The NIP-44 nonce and the signature's aux randomness come from entropy (crypto/rand
// when nil). auth, when not nil, is the agent's NIP-OA tag, carried so the relay learns the owner
// from the agent itself. A frame whose JSON exceeds MaxPlaintext is an error: Trim it first.
func BuildTelemetry(agentSecret, owner string, auth nostr.Tag, e Event, now time.Time, entropy io.Reader) (nostr.Event, error) {
	plain, err := json.Marshal(e)
	if err != nil {
		return nostr.Event{}, fmt.Errorf("observer frame: %w", err)
	}
	if len(plain) > MaxPlaintext {
		return nostr.Event{}, fmt.Errorf("observer frame: %d bytes, over %d", len(plain), MaxPlaintext)
	}
	agent, err := publicKey(agentSecret)
	if err != nil {
		return nostr.Event{}, fmt.Errorf("observer frame: agent key: %w", err)
	}
	return build(agentSecret, strings.ToLower(owner), agent, Telemetry, auth, plain, now, entropy)
}

// BuildControl encrypts and signs one control frame from the owner to agent.
func BuildControl(ownerSecret, agent string, c Command, now time.Time, entropy io.Reader) (nostr.Event, error) {
	plain, err := json.Marshal(c)
	if err != nil {
		return nostr.Event{}, fmt.Errorf("observer frame: %w", err)
	}
	agent = strings.ToLower(agent)
	return build(ownerSecret, agent, agent, Control, nil, plain, now, entropy)
}

// publicKey is sk's public key from the signer cache: a harness sends frames by the hundred,
// and deriving the key is an elliptic-curve multiplication each time.
func publicKey(sk string) (string, error) {
	s, err := protocol.SignerFor(sk)
	if err != nil {
		return "", err
	}
	return s.PublicKey(), nil
}

func build(sk, recipient, agent, frame string, auth nostr.Tag, plain []byte, now time.Time, entropy io.Reader) (nostr.Event, error) {
	author, err := publicKey(sk)
	if err != nil {
		return nostr.Event{}, fmt.Errorf("observer frame: key: %w", err)
	}
	if author == recipient {
		return nostr.Event{}, errors.New("observer frame: recipient must differ from the author")
	}
	key, err := protocol.ConversationKey(sk, recipient)
	if err != nil {
		return nostr.Event{}, fmt.Errorf("observer frame: recipient: %w", err)
	}
	content, err := protocol.Encrypt44(string(plain), key, entropy)
	if err != nil {
		return nostr.Event{}, fmt.Errorf("observer frame: %w", err)
	}
	ev := nostr.Event{
		Kind:      protocol.KindObserverFrame,
		CreatedAt: nostr.Timestamp(now.Unix()),
		Tags:      nostr.Tags{{"p", recipient}, {"agent", agent}, {"frame", frame}},
		Content:   content,
	}
	if auth != nil {
		ev.Tags = append(ev.Tags, auth)
	}
	if err := protocol.SignEvent(&ev, sk, entropy); err != nil {
		return nostr.Event{}, err
	}
	return ev, nil
}

// Envelope is a frame's addressing, read from its tags.
type Envelope struct {
	Recipient string // the p tag
	Agent     string // the agent tag
	Frame     string // Telemetry or Control
}

// Addressing reads and checks a frame's envelope: exactly one p tag (64 lowercase hex), one
// agent tag, one frame tag of a known direction; the agent is the author of telemetry and the
// recipient of control; nobody addresses themselves.
func Addressing(ev *nostr.Event) (Envelope, error) {
	var ps, agents, frames []string
	for _, t := range ev.Tags {
		if len(t) < 2 {
			continue
		}
		switch t[0] {
		case "p":
			ps = append(ps, t[1])
		case "agent":
			agents = append(agents, t[1])
		case "frame":
			frames = append(frames, t[1])
		}
	}
	switch {
	case len(ps) != 1 || !protocol.IsHex64(ps[0]):
		return Envelope{}, errors.New("an observer frame needs exactly one p tag naming its recipient")
	case len(agents) != 1:
		return Envelope{}, errors.New("an observer frame needs exactly one agent tag")
	case len(frames) != 1 || (frames[0] != Telemetry && frames[0] != Control):
		return Envelope{}, errors.New(`an observer frame needs one frame tag, "telemetry" or "control"`)
	case ps[0] == ev.PubKey:
		return Envelope{}, errors.New("an observer frame is not addressed to its author")
	}
	env := Envelope{Recipient: ps[0], Agent: agents[0], Frame: frames[0]}
	if env.Frame == Telemetry && env.Agent != ev.PubKey {
		return Envelope{}, errors.New("a telemetry frame's agent tag must be its author")
	}
	if env.Frame == Control && env.Agent != env.Recipient {
		return Envelope{}, errors.New("a control frame's agent tag must be its recipient")
	}
	return env, nil
}

// Open is the receiving side: it checks the envelope names the receiver (the key sk) and the
// frame's direction is want, checks id and signature, and decrypts the content.
func Open(sk string, ev *nostr.Event, want string) ([]byte, error) {
	if ev.Kind != protocol.KindObserverFrame {
		return nil, fmt.Errorf("observer frame: kind %d, want %d", ev.Kind, protocol.KindObserverFrame)
	}
	me, err := publicKey(sk)
	if err != nil {
		return nil, fmt.Errorf("observer frame: key: %w", err)
	}
	env, err := Addressing(ev)
	if err != nil {
		return nil, fmt.Errorf("observer frame: %w", err)
	}
	if env.Recipient != me || env.Frame != want {
		return nil, fmt.Errorf("observer frame: a %s frame for %s, want %s for this key", env.Frame, env.Recipient, want)
	}
	if err := protocol.CheckEvent(ev); err != nil {
		return nil, fmt.Errorf("observer frame: %w", err)
	}
	key, err := protocol.ConversationKey(sk, ev.PubKey)
	if err != nil {
		return nil, fmt.Errorf("observer frame: %w", err)
	}
	plain, err := protocol.Decrypt44(ev.Content, key)
	if err != nil {
		return nil, fmt.Errorf("observer frame: %w", err)
	}
	return []byte(plain), nil
}

// OpenTelemetry opens a telemetry frame for its owner.
func OpenTelemetry(ownerSecret string, ev *nostr.Event) (Event, error) {
	plain, err := Open(ownerSecret, ev, Telemetry)
	if err != nil {
		return Event{}, err
	}
	var e Event
	if err := json.Unmarshal(plain, &e); err != nil {
		return Event{}, fmt.Errorf("observer frame: payload: %w", err)
	}
	return e, nil
}

// OpenControl opens a control frame for its agent. It checks only the envelope and the
// cryptography; that the author is the agent's owner, the time and replays are the agent's
// checks (Guard).
func OpenControl(agentSecret string, ev *nostr.Event) (Command, error) {
	plain, err := Open(agentSecret, ev, Control)
	if err != nil {
		return Command{}, err
	}
	var c Command
	if err := json.Unmarshal(plain, &c); err != nil {
		return Command{}, fmt.Errorf("observer frame: control payload: %w", err)
	}
	switch c.Type {
	case CancelTurn, SwitchModel, SwitchEffort, PermissionDecision:
	default:
		return Command{}, fmt.Errorf("observer frame: unknown control type %q", c.Type)
	}
	return c, nil
}

// Guard is the agent's check of incoming control frames: the author is the owner, created_at
// within MaxSkew of now, and no frame id accepted twice. Ids are remembered as long as a frame
// could still pass the time check, so the set stays bounded. Not safe for concurrent use.
type Guard struct {
	Owner string
	seen  map[string]time.Time // id → created_at
}

// Errors of Guard.Check.
var (
	ErrNotOwner = errors.New("control frame not signed by the agent's owner")
	ErrStale    = errors.New("control frame created_at is more than 300 s from now")
	ErrReplay   = errors.New("control frame already seen (replay)")
)

// Check admits ev (already opened, so its signature holds) or says why not.
func (g *Guard) Check(ev *nostr.Event, now time.Time) error {
	if g.Owner == "" || ev.PubKey != g.Owner {
		return ErrNotOwner
	}
	at := ev.CreatedAt.Time()
	if d := now.Sub(at); d > MaxSkew || d < -MaxSkew {
		return ErrStale
	}
	if g.seen == nil {
		g.seen = map[string]time.Time{}
	}
	for id, t := range g.seen {
		if now.Sub(t) > MaxSkew {
			delete(g.seen, id)
		}
	}
	if _, dup := g.seen[ev.ID]; dup {
		return ErrReplay
	}
	g.seen[ev.ID] = at
	return nil
}
