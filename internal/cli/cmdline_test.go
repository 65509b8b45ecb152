package cli

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/buzz-harness/buzz/internal/cmdflag"
)

func TestFormatHelpNamesBothValues(t *testing.T) {
	r := runCLI(nil, "", "--help")
	line := regexp.MustCompile(`(?m)^.*--format.*$`).FindString(r.stdout)
	if r.code != 0 || !strings.Contains(line, "json") || !strings.Contains(line, "compact") {
		t.Fatalf("exit %d, --format help line %q", r.code, line)
	}
}

func TestGlobalFlagsHelpNamesTheirEnvironmentVariables(t *testing.T) {
	r := runCLI(nil, "", "channels", "list", "--help")
	for _, env := range []string{"BUZZ_RELAY_URL", "BUZZ_PRIVATE_KEY", "BUZZ_AUTH_TAG", "BUZZ_TIMEOUT_SECS", "BUZZ_CONNECT_TIMEOUT_SECS"} {
		if !strings.Contains(r.stdout, "[env "+env+"]") {
			t.Errorf("help lacks [env %s]:\n%s", env, r.stdout)
		}
	}
}

func TestUnknownSubcommandIsNamedAsSuchNotAsAnUnknownFlag(t *testing.T) {
	r := runCLI(nil, "", "messages", "snd", "--channel", "x")
	e := r.errJSON(t)
	if r.code != ExitUsage || e.Category != "user_error" || !strings.Contains(e.Message, `unknown subcommand "snd"`) || !strings.Contains(e.Message, "send") {
		t.Fatalf("exit %d stderr %s", r.code, r.stderr)
	}
}

func TestUnknownSubcommandWithHelpIsAnErrorNotTheGroupsHelp(t *testing.T) {
	r := runCLI(nil, "", "users", "sett", "--help")
	if e := r.errJSON(t); r.code != ExitUsage || !strings.Contains(e.Message, `unknown subcommand "sett"`) || r.stdout != "" {
		t.Fatalf("exit %d stdout %q stderr %s", r.code, r.stdout, r.stderr)
	}
}

func TestUsersSetHelpPrintsItsOwnHelp(t *testing.T) {
	r := runCLI(nil, "", "users", "set", "--help")
	if r.code != 0 || !strings.Contains(r.stdout, "--display-name") {
		t.Fatalf("exit %d stdout %q stderr %s", r.code, r.stdout, r.stderr)
	}
}

func TestGroupWithoutSubcommandListsThem(t *testing.T) {
	r := runCLI(nil, "", "users")
	if e := r.errJSON(t); r.code != ExitUsage || !strings.Contains(e.Message, "get, presence, set-presence, set-profile") {
		t.Fatalf("exit %d stderr %s", r.code, r.stderr)
	}
}

func TestRelayURLWithUnsupportedSchemeIsAUsageError(t *testing.T) {
	env := map[string]string{"BUZZ_PRIVATE_KEY": strings.Repeat("1", 64)}
	for _, url := range []string{"ftp://relay.example", "ws://"} {
		r := runCLI(env, "", "--relay", url, "channels", "list")
		if e := r.errJSON(t); r.code != ExitUsage || e.Category != "user_error" || !strings.Contains(e.Message, url) {
			t.Errorf("--relay %s: exit %d stderr %s", url, r.code, r.stderr)
		}
	}
}

func TestUnparseableEnvironmentValueIsAUsageErrorNamingIt(t *testing.T) {
	r := runCLI(map[string]string{"BUZZ_TIMEOUT_SECS": "ten"}, "", "channels", "list")
	if e := r.errJSON(t); r.code != ExitUsage || !strings.Contains(e.Message, `BUZZ_TIMEOUT_SECS="ten"`) {
		t.Fatalf("exit %d stderr %s", r.code, r.stderr)
	}
}

func TestBundledCommandsRunUnderBuzz(t *testing.T) {
	for _, c := range []struct{ name, flag string }{{"agent", "--provider"}, {"relay", "--public-url"}, {"acp", "--agent-owner"}, {"up", "--print-env"}} {
		r := runCLI(nil, "", c.name, "--help")
		if r.code != 0 || !strings.Contains(r.stdout, c.flag) {
			t.Errorf("buzz %s --help: exit %d, lacks %s:\n%s", c.name, r.code, c.flag, r.stdout)
		}
		if strings.Contains(r.stdout, "Global Flags") {
			t.Errorf("buzz %s --help lists the CLI's global flags, which it ignores:\n%s", c.name, r.stdout)
		}
	}
}

// daemonFlags are the configuration flags of buzz up and the three bundled binaries.
func daemonFlags(t *testing.T) map[string][]*pflag.Flag {
	t.Helper()
	root := NewRootCommand(IO{})
	out := map[string][]*pflag.Flag{}
	for _, name := range []string{"up", "agent", "relay", "acp"} {
		cmd, _, err := root.Find([]string{name})
		if err != nil || cmd.Name() != name {
			t.Fatalf("no buzz %s: %v", name, err)
		}
		cmd.Flags().VisitAll(func(f *pflag.Flag) { out[name] = append(out[name], f) })
	}
	out["buzz"] = nil
	root.PersistentFlags().VisitAll(func(f *pflag.Flag) { out["buzz"] = append(out["buzz"], f) })
	return out
}

func TestEveryConfigurationFlagHasAnEnvironmentVariable(t *testing.T) {
	for cmd, flags := range daemonFlags(t) {
		for _, f := range flags {
			if cmdflag.Env(f) == "" && f.Name != "print-env" {
				t.Errorf("%s --%s has no environment variable", cmd, f.Name)
			}
		}
	}
}

func TestReadmeDocumentsEveryFlagAndEnvironmentVariable(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	for cmd, flags := range daemonFlags(t) {
		for _, f := range flags {
			if !strings.Contains(readme, "`--"+f.Name+"`") {
				t.Errorf("README lacks %s `--%s`", cmd, f.Name)
			}
			if env := cmdflag.Env(f); env != "" && !strings.Contains(readme, "`"+env+"`") {
				t.Errorf("README lacks %s's `%s`", cmd, env)
			}
		}
	}
}
