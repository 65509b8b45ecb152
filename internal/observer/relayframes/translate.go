package relayframes

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/buzz-harness/buzz/internal/observer"
	"github.com/buzz-harness/buzz/internal/protocol/observerframe"
)

// translator maps feed events to frames. It keeps what the raw ACP lines do not say themselves:
// which turn a session serves, which session/load is outstanding (its replayed history is left
// out, as the feed marks it), which permission requests await the harness's answer, and the
// message chunk being coalesced.
type translator struct {
	now      func() time.Time
	active   map[string]activeTurn     // turn id → the running turn
	sessions map[string]observer.Scope // ACP session id → the turn it serves now
	requests map[string]request        // JSON-RPC id of an outstanding request → what it was
	loading  map[string]bool           // sessions whose session/load is outstanding
	pending  *chunk
}

type activeTurn struct {
	scope   observer.Scope
	started time.Time
}

// request is an outstanding JSON-RPC request, by direction and id.
type request struct {
	method, session string
}

// chunk is consecutive message chunks of one message, being coalesced.
type chunk struct {
	key  string
	msg  map[string]any // the first chunk's message, whose text is replaced by text
	text string
	sc   observer.Scope
}

func newTranslator(now func() time.Time) *translator {
	return &translator{now: now, active: map[string]activeTurn{}, sessions: map[string]observer.Scope{},
		requests: map[string]request{}, loading: map[string]bool{}}
}

// maxTracked bounds the maps against an agent that never answers (requests) or a harness that
// never ends a turn; past it they start over.
const maxTracked = 4096

func (t *translator) event(e observer.Event) []frame {
	if l, ok := e.Data.(observer.ACPLine); ok {
		return t.line(l)
	}
	out := t.flush()
	if e.SessionID != "" && e.TurnID != "" {
		if len(t.sessions) >= maxTracked {
			t.sessions = map[string]observer.Scope{}
		}
		t.sessions[e.SessionID] = e.Scope
		if a, ok := t.active[e.TurnID]; ok {
			a.scope.SessionID = e.SessionID
			t.active[e.TurnID] = a
		}
	}
	switch d := e.Data.(type) {
	case observer.AgentSpawned:
		out = append(out, frame{kind: observerframe.KindAgentInitialized, scope: e.Scope, agent: d.Slot, payload: d})
	case observer.SessionResolved:
		out = append(out, frame{kind: observerframe.KindSessionResolved, scope: e.Scope, payload: d})
	case observer.TurnStarted:
		if len(t.active) >= maxTracked {
			t.active = map[string]activeTurn{}
		}
		t.active[e.TurnID] = activeTurn{scope: e.Scope, started: e.Time}
		out = append(out, frame{kind: observerframe.KindTurnStarted, scope: e.Scope, payload: d})
	case observer.TurnEnded:
		delete(t.active, e.TurnID)
		kind := observerframe.KindTurnCompleted
		if d.Error != "" {
			kind = observerframe.KindTurnError
		}
		out = append(out, frame{kind: kind, scope: e.Scope, payload: d})
	}
	return out
}

// liveness is one turn_liveness frame per running turn, oldest first.
func (t *translator) liveness() []frame {
	turns := make([]activeTurn, 0, len(t.active))
	for _, a := range t.active {
		turns = append(turns, a)
	}
	slices.SortFunc(turns, func(a, b activeTurn) int { return a.started.Compare(b.started) })
	out := t.flush()
	now := t.now()
	for _, a := range turns {
		out = append(out, frame{kind: observerframe.KindTurnLiveness, scope: a.scope,
			payload: map[string]any{"startedAt": observerframe.Timestamp(a.started), "elapsedMs": now.Sub(a.started).Milliseconds()}})
	}
	return out
}

// flush ends the chunk being coalesced, as one acp_read frame.
func (t *translator) flush() []frame {
	c := t.pending
	if c == nil {
		return nil
	}
	t.pending = nil
	if p, ok := c.msg["params"].(map[string]any); ok {
		if u, ok := p["update"].(map[string]any); ok {
			if content, ok := u["content"].(map[string]any); ok {
				content["text"] = c.text
			}
		}
	}
	raw, _ := json.Marshal(c.msg)
	return []frame{{kind: observerframe.KindACPRead, scope: c.sc, payload: json.RawMessage(raw)}}
}

// rpc is the part of a JSON-RPC line the translator reads.
type rpc struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		SessionID string `json:"sessionId"`
		Update    struct {
			Kind      string `json:"sessionUpdate"`
			MessageID string `json:"messageId"`
			Content   struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
		} `json:"update"`
	} `json:"params"`
	Result struct {
		Outcome json.RawMessage `json:"outcome"`
	} `json:"result"`
	Error json.RawMessage `json:"error"`
}

var chunkKinds = map[string]bool{"agent_message_chunk": true, "user_message_chunk": true, "agent_thought_chunk": true}

// line is one raw ACP line: acp_write (harness → agent) or acp_read (agent → harness).
func (t *translator) line(l observer.ACPLine) []frame {
	text := observer.Redact(l.Line)
	kind := observerframe.KindACPRead
	if l.Dir == "send" {
		kind = observerframe.KindACPWrite
	}
	var m rpc
	if json.Unmarshal([]byte(text), &m) != nil {
		// Not JSON (or clipped by the feed): the line goes as a string.
		return append(t.flush(), frame{kind: kind, payload: text})
	}
	// A request's id is keyed with its direction: each side numbers its own.
	reqDir, respDir := l.Dir, "recv"
	if l.Dir == "recv" {
		respDir = "send"
	}
	sid := m.Params.SessionID
	var out []frame
	var terminal *frame
	switch {
	case m.Method != "" && len(m.ID) > 0: // a request
		if len(t.requests) >= maxTracked {
			t.requests = map[string]request{}
		}
		t.requests[reqDir+string(m.ID)] = request{method: m.Method, session: sid}
		if m.Method == "session/load" {
			t.loading[sid] = true
		}
	case m.Method == "" && len(m.ID) > 0: // a response
		key := respDir + string(m.ID)
		req := t.requests[key]
		delete(t.requests, key)
		sid = req.session
		if req.method == "session/load" {
			delete(t.loading, sid)
		}
		if req.method == "session/request_permission" {
			outcome := m.Result.Outcome
			if len(outcome) == 0 {
				outcome = json.RawMessage(`{"outcome":"cancelled"}`)
			}
			terminal = &frame{kind: observerframe.KindPermissionTerminal, payload: map[string]any{"requestId": json.RawMessage(m.ID), "outcome": outcome}}
		}
	case m.Method == "session/update" && t.loading[sid]:
		return nil // history replayed for session/load, which the feed marks as such
	}
	sc := t.sessions[sid]
	sc.SessionID = sid
	if m.Method == "session/update" && l.Dir == "recv" && chunkKinds[m.Params.Update.Kind] && m.Params.Update.Content.Type == "text" {
		key := sid + "\x00" + m.Params.Update.Kind + "\x00" + m.Params.Update.MessageID
		if c := t.pending; c != nil && c.key == key && len(c.text)+len(m.Params.Update.Content.Text) < coalesceMax {
			c.text += m.Params.Update.Content.Text
			return nil
		}
		out = append(out, t.flush()...)
		var msg map[string]any
		if json.Unmarshal([]byte(text), &msg) == nil {
			t.pending = &chunk{key: key, msg: msg, text: m.Params.Update.Content.Text, sc: sc}
			return out
		}
	}
	out = append(out, t.flush()...)
	out = append(out, frame{kind: kind, scope: sc, payload: json.RawMessage(text)})
	if terminal != nil {
		terminal.scope = sc
		out = append(out, *terminal)
	}
	return out
}
