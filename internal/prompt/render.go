package prompt

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
)

// DefaultTag is the prompt tag of a batch that names none (a plain @mention).
const DefaultTag = "@mention"

// FollowTag is the prompt tag of a batch that only thread follow brought: nobody mentioned the
// agent.
const FollowTag = "thread follow"

// MergeReason says why an in-flight turn was cancelled and its events carried into this one.
type MergeReason int

const (
	// ReasonSteer (the default) asks the agent to keep going and fold the new message in.
	ReasonSteer MergeReason = iota
	// ReasonInterrupt (also used for a model switch) says the new request supersedes the old.
	ReasonInterrupt
)

// Channel is what the harness knows about the batch's channel.
type Channel struct {
	ID          string
	Name        string // empty when unknown: the display falls back to the bare UUID
	Type        string // stream | private | dm | unknown
	Description string
}

// Profile is what a kind-0 profile says about a pubkey. IsAgent: the profile carries a NIP-OA
// auth tag. A pubkey with no profile is treated as a human.
type Profile struct {
	Label   string
	IsAgent bool
}

// Input is everything one channel prompt is rendered from.
type Input struct {
	Events    []nostr.Event // the batch, sorted by created_at by the caller
	Cancelled []nostr.Event // events of a cancelled turn carried into this one
	Reason    MergeReason
	Channel   Channel
	Tag       string // prompt tag; DefaultTag when empty
	// EventTags are the prompt tags of single events (event id → the tag of the subscription
	// rule it matched), over Tag.
	EventTags map[string]string
	Profiles  map[string]Profile
	Self      string // the agent's own pubkey: always an agent for reply-anchor purposes

	// Context is the fetched window for the last event, before delta filtering; nil when none
	// was fetched (top-level channel message, fetch failed, limit 0).
	Context *ThreadWindow
	// Delivered holds the event ids this session has already been shown.
	Delivered map[string]bool
	// Followed holds the ids of the Events that reached the agent by thread follow: they
	// continue a thread it replied in, and nobody mentioned it.
	Followed map[string]bool

	Standing        Standing
	IncludeStanding bool // legacy route and standing not yet sent in this session
}

// Stats describes one rendered prompt; the harness emits it as prompt_context_delivery.
type Stats struct {
	PromptBytes      int  // all blocks
	StandingIncluded bool // standing sections were prepended
	EventDeltaCount  int  // batch events rendered (cancelled carry-over excluded)
	StandingBytes    int  // bytes of the standing blocks
	ContentBytes     int  // raw message content (events, cancelled events, context messages)
}

// FramingBytes is everything except standing context and message content.
func (s Stats) FramingBytes() int { return s.PromptBytes - s.StandingBytes - s.ContentBytes }

// Rendered is the full result of Build.
type Rendered struct {
	Blocks []string // one ACP text content block each, in order
	Stats  Stats
	// DeliveredIDs are the ids this prompt shows (batch, cancelled and context messages); the
	// harness adds them to the session's ledger once the prompt succeeds.
	DeliveredIDs []string
	// ContextComplete: the context section covers everything, so the retrieval hint was dropped.
	ContextComplete bool
	// ContextIncomplete says why the agent may lack conversation context it needs (truncated
	// window, missing thread root, failed fetch); "" when nothing is missing. A top-level
	// channel message needs none, and context delivered earlier in the session is not missing,
	// so this is not simply !ContextComplete.
	ContextIncomplete string
}

// Build renders a channel prompt: [standing] + [Context] + [context section] + [prior work] +
// event block(s) + [closing note] (spec §6).
func Build(in Input) Rendered {
	r := renderer{in: in, tag: in.Tag}
	if strings.TrimSpace(r.tag) == "" {
		r.tag = DefaultTag
		if _, all := r.followed(); all {
			r.tag = FollowTag
		}
	}
	return r.build()
}

type renderer struct {
	in  Input
	tag string
	out Rendered
}

func (r *renderer) add(block string) {
	r.out.Blocks = append(r.out.Blocks, block)
	r.out.Stats.PromptBytes += len(block)
}

func (r *renderer) build() Rendered {
	in := r.in
	if cmd, ok := r.slashCommand(); ok {
		r.add(cmd)
	}
	if in.IncludeStanding {
		for _, s := range in.Standing.Sections() {
			r.add(s.Text)
			r.out.Stats.StandingBytes += len(s.Text)
			r.out.Stats.StandingIncluded = true
		}
	}

	last, haveLast := r.lastEvent()
	var ctxSection string
	var hadDelivered bool
	var shown ThreadWindow
	if in.Context != nil {
		shown, hadDelivered = in.Context.Delta(in.Delivered, IDSet(in.Events, in.Cancelled))
		if len(shown.Messages) > 0 {
			ctxSection = r.contextSection(shown)
		}
	}
	if haveLast {
		complete := ctxSection != "" && r.complete(last, hadDelivered)
		r.out.ContextComplete = complete
		r.out.ContextIncomplete = r.incomplete(last)
		r.add(r.contextBlock(last, ctxSection != "", complete, hadDelivered))
	}
	if ctxSection != "" {
		r.add(ctxSection)
		for _, ev := range shown.Messages {
			r.out.Stats.ContentBytes += len(ev.Content)
		}
	}

	merging := len(in.Cancelled) > 0
	if merging {
		r.add(r.eventList(r.priorHeader(), in.Cancelled))
	}
	switch {
	case len(in.Events) == 0:
	case merging && len(in.Events) == 1:
		r.add(r.newHeader(1) + "\n\n[Buzz event: " + r.tagOf(in.Events[0]) + "]\n" + r.eventBlock(in.Events[0], true))
	case merging:
		r.add(r.eventList(r.newHeader(len(in.Events)), in.Events))
	case len(in.Events) == 1:
		r.add("[Buzz event: " + r.tagOf(in.Events[0]) + "]\n" + r.eventBlock(in.Events[0], true))
	default:
		r.add(r.eventList(fmt.Sprintf("[Buzz events — %d events]", len(in.Events)), in.Events))
	}
	if merging {
		r.add(closingNote(in.Reason))
	}

	for _, ev := range in.Events {
		r.out.Stats.ContentBytes += len(ev.Content)
	}
	for _, ev := range in.Cancelled {
		r.out.Stats.ContentBytes += len(ev.Content)
	}
	r.out.Stats.EventDeltaCount = len(in.Events)
	r.out.DeliveredIDs = deliveredIDs(in.Events, in.Cancelled, shown.Messages)
	return r.out
}

// tagOf is an event's prompt tag: its rule's, else the prompt's.
func (r *renderer) tagOf(ev nostr.Event) string {
	if t := cleanLine(r.in.EventTags[ev.ID], 100); t != "" {
		return t
	}
	return r.tag
}

// lastEvent is the event that decides scope and reply anchor: the newest of the batch.
func (r *renderer) lastEvent() (nostr.Event, bool) {
	if n := len(r.in.Events); n > 0 {
		return r.in.Events[n-1], true
	}
	if n := len(r.in.Cancelled); n > 0 {
		return r.in.Cancelled[n-1], true
	}
	return nostr.Event{}, false
}

func (r *renderer) channelID(ev nostr.Event) string {
	if r.in.Channel.ID != "" {
		return r.in.Channel.ID
	}
	id, _ := protocol.ChannelID(ev.Tags)
	return id
}

func (r *renderer) channelDisplay(ev nostr.Event) string {
	id := r.channelID(ev)
	if own, ok := protocol.ChannelID(ev.Tags); ok && own != id {
		return own // an event from another channel is shown by its own id, never mislabelled
	}
	if name := cleanLine(r.in.Channel.Name, 200); name != "" {
		return name + " (#" + id + ")"
	}
	return id
}

func (r *renderer) isAgent(pk string) bool {
	return (r.in.Self != "" && pk == r.in.Self) || r.in.Profiles[pk].IsAgent
}

// humanFacing: a human wrote it or a human is p-tagged. Unknown pubkeys count as human.
func (r *renderer) humanFacing(ev nostr.Event) bool {
	if !r.isAgent(ev.PubKey) {
		return true
	}
	for _, t := range ev.Tags {
		if len(t) >= 2 && t[0] == "p" && !r.isAgent(strings.ToLower(t[1])) {
			return true
		}
	}
	return false
}

// complete implements change 3b: the retrieval hint may go only when the context is untruncated,
// holds its root (threads), covers every batch and cancelled event, and repeats nothing.
func (r *renderer) complete(last nostr.Event, hadDelivered bool) bool {
	w := r.in.Context
	if w == nil || w.Truncated || hadDelivered {
		return false
	}
	if w.Kind == ThreadWindowKind {
		if !w.RootPresent || w.RootID == "" || w.RootID != protocol.ParseThread(last.Tags).Root {
			return false
		}
	}
	for _, list := range [][]nostr.Event{r.in.Events, r.in.Cancelled} {
		for _, ev := range list {
			if ev.ID == "" || !w.Contains(ev.ID) {
				return false
			}
		}
	}
	return true
}

// incomplete is Rendered.ContextIncomplete for the batch whose newest event is last.
func (r *renderer) incomplete(last nostr.Event) string {
	ref := protocol.ParseThread(last.Tags)
	what := "thread"
	switch {
	case ref.Root != "":
	case r.in.Channel.Type == protocol.TypeDM:
		what = "conversation"
	default:
		return "" // a top-level channel message: no context window belongs to it
	}
	w := r.in.Context
	switch {
	case w == nil:
		return what + " context was not fetched (fetch failed, or the context message limit is 0)"
	case w.Truncated && w.Kind == ConversationWindowKind:
		return fmt.Sprintf("conversation truncated to its newest %d messages", len(w.Messages))
	case w.Truncated:
		return fmt.Sprintf("thread truncated to %d of %d messages", len(w.Messages), w.Total)
	case w.Kind == ThreadWindowKind && (!w.RootPresent || w.RootID != ref.Root):
		return "the thread's root message was not found"
	}
	for _, list := range [][]nostr.Event{r.in.Events, r.in.Cancelled} {
		for _, ev := range list {
			if !w.Contains(ev.ID) {
				return "an event of this batch is outside the fetched " + what
			}
		}
	}
	return ""
}

func (r *renderer) contextBlock(last nostr.Event, hasCtx, complete, hadDelivered bool) string {
	ref := protocol.ParseThread(last.Tags)
	ch := r.channelID(last)
	lines := []string{"[Context]"}
	// Which subscription rule brought the newest event in, when it is not a plain mention.
	if tag := cleanLine(r.in.EventTags[last.ID], 100); tag != "" && tag != DefaultTag {
		lines = append(lines, "Subscription rule: "+tag)
	}
	channelLines := func() {
		lines = append(lines, "Channel: "+r.channelDisplay(last))
		if d := cleanLine(r.in.Channel.Description, 500); d != "" {
			lines = append(lines, "Channel description: "+d)
		}
	}
	threadCmd := "buzz messages thread --channel " + ch + " --event " + ref.Root
	note, all := r.followed()
	switch {
	case r.in.Channel.Type == protocol.TypeDM:
		lines = append(lines, "Scope: dm")
		channelLines()
		if ref.IsReply() {
			lines = append(lines, hint("Thread", threadCmd, "to fetch the reply chain.", hasCtx, complete, hadDelivered))
			lines = append(lines, "Thread root: "+ref.Root)
			if ref.Parent != ref.Root {
				lines = append(lines, "Parent: "+ref.Parent)
			}
			lines = append(lines, followLines(note, all, last.ID, replyInstruction(last.ID))...)
		} else {
			lines = append(lines, hint("Conversation", "buzz messages get --channel "+ch, "for conversation context.", hasCtx, complete, hadDelivered))
		}
	case ref.Root != "":
		lines = append(lines, "Scope: thread")
		channelLines()
		lines = append(lines, "Thread root: "+ref.Root)
		if ref.Parent != ref.Root {
			lines = append(lines, "Parent: "+ref.Parent)
		}
		lines = append(lines, hint("Thread", threadCmd, "to fetch thread context.", hasCtx, complete, hadDelivered))
		instruction := ""
		if r.humanFacing(last) {
			instruction = replyInstruction(ref.Root)
		}
		lines = append(lines, followLines(note, all, ref.Root, instruction)...)
	default:
		lines = append(lines, "Scope: channel")
		channelLines()
		lines = append(lines, "Hint: Use `buzz messages get --channel "+ch+"` for recent messages if needed.")
		if r.humanFacing(last) {
			lines = append(lines, newThreadInstruction(last.ID))
		}
	}
	return strings.Join(lines, "\n")
}

// followed is the [Context] line for the batch's events that reached the agent by thread follow
// ("" when none did), and whether all of them did.
func (r *renderer) followed() (note string, all bool) {
	var ids []string
	for _, ev := range r.in.Events {
		if r.in.Followed[ev.ID] {
			ids = append(ids, ev.ID)
		}
	}
	switch {
	case len(ids) == 0:
		return "", false
	case len(ids) < len(r.in.Events) && len(ids) == 1:
		return "Followed: " + ids[0] + " did not mention you; it continues a thread you replied in.", false
	case len(ids) < len(r.in.Events):
		return "Followed: " + strings.Join(ids, ", ") + " did not mention you; they continue a thread you replied in.", false
	case len(ids) == 1:
		return "Followed: nobody mentioned you; this message continues a thread you replied in. Answer only if it needs you; if it does not, end your turn without posting.", true
	}
	return "Followed: nobody mentioned you; these messages continue a thread you replied in. Answer only if they need you; if they do not, end your turn without posting.", true
}

// followLines are the [Context] lines after a thread's hint: the follow note, if any, then the
// reply instruction — a softer one when thread follow alone brought the batch, as the agent may
// decide it needs no answer.
func followLines(note string, all bool, anchor, instruction string) []string {
	var out []string
	if note != "" {
		out = append(out, note)
	}
	if all {
		instruction = "If you answer, reply with `buzz messages send --reply-to " + anchor + "`."
	}
	if instruction != "" {
		out = append(out, instruction)
	}
	return out
}

func hint(what, cmd, fetchTail string, hasCtx, complete, hadDelivered bool) string {
	switch {
	case hasCtx && complete:
		return "Hint: " + what + " context included below."
	case hasCtx:
		return "Hint: " + what + " context included below. Use `" + cmd + "` for full history if truncated."
	case hadDelivered:
		return "Hint: Earlier " + strings.ToLower(what) + " context was already delivered in this session. Use `" + cmd + "` to re-read it if needed."
	}
	return "Hint: Use `" + cmd + "` " + fetchTail
}

func replyInstruction(anchor string) string {
	return "IMPORTANT: Reply in this turn with `buzz messages send --reply-to " + anchor +
		"`. Post without `--reply-to` (top level, broadcast) only if a human explicitly asks; if unsure, ask."
}

func newThreadInstruction(anchor string) string {
	return "IMPORTANT: This top-level message starts a new thread. Reply in it with `buzz messages send --reply-to " + anchor +
		"`, not in any older thread. Post without `--reply-to` only if a human explicitly asks for a top-level or broadcast post."
}

func (r *renderer) contextSection(w ThreadWindow) string {
	name := "Thread Context"
	if w.Kind == ConversationWindowKind {
		name = "Conversation Context"
	}
	trunc := ""
	if w.Truncated {
		trunc = ", truncated"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "[%s (%d of %d messages%s)]", name, len(w.Messages), w.Total, trunc)
	for i, ev := range w.Messages {
		fmt.Fprintf(&b, "\n[%d] %s (%s): %s", i+1, r.actor(ev.PubKey), timestamp(ev.CreatedAt), indentContent(ev.Content))
		if a := attachments(ev.Tags); a != "" {
			b.WriteString("\n    " + a)
		}
	}
	return b.String()
}

// actor is "Label (hex)" when a usable label is known, else the hex pubkey.
func (r *renderer) actor(pk string) string {
	if l := cleanLine(r.in.Profiles[pk].Label, 64); l != "" {
		return l + " (" + pk + ")"
	}
	return pk
}

func (r *renderer) eventList(header string, evs []nostr.Event) string {
	var b strings.Builder
	b.WriteString(header)
	for i, ev := range evs {
		fmt.Fprintf(&b, "\n\n--- Event %d (%s) ---\n", i+1, r.tagOf(ev))
		b.WriteString(r.eventBlock(ev, true))
	}
	return b.String()
}

// eventBlock renders one event. withProfiles=false gives the bare form native steers use:
// channel by UUID and author by npub only.
func (r *renderer) eventBlock(ev nostr.Event, withProfiles bool) string {
	var b strings.Builder
	b.WriteString("Event ID: " + ev.ID)
	if withProfiles {
		b.WriteString("\nChannel: " + r.channelDisplay(ev))
	} else {
		b.WriteString("\nChannel: " + r.channelID(ev))
	}
	fmt.Fprintf(&b, "\nKind: %d", ev.Kind)
	label := ""
	if withProfiles {
		label = cleanLine(r.in.Profiles[ev.PubKey].Label, 64)
	}
	b.WriteString("\nFrom: " + from(label, ev.PubKey))
	b.WriteString("\nTime: " + timestamp(ev.CreatedAt))
	b.WriteString("\nContent: " + indentContent(ev.Content))
	b.WriteString("\nTags: " + tagsJSON(ev.Tags))
	if a := attachments(ev.Tags); a != "" {
		b.WriteString("\n" + a)
	}
	if p := r.parsed(ev, withProfiles); p != "" {
		b.WriteString("\nParsed: " + p)
	}
	return b.String()
}

func from(label, pk string) string {
	npub := ""
	if protocol.IsHex64(pk) {
		npub = protocol.Npub(pk)
	}
	switch {
	case label != "" && npub != "":
		return label + " (npub: " + npub + ", hex: " + pk + ")"
	case npub != "":
		return npub + " (hex: " + pk + ")"
	case label != "":
		return label + " (hex: " + pk + ")"
	}
	return pk
}

// parsed is the NIP-10/mention summary. Change 3a: parent is left out when it is the root.
func (r *renderer) parsed(ev nostr.Event, withProfiles bool) string {
	ref := protocol.ParseThread(ev.Tags)
	var parts []string
	if ref.Parent != "" && ref.Parent != ref.Root {
		parts = append(parts, "parent="+ref.Parent)
	}
	if ref.Root != "" {
		parts = append(parts, "root="+ref.Root)
	}
	if ms := protocol.Mentions(ev.Tags); len(ms) > 0 {
		names := make([]string, len(ms))
		for i, pk := range ms {
			if withProfiles {
				names[i] = r.actor(pk)
			} else {
				names[i] = pk
			}
		}
		parts = append(parts, "mentions=["+strings.Join(names, ", ")+"]")
	}
	return strings.Join(parts, ", ")
}

// The merge headers and notes are our own wording (upstream's are not copied); the agent only
// needs to tell the earlier request from the new message and know whether to carry on or switch.
func (r *renderer) priorHeader() string {
	if r.in.Reason == ReasonInterrupt {
		return "[Earlier request — stopped before you finished it]"
	}
	return "[Earlier request — you were still working on it]"
}

func (r *renderer) newHeader(n int) string {
	return newHeader(r.in.Reason, n)
}

func newHeader(reason MergeReason, n int) string {
	interrupt := reason == ReasonInterrupt
	switch {
	case interrupt && n == 1:
		return "[New request — it replaces the earlier one]"
	case interrupt:
		return fmt.Sprintf("[New request — it replaces the earlier one — %d events]", n)
	case n == 1:
		return "[New message — sent while you were working]"
	}
	return fmt.Sprintf("[New messages — sent while you were working — %d events]", n)
}

func closingNote(reason MergeReason) string {
	if reason == ReasonInterrupt {
		return "[Note] Your previous request was interrupted before it finished. Address the new request above; you may acknowledge the switch in a few words."
	}
	return "[Note] You were still working on the earlier request when this arrived. Carry on with that work and fold the new message in if it is relevant; if it is not, acknowledge it briefly and continue."
}

// SteerText is what a native steer hands the running turn: the new event alone, in the bare form
// (channel by id, authors by key: the turn already has the context and profiles), framed so the
// agent keeps going and folds it in.
func SteerText(ev nostr.Event, tag string) string {
	r := renderer{tag: tag}
	if strings.TrimSpace(r.tag) == "" {
		r.tag = DefaultTag
	}
	return newHeader(ReasonSteer, 1) + "\n\n[Buzz event: " + r.tag + "]\n" + r.eventBlock(ev, false) + "\n\n" + closingNote(ReasonSteer)
}

// slashCommand passes a bare slash command through as the first block when the batch is one
// event, nothing was cancelled, and the content (after leading mentions) starts with /word.
func (r *renderer) slashCommand() (string, bool) {
	if len(r.in.Events) != 1 || len(r.in.Cancelled) > 0 {
		return "", false
	}
	var names []string
	for _, p := range r.in.Profiles {
		if l := cleanLine(p.Label, 64); l != "" {
			names = append(names, l)
		}
	}
	sort.Slice(names, func(i, j int) bool {
		if len(names[i]) != len(names[j]) {
			return len(names[i]) > len(names[j])
		}
		return names[i] < names[j]
	})
	s := r.in.Events[0].Content
	for {
		s = strings.TrimLeftFunc(s, unicode.IsSpace)
		switch {
		case strings.HasPrefix(s, "@"):
			s = stripMention(s[1:], names)
			continue
		case strings.HasPrefix(s, "nostr:npub1"), strings.HasPrefix(s, "nostr:nprofile1"):
			s = s[tokenEnd(s):]
			continue
		}
		break
	}
	if len(s) >= 2 && s[0] == '/' && isASCIIAlnum(s[1]) {
		return strings.TrimRightFunc(s, unicode.IsSpace), true
	}
	return "", false
}

// stripMention removes a display name (longest known first, case-insensitive, ending at a word
// boundary) or else one word from the start of s.
func stripMention(s string, names []string) string {
	for _, n := range names {
		if len(s) >= len(n) && strings.EqualFold(s[:len(n)], n) {
			rest := s[len(n):]
			if rest == "" || !isWordByte(rest[0]) {
				return rest
			}
		}
	}
	return s[tokenEnd(s):]
}

func tokenEnd(s string) int {
	if i := strings.IndexFunc(s, unicode.IsSpace); i >= 0 {
		return i
	}
	return len(s)
}

func isASCIIAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func isWordByte(c byte) bool { return isASCIIAlnum(c) || c == '_' || c >= utf8.RuneSelf }

func timestamp(ts nostr.Timestamp) string {
	return time.Unix(int64(ts), 0).UTC().Format(time.RFC3339)
}

func tagsJSON(tags nostr.Tags) string {
	if tags == nil {
		tags = nostr.Tags{}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // agents read this: keep <, > and & literal
	if err := enc.Encode(tags); err != nil {
		return "[]"
	}
	return strings.TrimRight(buf.String(), "\n")
}

// contentIndent starts every continuation line of message content, so no line of it begins at
// the left margin where the renderer's own lines ("[3] name (hex) (time): …", "Tags: …",
// "--- Event 2 ---") do: a message cannot forge another author's entry or its own metadata.
const contentIndent = "    "

// indentContent renders message content for a multi-line block: every line break (also \r,
// vertical tab, form feed, NEL and the Unicode line and paragraph separators, which a reader may
// take for one) becomes "\n" + contentIndent. The text is otherwise unchanged.
func indentContent(s string) string {
	if !strings.ContainsAny(s, "\n\r\v\f\u0085\u2028\u2029") {
		return s
	}
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.Map(func(c rune) rune {
		switch c {
		case '\r', '\v', '\f', '\u0085', '\u2028', '\u2029':
			return '\n'
		}
		return c
	}, s)
	return strings.ReplaceAll(s, "\n", "\n"+contentIndent)
}

// cleanLine makes a profile label or channel field safe to embed in a single line: invalid
// UTF-8 replaced, line breaks turned into spaces, other control and bidi-override characters
// dropped, trimmed, cut to max runes.
func cleanLine(s string, max int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(c rune) rune {
		switch {
		case c == '\n' || c == '\t' || c == '\r':
			return ' '
		case unicode.IsControl(c), c >= 0x202A && c <= 0x202E, c >= 0x2066 && c <= 0x2069:
			return -1
		}
		return c
	}, s)
	s = strings.TrimSpace(s)
	if utf8.RuneCountInString(s) > max {
		s = strings.TrimSpace(string([]rune(s)[:max]))
	}
	return s
}

func deliveredIDs(lists ...[]nostr.Event) []string {
	seen := map[string]bool{}
	var out []string
	for _, l := range lists {
		for _, ev := range l {
			if ev.ID != "" && !seen[ev.ID] {
				seen[ev.ID] = true
				out = append(out, ev.ID)
			}
		}
	}
	return out
}
