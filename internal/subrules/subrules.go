// Package subrules decides which channel events buzz-acp listens to (--subscribe, --config): an
// ordered list of rules, each naming channels, kinds, whether the agent must be mentioned, and
// an optional filter expression over the event. It is pure: the harness asks Match in intake and
// Filter when it builds a channel subscription; the relay knows nothing of rules.
//
// Filters are github.com/expr-lang/expr expressions restricted to upstream's vocabulary: the
// variables content, author, kind, channel_id and timestamp, and the functions str_contains,
// str_starts_with, str_ends_with and str_len. expr's own builtins are disabled and ranges are
// refused, so an evaluation is linear in the expression and the content; each still runs with a
// timeout (100 ms) as upstream's does, and a rule that times out five times in a row is
// disabled.
package subrules

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/BurntSushi/toml"
	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/vm"
	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/protocol"
)

// Limits, as upstream's.
const (
	MaxRules         = 100
	MaxFilterBytes   = 4096
	EvalTimeout      = 100 * time.Millisecond
	DisableAfter     = 5 // consecutive timeouts
	maxConcurrent    = 4 // evaluations running at once (a timed-out one may still run)
	DefaultPromptTag = "@mention"
)

// Mode is --subscribe.
type Mode string

const (
	ModeMentions Mode = "mentions"
	ModeAll      Mode = "all"
	ModeConfig   Mode = "config"
)

// ParseMode reads a --subscribe value; "" is mentions.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case "":
		return ModeMentions, nil
	case ModeMentions, ModeAll, ModeConfig:
		return m, nil
	}
	return "", fmt.Errorf("--subscribe must be mentions, all or config, got %q", s)
}

// Rule is one [[rules]] table.
type Rule struct {
	Name           string
	Channels       map[string]bool // nil: every channel
	Kinds          []int           // empty: any kind
	RequireMention bool
	Filter         string
	PromptTag      string

	program *vm.Program
}

// Set is an ordered rule list. Match and Filter may be called from any goroutine.
type Set struct {
	rules []*Rule
	sem   chan struct{}
	// timeout is how long an evaluation may take (EvalTimeout); run evaluates (expr.Run). Tests
	// replace both.
	timeout time.Duration
	run     func(*vm.Program, any) (any, error)

	mu       sync.Mutex
	timeouts []int  // consecutive timeouts per rule
	disabled []bool // rules past DisableAfter
	warn     func(rule, msg string)
}

// New builds a set from rules, compiling their filters. warn (nil: silent) hears when a rule
// is disabled.
func New(rules []Rule, warn func(rule, msg string)) (*Set, error) {
	if len(rules) == 0 {
		return nil, errors.New("no rules")
	}
	if len(rules) > MaxRules {
		return nil, fmt.Errorf("%d rules; at most %d", len(rules), MaxRules)
	}
	s := &Set{sem: make(chan struct{}, maxConcurrent), timeout: EvalTimeout, run: expr.Run, warn: warn,
		timeouts: make([]int, len(rules)), disabled: make([]bool, len(rules))}
	names := map[string]bool{}
	for i := range rules {
		r := rules[i]
		if strings.TrimSpace(r.Name) == "" {
			return nil, fmt.Errorf("rules[%d]: name is required", i)
		}
		if names[r.Name] {
			return nil, fmt.Errorf("rule %q: name is used twice", r.Name)
		}
		names[r.Name] = true
		if r.PromptTag == "" {
			r.PromptTag = r.Name
		}
		if r.Filter != "" {
			p, err := compile(r.Filter)
			if err != nil {
				return nil, fmt.Errorf("rule %q: filter: %w", r.Name, err)
			}
			r.program = p
		}
		s.rules = append(s.rules, &r)
	}
	return s, nil
}

// ForMode is the single rule of the mentions and all modes. kinds nil means the mode's default:
// DefaultKinds for mentions, any kind for all.
func ForMode(m Mode, kinds []int, noMentionFilter bool) *Set {
	r := Rule{Name: "mentions", PromptTag: DefaultPromptTag, Kinds: kinds, RequireMention: !noMentionFilter}
	if m == ModeAll {
		r = Rule{Name: "all", PromptTag: "all", Kinds: kinds}
	}
	s, _ := New([]Rule{r}, nil) // one named rule without a filter always builds
	return s
}

// file is the TOML document: rules is its only key.
type file struct {
	Rules []struct {
		Name           string `toml:"name"`
		Channels       any    `toml:"channels"`
		Kinds          []int  `toml:"kinds"`
		RequireMention bool   `toml:"require_mention"`
		Filter         string `toml:"filter"`
		PromptTag      string `toml:"prompt_tag"`
	} `toml:"rules"`
}

// Parse reads upstream's buzz-acp.toml. Any error names the rule (or the line) at fault.
func Parse(data []byte, warn func(rule, msg string)) (*Set, error) {
	var f file
	md, err := toml.Decode(string(data), &f)
	if err != nil {
		return nil, err
	}
	if extra := md.Undecoded(); len(extra) > 0 {
		return nil, fmt.Errorf("unknown key %q", extra[0].String())
	}
	if len(f.Rules) == 0 {
		return nil, errors.New("no [[rules]]")
	}
	rules := make([]Rule, len(f.Rules))
	for i, fr := range f.Rules {
		name := fr.Name
		if name == "" {
			name = fmt.Sprintf("rules[%d]", i)
		}
		if len(fr.Filter) > MaxFilterBytes {
			return nil, fmt.Errorf("rule %q: filter is %d bytes; at most %d", name, len(fr.Filter), MaxFilterBytes)
		}
		chans, err := parseChannels(fr.Channels)
		if err != nil {
			return nil, fmt.Errorf("rule %q: channels: %w", name, err)
		}
		rules[i] = Rule{Name: fr.Name, Channels: chans, Kinds: fr.Kinds, RequireMention: fr.RequireMention,
			Filter: fr.Filter, PromptTag: fr.PromptTag}
	}
	return New(rules, warn)
}

// parseChannels reads channels: exactly "all", or a list of channel UUIDs.
func parseChannels(v any) (map[string]bool, error) {
	switch c := v.(type) {
	case nil:
		return nil, errors.New(`is required ("all" or a list of channel UUIDs)`)
	case string:
		if c != "all" {
			return nil, fmt.Errorf(`must be "all" or a list of channel UUIDs, got %q`, c)
		}
		return nil, nil
	case []any:
		out := map[string]bool{}
		for _, x := range c {
			id, ok := x.(string)
			if !ok || !protocol.IsUUID(id) || id != strings.ToLower(id) {
				return nil, fmt.Errorf("%v is not a lowercase channel UUID", x)
			}
			out[id] = true
		}
		if len(out) == 0 {
			return nil, errors.New("the list is empty")
		}
		return out, nil
	}
	return nil, fmt.Errorf(`must be "all" or a list of channel UUIDs, got %v`, v)
}

// env is what a filter may read; its zero value types the variables at compile time.
type env struct {
	Content   string `expr:"content"`
	Author    string `expr:"author"`
	Kind      int    `expr:"kind"`
	ChannelID string `expr:"channel_id"`
	Timestamp int64  `expr:"timestamp"`
}

var functions = []expr.Option{
	expr.Function("str_contains", func(p ...any) (any, error) { return strings.Contains(p[0].(string), p[1].(string)), nil },
		new(func(string, string) bool)),
	expr.Function("str_starts_with", func(p ...any) (any, error) { return strings.HasPrefix(p[0].(string), p[1].(string)), nil },
		new(func(string, string) bool)),
	expr.Function("str_ends_with", func(p ...any) (any, error) { return strings.HasSuffix(p[0].(string), p[1].(string)), nil },
		new(func(string, string) bool)),
	expr.Function("str_len", func(p ...any) (any, error) { return utf8.RuneCountInString(p[0].(string)), nil },
		new(func(string) int)),
}

func compile(src string) (*vm.Program, error) {
	guard := &vocabulary{}
	opts := append([]expr.Option{expr.Env(env{}), expr.AsBool(), expr.DisableAllBuiltins(), expr.Patch(guard)}, functions...)
	p, err := expr.Compile(src, opts...)
	if guard.refused != "" {
		return nil, fmt.Errorf("%s is not allowed in a filter", guard.refused)
	}
	if err != nil {
		return nil, errors.New(strings.Join(strings.Fields(err.Error()), " "))
	}
	return p, nil
}

// vocabulary refuses what upstream's filters do not have and what could run long: ranges
// ("1..1000000000" builds an array that size), closures and the collection builtins (map,
// filter, all…), variables and pointers.
type vocabulary struct{ refused string }

func (v *vocabulary) Visit(node *ast.Node) {
	what := ""
	switch n := (*node).(type) {
	case *ast.BinaryNode:
		if n.Operator == ".." {
			what = "a range (..)"
		}
	case *ast.BuiltinNode:
		what = n.Name + "()"
	case *ast.PredicateNode, *ast.PointerNode:
		what = "a closure"
	case *ast.VariableDeclaratorNode:
		what = "let"
	}
	if what != "" && v.refused == "" {
		v.refused = what
	}
}

// Match returns the prompt tag of the first rule that matches ev for the agent self. A filter
// that fails or times out is no match for the whole event: later rules are not tried.
func (s *Set) Match(ev *nostr.Event, channel, self string) (tag string, ok bool) {
	for i, r := range s.rules {
		if !r.applies(channel) || !r.kindOK(ev.Kind) || (r.RequireMention && !mentions(ev.Tags, self)) || s.off(i) {
			continue
		}
		if r.program == nil {
			return r.PromptTag, true
		}
		matched, err := s.eval(i, r, env{Content: ev.Content, Author: ev.PubKey, Kind: ev.Kind, ChannelID: channel, Timestamp: int64(ev.CreatedAt)})
		if err != nil {
			return "", false
		}
		if matched {
			return r.PromptTag, true
		}
	}
	return "", false
}

func (r *Rule) applies(channel string) bool { return r.Channels == nil || r.Channels[channel] }

func (r *Rule) kindOK(k int) bool { return len(r.Kinds) == 0 || slices.Contains(r.Kinds, k) }

// mentions: a p tag or upstream's mention tag names self.
func mentions(tags nostr.Tags, self string) bool {
	for _, t := range tags {
		if len(t) >= 2 && (t[0] == "p" || t[0] == "mention") && t[1] == self {
			return true
		}
	}
	return false
}

func (s *Set) off(i int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.disabled[i]
}

var errTimeout = errors.New("filter timed out")

// eval runs rule i's filter with the timeout, counting consecutive timeouts.
func (s *Set) eval(i int, r *Rule, e env) (bool, error) {
	deadline := time.NewTimer(s.timeout)
	defer deadline.Stop()
	select {
	case s.sem <- struct{}{}:
	case <-deadline.C:
		return false, s.timedOut(i, r)
	}
	done := make(chan error, 1)
	var out any
	go func() {
		defer func() { <-s.sem }()
		var err error
		out, err = s.run(r.program, e)
		done <- err
	}()
	select {
	case err := <-done:
		s.mu.Lock()
		s.timeouts[i] = 0
		s.mu.Unlock()
		if err != nil {
			return false, err
		}
		b, _ := out.(bool)
		return b, nil
	case <-deadline.C:
		return false, s.timedOut(i, r)
	}
}

func (s *Set) timedOut(i int, r *Rule) error {
	s.mu.Lock()
	s.timeouts[i]++
	disable := s.timeouts[i] >= DisableAfter && !s.disabled[i]
	if disable {
		s.disabled[i] = true
	}
	s.mu.Unlock()
	if disable && s.warn != nil {
		s.warn(r.Name, fmt.Sprintf("filter timed out %d times in a row; rule disabled", DisableAfter))
	}
	return errTimeout
}

// Covers reports whether any rule applies to channel: a channel no rule covers is not
// subscribed.
func (s *Set) Covers(channel string) bool {
	return slices.ContainsFunc(s.rules, func(r *Rule) bool { return r.applies(channel) })
}

// Filter is the live subscription filter of channels for the agent self: the union of the
// applicable rules' kinds (any kind if one of them takes any), and #p self only when every
// applicable rule requires a mention. Channels sharing one filter get the union of their
// rules; Match decides each event.
func (s *Set) Filter(channels []string, self string) nostr.Filter {
	f := nostr.Filter{Tags: nostr.TagMap{"h": channels}}
	var kinds []int
	anyKind, mention := false, true
	for _, r := range s.rules {
		if !slices.ContainsFunc(channels, r.applies) {
			continue
		}
		if len(r.Kinds) == 0 {
			anyKind = true
		}
		kinds = append(kinds, r.Kinds...)
		mention = mention && r.RequireMention
	}
	if !anyKind {
		slices.Sort(kinds)
		f.Kinds = slices.Compact(kinds)
	}
	if mention {
		f.Tags["p"] = []string{self}
	}
	return f
}

// Rules lists the rules (for logs and tests).
func (s *Set) Rules() []Rule {
	out := make([]Rule, len(s.rules))
	for i, r := range s.rules {
		out[i] = *r
	}
	return out
}
