// Command acpceiling is the floor BenchmarkHarnessOverhead compares buzz-acp against: the least
// any harness must do between a mention's EVENT frame and the agent's prompt (read the frame,
// parse it, check its signature, write one session/prompt line), with nothing else — no
// journal, queue, acknowledgements, context or activity feed on the way. It runs on the same
// machine, relay and agent as the benchmark's buzz-acp, so the ratio of the two p99s says how
// much of the tail is ours and how much is the machine.
//
// It writes the two activity-log lines the benchmark reads (event_received, acp_line send) with
// the same meaning as buzz-acp's, after the prompt is out.
//
//	acpceiling <relay-ws-url> <agent-command> <cwd> <activity-log>   (BUZZ_PRIVATE_KEY in env)
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
)

func main() {
	if len(os.Args) != 5 {
		fmt.Fprintln(os.Stderr, "usage: acpceiling <relay-ws-url> <agent-command> <cwd> <activity-log>")
		os.Exit(2)
	}
	runtime.GOMAXPROCS(1)                                      // as buzz-acp's default
	err := run(os.Args[1], os.Args[2], os.Args[3], os.Args[4]) // returns only on failure
	fmt.Fprintln(os.Stderr, "acpceiling:", err)
	os.Exit(1)
}

func run(relayURL, agentCmd, cwd, activityPath string) error {
	sk := os.Getenv("BUZZ_PRIVATE_KEY")
	pk, err := protocol.PublicKey(sk)
	if err != nil {
		return err
	}
	activity, err := os.Create(activityPath)
	if err != nil {
		return err
	}
	a, err := startAgent(agentCmd)
	if err != nil {
		return err
	}
	if _, err := a.call("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}}); err != nil {
		return err
	}

	ctx := context.Background()
	conn, _, err := websocket.Dial(ctx, relayURL, nil)
	if err != nil {
		return err
	}
	conn.SetReadLimit(1 << 20)
	if err := authenticate(ctx, conn, sk, relayURL); err != nil {
		return err
	}
	req, _ := json.Marshal([]any{"REQ", "m", nostr.Filter{Kinds: []int{9}, Tags: nostr.TagMap{"p": {pk}}, Since: ptr(nostr.Now())}})
	if err := conn.Write(ctx, websocket.MessageText, req); err != nil {
		return err
	}
	fmt.Println("buzz-acp ready") // the line the benchmark's stack waits for

	sessions := map[string]string{} // channel → session id
	for {
		_, raw, err := conn.Read(ctx)
		if err != nil {
			return err
		}
		received := time.Now()
		var frame []json.RawMessage
		if json.Unmarshal(raw, &frame) != nil || len(frame) != 3 || string(frame[0]) != `"EVENT"` {
			continue
		}
		var ev nostr.Event
		if json.Unmarshal(frame[2], &ev) != nil {
			continue
		}
		if protocol.CheckEvent(&ev) != nil { // the same check buzz-acp makes
			continue
		}
		h := ev.Tags.Find("h")
		if h == nil {
			continue
		}
		ch := h[1]
		sess, ok := sessions[ch]
		if !ok { // the benchmark's warm-up: not measured
			res, err := a.call("session/new", map[string]any{"cwd": cwd, "mcpServers": []any{}})
			if err != nil {
				return err
			}
			var r struct {
				SessionID string `json:"sessionId"`
			}
			_ = json.Unmarshal(res, &r)
			sess = r.SessionID
			sessions[ch] = sess
		}
		text := fmt.Sprintf("[Context]\nChannel: %s\n\nEvent ID: %s\nContent: %s\n", ch, ev.ID, ev.Content)
		line, sent := a.send("session/prompt", map[string]any{"sessionId": sess, "prompt": []map[string]string{{"type": "text", "text": text}}})
		logLine(activity, received, "event_received", map[string]any{"eventId": ev.ID, "receivedAt": received})
		logLine(activity, sent, "acp_line", map[string]any{"dir": "send", "line": string(line)})
	}
}

func ptr[T any](v T) *T { return &v }

func logLine(w *os.File, at time.Time, typ string, data any) {
	raw, _ := json.Marshal(map[string]any{"time": at, "type": typ, "data": data})
	_, _ = w.Write(append(raw, '\n'))
}

// authenticate answers the relay's NIP-42 challenge.
func authenticate(ctx context.Context, conn *websocket.Conn, sk, url string) error {
	for {
		_, raw, err := conn.Read(ctx)
		if err != nil {
			return err
		}
		var frame []json.RawMessage
		if json.Unmarshal(raw, &frame) != nil || len(frame) < 2 {
			continue
		}
		switch string(frame[0]) {
		case `"AUTH"`:
			var challenge string
			_ = json.Unmarshal(frame[1], &challenge)
			ev, err := protocol.NewAuthEvent(sk, url, challenge, time.Now())
			if err != nil {
				return err
			}
			msg, _ := json.Marshal([]any{"AUTH", ev})
			if err := conn.Write(ctx, websocket.MessageText, msg); err != nil {
				return err
			}
		case `"OK"`:
			if len(frame) >= 3 && string(frame[2]) == "true" {
				return nil
			}
			return fmt.Errorf("relay refused AUTH: %s", raw)
		}
	}
}

// agent is a bare ACP connection: requests out, responses matched by id, the rest drained.
type agent struct {
	mu      sync.Mutex
	stdin   *os.File
	nextID  int
	pending map[int]chan json.RawMessage
}

func startAgent(command string) (*agent, error) {
	cmd := exec.Command(command)
	cmd.Stderr = os.Stderr
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdin = inR
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	inR.Close()
	a := &agent{stdin: inW, pending: map[int]chan json.RawMessage{}}
	go a.read(bufio.NewReaderSize(out, 1<<16))
	return a, nil
}

func (a *agent) read(r *bufio.Reader) {
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			os.Exit(1) // the agent is gone: nothing left to measure
		}
		var msg struct {
			ID     *int            `json:"id"`
			Method string          `json:"method"`
			Result json.RawMessage `json:"result"`
		}
		if json.Unmarshal(line, &msg) != nil || msg.ID == nil {
			continue
		}
		if msg.Method != "" { // a request from the agent: refuse it
			raw, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": *msg.ID, "error": map[string]any{"code": -32601, "message": "not supported"}})
			a.mu.Lock()
			_, _ = a.stdin.Write(append(raw, '\n'))
			a.mu.Unlock()
			continue
		}
		a.mu.Lock()
		ch := a.pending[*msg.ID]
		delete(a.pending, *msg.ID)
		a.mu.Unlock()
		if ch != nil {
			ch <- msg.Result
		}
	}
}

// send writes one request and returns its line and when its write began (as buzz-acp stamps
// it); its answer is dropped.
func (a *agent) send(method string, params any) ([]byte, time.Time) {
	line, at, _ := a.write(method, params, nil)
	return line, at
}

func (a *agent) call(method string, params any) (json.RawMessage, error) {
	ch := make(chan json.RawMessage, 1)
	if _, _, err := a.write(method, params, ch); err != nil {
		return nil, err
	}
	select {
	case res := <-ch:
		return res, nil
	case <-time.After(30 * time.Second):
		return nil, fmt.Errorf("%s: no answer in 30s", method)
	}
}

func (a *agent) write(method string, params any, answer chan json.RawMessage) ([]byte, time.Time, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.nextID++
	if answer != nil {
		a.pending[a.nextID] = answer
	}
	line, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": a.nextID, "method": method, "params": params})
	at := time.Now()
	_, err := a.stdin.Write(append(line, '\n'))
	return line, at, err
}
