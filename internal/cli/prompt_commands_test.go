package cli

import (
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/buzz-harness/buzz/internal/prompt"
)

// promptMention is one `buzz <verb> <sub> --flag …` found in prompt text.
type promptMention struct {
	text  string   // the mention as written, for messages
	words []string // command words; "a|b" names alternatives
	flags []string // flag names without dashes
}

var (
	buzzWordRe = regexp.MustCompile(`\bbuzz\b`)
	wordRe     = regexp.MustCompile(`^[a-z][a-z0-9-]*(\|[a-z][a-z0-9-]*)*$`)
	flagRe     = regexp.MustCompile(`--([a-z][a-z0-9-]*)`)
)

// parseMentions finds every lowercase "buzz" followed by command words and flags, up to the
// end of the code span or line it sits in. Placeholders (<command>) end the command words.
func parseMentions(text string) []promptMention {
	var out []promptMention
	for _, loc := range buzzWordRe.FindAllStringIndex(text, -1) {
		rest := text[loc[1]:]
		if end := strings.IndexAny(rest, "`\n"); end >= 0 {
			rest = rest[:end]
		}
		fields := strings.Fields(rest)
		m := promptMention{text: "buzz" + rest}
		i := 0
		for ; i < len(fields) && wordRe.MatchString(fields[i]); i++ {
			m.words = append(m.words, fields[i])
		}
		if len(m.words) == 0 && i < len(fields) && strings.HasPrefix(fields[i], "<") {
			continue // `buzz <command> --help`: a pattern, not a command
		}
		for _, f := range fields[i:] {
			if sub := flagRe.FindStringSubmatch(f); sub != nil && strings.HasPrefix(strings.TrimLeft(f, "[("), "--") {
				m.flags = append(m.flags, sub[1])
			}
		}
		if len(m.words) > 0 || len(m.flags) > 0 {
			out = append(out, m)
		}
	}
	return out
}

// checkMention walks the cobra tree along m's words (every alternative of an "a|b" word) and
// reports each command or flag the CLI lacks. Words after a leaf are its positional arguments.
func checkMention(root *cobra.Command, m promptMention) []string {
	var problems []string
	var walk func(cmd *cobra.Command, words []string)
	walk = func(cmd *cobra.Command, words []string) {
		if len(words) > 0 && cmd.HasSubCommands() {
			for _, alt := range strings.Split(words[0], "|") {
				sub := findSub(cmd, alt)
				if sub == nil {
					problems = append(problems, `"`+m.text+`": no command "`+cmd.CommandPath()+" "+alt+`"`)
					continue
				}
				walk(sub, words[1:])
			}
			return
		}
		if cmd.HasSubCommands() && cmd != root && len(m.flags) > 0 && m.flags[0] != "help" {
			problems = append(problems, `"`+m.text+`": "`+cmd.CommandPath()+`" needs a subcommand`)
			return
		}
		cmd.InitDefaultHelpFlag()
		for _, f := range m.flags {
			if cmd.Flags().Lookup(f) == nil && cmd.InheritedFlags().Lookup(f) == nil {
				problems = append(problems, `"`+m.text+`": "`+cmd.CommandPath()+`" has no flag --`+f)
			}
		}
	}
	walk(root, m.words)
	return problems
}

func findSub(cmd *cobra.Command, name string) *cobra.Command {
	for _, c := range cmd.Commands() {
		if c.Name() == name || c.HasAlias(name) {
			return c
		}
	}
	return nil
}

func checkPromptText(text string) []string {
	root := NewRootCommand(IO{Stdout: io.Discard, Stderr: io.Discard, Env: func(string) string { return "" }})
	var problems []string
	for _, m := range parseMentions(text) {
		problems = append(problems, checkMention(root, m)...)
	}
	return problems
}

func TestPromptsNameOnlyCommandsAndFlagsTheCLIHas(t *testing.T) {
	for name, text := range map[string]string{
		"base prompt":      prompt.DefaultBasePrompt(),
		"heartbeat prompt": prompt.DefaultHeartbeatPrompt(time.Unix(1700000000, 0)),
	} {
		if n := len(parseMentions(text)); n < 3 {
			t.Errorf("%s: found only %d buzz commands; is the parser still reading it?", name, n)
		}
		for _, p := range checkPromptText(text) {
			t.Errorf("%s names what the CLI lacks: %s", name, p)
		}
	}
}

func TestPromptCheckCatchesMissingCommandsAndFlags(t *testing.T) {
	for text, want := range map[string]string{
		"run `buzz workflows list` now":                     `no command "buzz workflows"`,
		"`buzz messages send --channel <uuid> --bogus <x>`": "has no flag --bogus",
		"`buzz messages edit|frobnicate --event <id>`":      `no command "buzz messages frobnicate"`,
		"`buzz dms list --limit 5 [--since <ts>]`":          "has no flag --since",
		"`buzz feed --since <ts>`":                          "needs a subcommand",
		"pipe it: `printf x | buzz uploads put --file <f>`": `no command "buzz uploads"`,
	} {
		problems := checkPromptText(text)
		if len(problems) != 1 || !strings.Contains(problems[0], want) {
			t.Errorf("%q: problems %q, want one containing %q", text, problems, want)
		}
	}
	for _, ok := range []string{
		"`buzz --help`", "`buzz <command> --help`", "`buzz mem get core --owner <pk>`",
		"`buzz messages edit|delete --event <id>`", "the `buzz` tool", "`buzz reactions get --event <id>`",
	} {
		if p := checkPromptText(ok); len(p) != 0 {
			t.Errorf("%q: unexpected problems %q", ok, p)
		}
	}
}
