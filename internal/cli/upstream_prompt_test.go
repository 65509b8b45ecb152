package cli

import (
	"bufio"
	"os"
	"strings"
	"testing"
)

// shellWords splits a command line into words, honouring double quotes (enough for the data).
func shellWords(line string) []string {
	var out []string
	var cur strings.Builder
	quoted, inWord := false, false
	for _, r := range line {
		switch {
		case r == '"':
			quoted, inWord = !quoted, true
		case r == ' ' && !quoted:
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out
}

// parseUpstreamLine finds the command a line names and parses its flags without running it.
// It returns "" when the line is one we support, else what is wrong.
func parseUpstreamLine(line string) (problem string, found bool) {
	words := shellWords(line)
	if len(words) == 0 || words[0] != "buzz" {
		return "does not start with buzz", false
	}
	root := NewRootCommand(IO{})
	cmd, rest, err := root.Find(words[1:])
	if err != nil || cmd == root {
		return "no such command", false
	}
	if cmd.HasSubCommands() {
		return cmd.CommandPath() + " needs a subcommand", false
	}
	_ = cmd.InheritedFlags() // merges the persistent flags, so Lookup sees them
	args := append([]string{}, rest...)
	hasFlags := false
	for i, w := range args {
		if !strings.HasPrefix(w, "--") {
			continue
		}
		hasFlags = true
		f := cmd.Flags().Lookup(strings.SplitN(strings.TrimPrefix(w, "--"), "=", 2)[0])
		if f != nil && i+1 < len(args) && strings.HasPrefix(args[i+1], "<") && strings.Contains(f.Value.Type(), "int") {
			args[i+1] = "1" // <ts> and the like stand for a number
		}
	}
	if err := cmd.ParseFlags(args); err != nil {
		return cmd.CommandPath() + ": " + err.Error(), true
	}
	if hasFlags {
		if err := cmd.ValidateRequiredFlags(); err != nil {
			return cmd.CommandPath() + ": " + err.Error(), true
		}
	}
	if err := cmd.ValidateArgs(cmd.Flags().Args()); err != nil {
		return cmd.CommandPath() + ": " + err.Error(), true
	}
	return "", true
}

func TestUpstreamPromptCommandLinesParse(t *testing.T) {
	f, err := os.Open("testdata/upstream_prompt_commands.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		n++
		if absent, ok := strings.CutPrefix(line, "absent: "); ok {
			if _, found := parseUpstreamLine(absent); found {
				t.Errorf("%q is marked absent but the CLI has it now: move the line up", absent)
			}
			continue
		}
		if problem, _ := parseUpstreamLine(line); problem != "" {
			t.Errorf("%q: %s", line, problem)
		}
	}
	if err := sc.Err(); err != nil || n < 30 {
		t.Fatalf("read %d lines: %v", n, err)
	}
}

func TestUpstreamPromptLineCheckCatchesUnknownFlagsAndMissingCommands(t *testing.T) {
	for line, want := range map[string]string{
		"buzz messages get --channel <uuid> --bogus 1":   "unknown flag: --bogus",
		"buzz messages get --since <ts>":                 "required flag(s) \"channel\" not set",
		"buzz mem get":                                   "accepts 1 arg(s), received 0",
		"buzz messages get --channel <uuid> --limit <n>": "",
		"buzz workflows list":                            "no such command",
		"buzz messages":                                  "buzz messages needs a subcommand",
	} {
		if got, _ := parseUpstreamLine(line); !strings.Contains(got, want) || (want == "") != (got == "") {
			t.Errorf("%q: got %q, want %q", line, got, want)
		}
	}
}
