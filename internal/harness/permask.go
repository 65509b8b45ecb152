package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/acp"
	"github.com/buzz-harness/buzz/internal/atomicfile"
	"github.com/buzz-harness/buzz/internal/observer"
	"github.com/buzz-harness/buzz/internal/protocol"
)

// --permissions ask: an agent's session/request_permission becomes a message in the thread the
// turn serves, mentioning the owner and listing the options by number. The owner's reply (a
// number or an option's name) answers it; --permission-timeout without one picks the reject
// option; a cancelled turn (!cancel, shutdown) answers "cancelled".

// DefaultPermissionTimeout is how long a permission question waits for the owner.
const DefaultPermissionTimeout = 10 * time.Minute

// permAsker connects permission requests (on ACP reader goroutines) with the turns they belong
// to (turn goroutines). Open questions live on their conversations, in the loop: ask registers
// each with the loop (questionChange) before publishing it, and the loop hands the owner's
// answer to the waiting ask. The asker's own state is the session → turn map and the open
// questions as written to file; it never holds its lock across I/O.
type permAsker struct {
	cfg   *Config
	owner string
	self  string
	relay *relayClient
	feed  turnFeed
	loop  chan<- questionChange
	file  *atomicfile.Snapshots

	mu    sync.Mutex
	turns map[string]trackedTurn // ACP session id → the turn prompting it
	// pending is every open question as written to file, so a harness that dies while one waits
	// can, on its next start, tell the thread the turn was cancelled (and not run it again).
	pending map[*permWait]pendingQuestion
	path    string
}

// turnFeed is where a turn's activity goes (the harness's feed).
type turnFeed interface {
	emit(in turnInput, p observer.Payload)
}

type trackedTurn struct {
	ctx context.Context // the turn's: its cause says whether the harness is shutting down
	in  turnInput
}

// pendingQuestion is one open question on disk.
type pendingQuestion struct {
	Channel string   `json:"channel"`
	Root    string   `json:"root"`  // the thread
	Reply   string   `json:"reply"` // the event the question answered under
	Tool    string   `json:"tool"`
	Events  []string `json:"events"` // the turn's batch
}

type permWait struct {
	opts   []acp.PermissionOption
	answer chan permChoice // buffered: the loop never blocks on it
}

type permChoice struct{ optionID, decider string }

// questionChange tells the loop a question opened (done is closed once it is on its
// conversation) or closed.
type questionChange struct {
	conv convKey
	w    *permWait
	open bool
	done chan struct{}
}

func newPermAsker(cfg *Config, self string, relay *relayClient, feed turnFeed, loop chan<- questionChange, path string) *permAsker {
	p := &permAsker{cfg: cfg, owner: cfg.Owner, self: self, relay: relay, feed: feed, loop: loop,
		turns: map[string]trackedTurn{}, pending: map[*permWait]pendingQuestion{}, path: path}
	p.file = atomicfile.NewSnapshots(path, 0o600, p.snapshot, cfg.stateWriteOpts...)
	return p
}

// permissionFunc is the ACP client's PermissionFunc: ask under --permissions ask, else nil (the
// allow/deny policy answers).
func (p *permAsker) permissionFunc() func(context.Context, acp.PermissionRequest) (string, error) {
	if p.cfg.Permissions != PermissionsAsk {
		return nil
	}
	return p.ask
}

// track ties a session to the turn prompting it until the returned func is called.
func (p *permAsker) track(ctx context.Context, sessionID string, in turnInput) func() {
	p.mu.Lock()
	p.turns[sessionID] = trackedTurn{ctx, in}
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		delete(p.turns, sessionID)
		p.mu.Unlock()
	}
}

// ask is the ACP client's PermissionFunc.
func (p *permAsker) ask(ctx context.Context, req acp.PermissionRequest) (string, error) {
	p.mu.Lock()
	t, ok := p.turns[req.SessionID]
	p.mu.Unlock()
	in := t.in
	if in.session == nil || in.session.ID != req.SessionID {
		in.session = &convSession{ID: req.SessionID} // the feed places the events in the session
	}
	tool := describeToolCall(req.ToolCall)
	if !ok || in.batch == nil || len(req.Options) == 0 {
		// Not a channel turn (a heartbeat, an initial message): nobody to ask, so no.
		return rejectOption(req.Options), nil
	}
	w := &permWait{opts: req.Options, answer: make(chan permChoice, 1)}
	last := in.batch.Last()
	root := protocol.ParseThread(last.Tags).Root
	if root == "" {
		root = last.ID
	}
	// On the conversation before the question is out: an answer can only come after.
	if !p.tell(ctx, questionChange{conv: in.conv, w: w, open: true, done: make(chan struct{})}) {
		return "", ctx.Err()
	}
	p.mu.Lock()
	p.pending[w] = pendingQuestion{Channel: in.channel.ID, Root: root, Reply: last.ID, Tool: tool.title, Events: in.batch.IDs()}
	p.mu.Unlock()
	// On file before it is asked: a harness killed once the question is out must find it (and not
	// run the turn again). This goroutine waits for the disk; the loop does not.
	if err := p.file.Wait(ctx, p.file.Mark()); err != nil {
		p.relay.log.Warn("permission question not recorded; a restart would ask it again", "err", err)
	}
	keep := false // a question cut short by shutdown stays on file for the next start to report
	defer func() {
		p.tell(context.WithoutCancel(ctx), questionChange{conv: in.conv, w: w})
		if !keep {
			p.mu.Lock()
			delete(p.pending, w)
			p.mu.Unlock()
			p.file.Mark()
		}
	}()

	p.feed.emit(in, observer.AgentUpdate{Kind: "permission_request", ToolCallID: tool.id, Title: tool.title, Text: clip(tool.input), Status: "asked"})
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	p.relay.publish(pctx, p.question(in, tool, req.Options))
	cancel()

	timer := p.cfg.Clock.NewTimer(p.cfg.PermissionTimeout)
	defer timer.Stop()
	var choice permChoice
	select {
	case choice = <-w.answer:
	case <-timer.C():
		choice = permChoice{optionID: rejectOption(req.Options), decider: "timeout"}
	case <-ctx.Done():
		choice = permChoice{decider: "cancelled"}
		keep = errors.Is(context.Cause(t.ctx), errShutdown)
	}
	status := "cancelled"
	for _, o := range req.Options {
		if o.OptionID == choice.optionID && o.OptionID != "" {
			status = o.Kind
		}
	}
	p.relay.log.Info("permission decided", "tool", tool.title, "decision", status, "by", choice.decider, "channel", in.channel.ID, "conversation", in.conv.String())
	p.feed.emit(in, observer.AgentUpdate{Kind: "permission_decision", ToolCallID: tool.id, Title: tool.title, Text: "decided by " + choice.decider, Status: status})
	return choice.optionID, nil
}

// tell hands a change to the loop; for an opening one it waits until the loop has it. False
// means the run (or ctx) ended first.
func (p *permAsker) tell(ctx context.Context, q questionChange) bool {
	select {
	case p.loop <- q:
	case <-ctx.Done():
		return false
	}
	if q.done == nil {
		return true
	}
	select {
	case <-q.done:
		return true
	case <-ctx.Done():
		return false
	}
}

// changeQuestion puts a question on its conversation, or takes it off (the loop's side).
func (h *Harness) changeQuestion(q questionChange) {
	h.convs.update(q.conv, func(c *conversation) {
		if q.open {
			c.questions = append(c.questions, q.w)
			return
		}
		if i := slices.Index(c.questions, q.w); i >= 0 {
			c.questions = slices.Delete(c.questions, i, i+1)
		}
	})
	if q.done != nil {
		close(q.done)
	}
}

// answerQuestion takes an owner's message in a conversation with an open question: if it picks
// one of the oldest question's options it answers it and reports true (the message is
// consumed); anything else is an ordinary message.
func (h *Harness) answerQuestion(ev *nostr.Event, k convKey) bool {
	c := h.convs.get(k)
	if c == nil || len(c.questions) == 0 {
		return false
	}
	w := c.questions[0]
	id := matchOption(ev.Content, w.opts)
	if id == "" {
		return false
	}
	// Answered: a second reply goes to the next question, or is a message.
	h.convs.update(k, func(c *conversation) { c.questions = c.questions[1:] })
	w.answer <- permChoice{optionID: id, decider: ev.PubKey}
	return true
}

// matchOption reads an answer: the option's number, name or kind, with only mentions around it.
func matchOption(content string, opts []acp.PermissionOption) string {
	var words []string
	for _, w := range strings.Fields(content) {
		if !isMentionWord(w) {
			words = append(words, w)
		}
	}
	// The whole text must be the answer: "use port 2" is a message, not option 2.
	for _, c := range []string{strings.TrimSpace(content), strings.Join(words, " ")} {
		c = strings.TrimSuffix(strings.TrimSpace(c), ".")
		if n, err := strconv.Atoi(c); err == nil && n >= 1 && n <= len(opts) {
			return opts[n-1].OptionID
		}
		for _, o := range opts {
			if c != "" && (strings.EqualFold(c, o.Name) || strings.EqualFold(c, o.Kind)) {
				return o.OptionID
			}
		}
	}
	return ""
}

// rejectOption is the option a timeout (or a turn nobody can be asked about) picks.
func rejectOption(opts []acp.PermissionOption) string {
	for _, kind := range []string{acp.KindRejectOnce, acp.KindRejectAlways} {
		for _, o := range opts {
			if o.Kind == kind && o.OptionID != "" {
				return o.OptionID
			}
		}
	}
	return ""
}

type toolCall struct{ id, title, input string }

// describeToolCall reads what a permission request says the tool wants to do.
func describeToolCall(raw json.RawMessage) toolCall {
	var tc struct {
		ToolCallID string          `json:"toolCallId"`
		Title      string          `json:"title"`
		Kind       string          `json:"kind"`
		RawInput   json.RawMessage `json:"rawInput"`
	}
	_ = json.Unmarshal(raw, &tc)
	// One line: the title is the agent's text, and a line of it must not pass for an option.
	t := toolCall{id: tc.ToolCallID, title: strings.Join(strings.Fields(tc.Title), " ")}
	if t.title == "" {
		t.title = "a tool call"
	}
	if tc.Kind != "" {
		t.title += " (" + tc.Kind + ")"
	}
	if len(tc.RawInput) > 0 && string(tc.RawInput) != "null" {
		t.input = string(tc.RawInput)
		if len(t.input) > 600 {
			t.input = t.input[:600] + "…"
		}
	}
	return t
}

// question is the thread message asking the owner.
func (p *permAsker) question(in turnInput, tool toolCall, opts []acp.PermissionOption) *nostr.Event {
	var b strings.Builder
	fmt.Fprintf(&b, "nostr:%s permission needed: %s\n", protocol.Npub(p.owner), tool.title)
	if tool.input != "" {
		fmt.Fprintf(&b, "```\n%s\n```\n", tool.input)
	}
	b.WriteString("Reply (mentioning me) with a number or an option's name:\n")
	names := make([]string, len(opts))
	for i, o := range opts {
		names[i] = o.Name
		fmt.Fprintf(&b, "%d. %s\n", i+1, o.Name)
	}
	fmt.Fprintf(&b, "No answer within %s picks the reject option.", p.cfg.PermissionTimeout)
	tags := nostr.Tags{{"h", in.channel.ID}}
	tags = append(tags, threadTags(in.batch.Last())...)
	// The marker: a turn whose agent dies while asking must not count as answered by its question
	// (relayClient.answered), and the console shows answer buttons on it.
	tags = append(tags, nostr.Tag{"p", p.owner}, protocol.PermissionRequestTag)
	// The console's buttons come from these, never from the text above.
	tags = append(tags, protocol.PermissionOptionTags(names)...)
	return &nostr.Event{Kind: protocol.KindStreamMessage, Content: b.String(), Tags: tags, CreatedAt: timestamp(p.cfg.Clock)}
}

// snapshot is the open questions for the file (nothing kept: the file is removed).
func (p *permAsker) snapshot() ([]byte, bool) {
	p.mu.Lock()
	list := make([]pendingQuestion, 0, len(p.pending))
	for _, q := range p.pending {
		list = append(list, q)
	}
	p.mu.Unlock()
	if len(list) == 0 {
		return nil, false
	}
	b, _ := json.Marshal(list)
	return b, true
}

// close writes what is pending and stops the file's writer; a failure is logged: the file only
// improves what the thread is told after a crash.
func (p *permAsker) close() {
	if err := p.file.Close(); err != nil {
		p.relay.log.Warn("permission questions file", "err", err)
	}
}

// recover runs at start, before the journal is replayed: a question left open by the previous
// run means its turn died waiting for the owner. The thread is told, and the turn's events are
// closed (done) rather than run again (the owner never agreed to what the agent wanted to do).
func (p *permAsker) recover(ctx context.Context, done func(ids ...string)) {
	b, err := os.ReadFile(p.path)
	if err != nil {
		return
	}
	var list []pendingQuestion
	if err := json.Unmarshal(b, &list); err != nil {
		p.relay.log.Warn("permission questions file unreadable; ignoring it", "err", err)
	}
	for _, q := range list {
		p.relay.log.Warn("a permission question was open when the harness stopped; its turn is cancelled", "channel", q.Channel, "tool", q.Tool)
		done(q.Events...)
		tags := nostr.Tags{{"h", q.Channel}}
		tags = append(tags, protocol.ReplyTags(q.Root, q.Reply)...)
		tags = append(tags, nostr.Tag{"p", p.owner})
		ev := &nostr.Event{Kind: protocol.KindStreamMessage, CreatedAt: timestamp(p.cfg.Clock), Tags: tags,
			Content: fmt.Sprintf("nostr:%s I restarted while waiting for your answer about %s, so that turn was cancelled. Mention me again to retry.", protocol.Npub(p.owner), q.Tool)}
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		p.relay.publish(pctx, ev)
		cancel()
	}
	if err := os.Remove(p.path); err != nil && !os.IsNotExist(err) {
		p.relay.log.Warn("permission questions file", "err", err)
	}
}
