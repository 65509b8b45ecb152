// Package cmdflag binds command-line flags to environment variables, the one way every buzz
// binary reads its configuration: a flag given on the command line wins, else its environment
// variable, else the flag's default. `--help` names each flag's variable as "[env X]" and shows
// the real default (never a value taken from the environment, which may be a secret).
//
// An environment value that does not parse (BUZZ_ACP_AGENTS=two) is an error, not a silent
// fallback to the default.
package cmdflag

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// envKey is the pflag annotation holding a flag's environment variable.
const envKey = "cmdflag-env"

// Set registers env-bound flags on one flag set.
type Set struct{ fs *pflag.FlagSet }

// On returns a Set that adds flags to fs.
func On(fs *pflag.FlagSet) Set { return Set{fs} }

// String adds a string flag bound to env.
func (s Set) String(p *string, name, env, def, usage string) {
	s.fs.StringVar(p, name, def, usage)
	Bind(s.fs, name, env)
}

// Int adds an int flag bound to env.
func (s Set) Int(p *int, name, env string, def int, usage string) {
	s.fs.IntVar(p, name, def, usage)
	Bind(s.fs, name, env)
}

// Int64 adds an int64 flag bound to env.
func (s Set) Int64(p *int64, name, env string, def int64, usage string) {
	s.fs.Int64Var(p, name, def, usage)
	Bind(s.fs, name, env)
}

// Float64 adds a float64 flag bound to env.
func (s Set) Float64(p *float64, name, env string, def float64, usage string) {
	s.fs.Float64Var(p, name, def, usage)
	Bind(s.fs, name, env)
}

// Bool adds a boolean flag (default false) bound to env.
func (s Set) Bool(p *bool, name, env, usage string) {
	s.fs.BoolVar(p, name, false, usage)
	Bind(s.fs, name, env)
}

// Duration adds a duration flag bound to env.
func (s Set) Duration(p *time.Duration, name, env string, def time.Duration, usage string) {
	s.fs.DurationVar(p, name, def, usage)
	Bind(s.fs, name, env)
}

// Bind ties an existing flag to env and names env in its usage. It panics on an unknown flag:
// that is a programming error, found by the first test that builds the command.
func Bind(fs *pflag.FlagSet, name, env string) {
	f := fs.Lookup(name)
	if f == nil {
		panic("cmdflag: no flag --" + name)
	}
	if err := fs.SetAnnotation(name, envKey, []string{env}); err != nil {
		panic(err)
	}
	f.Usage += " [env " + env + "]"
}

// Env is the environment variable bound to f, or "".
func Env(f *pflag.Flag) string {
	if v := f.Annotations[envKey]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// Apply gives every bound flag of fs that was not set on the command line the value of its
// environment variable, when that is set and not blank. getenv is os.Getenv in the binaries.
// The flag is not marked as changed, so "set on the command line" checks (mutually exclusive
// flags) see only the command line.
func Apply(fs *pflag.FlagSet, getenv func(string) string) error {
	var first error
	fs.VisitAll(func(f *pflag.Flag) {
		env := Env(f)
		if first != nil || env == "" || f.Changed {
			return
		}
		raw := getenv(env)
		v := strings.TrimSpace(raw)
		if v == "" {
			return
		}
		if f.Value.Type() == "string" {
			v = raw // prompts and other text keep their whitespace
		}
		if err := f.Value.Set(v); err != nil {
			first = fmt.Errorf("%s=%q is not %s", env, raw, describe(f.Value.Type()))
		}
	})
	return first
}

func describe(typ string) string {
	switch typ {
	case "int", "int64", "uint", "uint64":
		return "a whole number"
	case "bool":
		return "true or false"
	case "float64":
		return "a number"
	case "duration":
		return "a duration (e.g. 90s, 2m)"
	}
	return "a valid " + typ
}

// PreRun is a cobra PersistentPreRunE that applies the environment to the running command's
// flags (its own and the persistent ones it inherits).
func PreRun(getenv func(string) string) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		return Apply(cmd.Flags(), getenv)
	}
}

// Main runs a standalone binary's root command and returns its exit code: 0, or 1 after
// printing "<name>: <error>" on stderr.
func Main(cmd *cobra.Command) int {
	if err := cmd.Execute(); err != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "%s: %v\n", cmd.Name(), err)
		return 1
	}
	return 0
}

// List splits a comma-separated flag value into its trimmed, non-empty items.
func List(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
