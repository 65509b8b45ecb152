package cmdflag_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/buzz-harness/buzz/internal/cmdflag"
)

type vals struct {
	name  string
	n     int
	on    bool
	every time.Duration
}

// run builds a command with four bound flags, runs it with args under env, and returns what
// the command saw.
func run(t *testing.T, env map[string]string, args ...string) (vals, string, error) {
	t.Helper()
	var v vals
	cmd := &cobra.Command{
		Use: "x", SilenceErrors: true, SilenceUsage: true,
		PersistentPreRunE: cmdflag.PreRun(func(k string) string { return env[k] }),
		RunE:              func(*cobra.Command, []string) error { return nil },
	}
	f := cmdflag.On(cmd.Flags())
	f.String(&v.name, "name", "X_NAME", "anon", "a name")
	f.Int(&v.n, "n", "X_N", 3, "a count")
	f.Bool(&v.on, "on", "X_ON", "a switch")
	f.Duration(&v.every, "every", "X_EVERY", time.Second, "a period")
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return v, out.String(), err
}

func TestEnvironmentFillsFlagsNotGivenOnTheCommandLine(t *testing.T) {
	v, _, err := run(t, map[string]string{"X_NAME": " ada ", "X_N": " 7 ", "X_ON": "true", "X_EVERY": "2m"})
	if err != nil {
		t.Fatal(err)
	}
	if v != (vals{" ada ", 7, true, 2 * time.Minute}) {
		t.Fatalf("got %+v", v)
	}
}

func TestCommandLineFlagWinsOverEnvironment(t *testing.T) {
	v, _, err := run(t, map[string]string{"X_NAME": "env", "X_N": "7"}, "--name", "flag", "--n", "9")
	if err != nil {
		t.Fatal(err)
	}
	if v.name != "flag" || v.n != 9 {
		t.Fatalf("got %+v", v)
	}
}

func TestBlankEnvironmentKeepsTheDefault(t *testing.T) {
	v, _, err := run(t, map[string]string{"X_NAME": "", "X_N": "  "})
	if err != nil || v.name != "anon" || v.n != 3 {
		t.Fatalf("got %+v, %v", v, err)
	}
}

func TestUnparseableEnvironmentValueIsAnErrorNamingTheVariable(t *testing.T) {
	for env, want := range map[string]string{
		"X_N":     `X_N="two" is not a whole number`,
		"X_ON":    `X_ON="two" is not true or false`,
		"X_EVERY": `X_EVERY="two" is not a duration`,
	} {
		_, _, err := run(t, map[string]string{env: "two"})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s=two: err = %v, want %q", env, err, want)
		}
	}
}

func TestBadEnvironmentValueIsIgnoredWhenTheFlagIsGiven(t *testing.T) {
	v, _, err := run(t, map[string]string{"X_N": "two"}, "--n", "4")
	if err != nil || v.n != 4 {
		t.Fatalf("got %+v, %v", v, err)
	}
}

func TestHelpNamesTheVariableAndTheRealDefaultNotTheEnvironmentValue(t *testing.T) {
	_, out, err := run(t, map[string]string{"X_NAME": "secret-from-env"}, "--help")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, `a name [env X_NAME] (default "anon")`) || !strings.Contains(out, "[env X_EVERY]") {
		t.Errorf("help lacks env names or defaults:\n%s", out)
	}
	if strings.Contains(out, "secret-from-env") {
		t.Errorf("help shows an environment value:\n%s", out)
	}
}
