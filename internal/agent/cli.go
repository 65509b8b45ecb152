package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/buzz-harness/buzz/internal/agent/provider"
)

// Command returns the buzz-agent command line: flags with environment
// fallbacks, then Serve on stdin/stdout. Diagnostics go to stderr only,
// because stdout carries ACP.
func Command(version string) *cobra.Command {
	var (
		providerName, model, stateDir string
		maxTokens                     int64
		shellTimeout                  time.Duration
		maxRounds                     int
	)
	cmd := &cobra.Command{
		Use:   "buzz-agent",
		Short: "An ACP agent for Buzz: OpenAI-compatible or Anthropic models, or an offline echo mode",
		Long: `buzz-agent speaks the Agent Client Protocol on stdin/stdout.

Providers: openai (OPENAI_API_KEY, OPENAI_BASE_URL — also Ollama, vLLM,
llama.cpp servers), anthropic (ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL), echo
(no model: replies through the buzz CLI; the default when no key is set).`,
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
		// "acp" is accepted and ignored: harnesses written for goose pass it.
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 || (len(args) == 1 && args[0] == "acp") {
				return nil
			}
			return fmt.Errorf("unexpected arguments %q (buzz-agent takes only flags)", args)
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			stderr := cmd.ErrOrStderr()
			p, err := buildProvider(providerName, model, maxTokens, os.Getenv, stderr)
			if err != nil {
				return err
			}
			if stateDir == "" {
				if stateDir, err = defaultStateDir(); err != nil {
					return err
				}
			}
			a, err := New(Config{
				Provider: p, StateDir: stateDir, Version: version, Log: stderr,
				ShellTimeout: shellTimeout, MaxToolRounds: maxRounds,
			})
			if err != nil {
				return err
			}
			return a.Serve(cmd.Context(), cmd.InOrStdin(), cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&providerName, "provider", os.Getenv("BUZZ_AGENT_PROVIDER"), "openai | anthropic | echo (env BUZZ_AGENT_PROVIDER; default: by which API key is set, else echo)")
	f.StringVar(&model, "model", os.Getenv("BUZZ_AGENT_MODEL"), "model name (env BUZZ_AGENT_MODEL)")
	f.StringVar(&stateDir, "state-dir", os.Getenv("BUZZ_AGENT_STATE_DIR"), "where sessions are kept (env BUZZ_AGENT_STATE_DIR; default $XDG_STATE_HOME/buzz-agent or ~/.local/state/buzz-agent)")
	f.Int64Var(&maxTokens, "max-tokens", envInt64("BUZZ_AGENT_MAX_TOKENS", 8192), "max output tokens per model call, anthropic (env BUZZ_AGENT_MAX_TOKENS)")
	f.DurationVar(&shellTimeout, "shell-timeout", envDuration("BUZZ_AGENT_SHELL_TIMEOUT", 120*time.Second), "timeout of one shell tool call (env BUZZ_AGENT_SHELL_TIMEOUT)")
	f.IntVar(&maxRounds, "max-tool-rounds", int(envInt64("BUZZ_AGENT_MAX_TOOL_ROUNDS", 20)), "model↔tool iterations per prompt (env BUZZ_AGENT_MAX_TOOL_ROUNDS)")
	return cmd
}

// Main runs the command and returns the process exit code.
func Main(ctx context.Context, version string, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	cmd := Command(version)
	cmd.SetArgs(args)
	cmd.SetIn(stdin)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	if err := cmd.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(stderr, "buzz-agent:", err)
		return 1
	}
	return 0
}

// buildProvider resolves --provider and the keys; nil means echo mode.
func buildProvider(name, model string, maxTokens int64, getenv func(string) string, stderr io.Writer) (provider.Provider, error) {
	name = strings.ToLower(strings.TrimSpace(name))
	if name == "" {
		switch {
		case getenv("OPENAI_API_KEY") != "":
			name = "openai"
		case getenv("ANTHROPIC_API_KEY") != "":
			name = "anthropic"
		default:
			fmt.Fprintln(stderr, "buzz-agent: no OPENAI_API_KEY or ANTHROPIC_API_KEY set: running in echo mode (no model; replies via the buzz CLI)")
			return nil, nil
		}
	}
	var p provider.Provider
	switch name {
	case "echo":
		fmt.Fprintln(stderr, "buzz-agent: echo mode (no model; replies via the buzz CLI)")
		return nil, nil
	case "openai":
		key, base := getenv("OPENAI_API_KEY"), getenv("OPENAI_BASE_URL")
		if key == "" && base == "" {
			return nil, errors.New("provider openai needs OPENAI_API_KEY (or OPENAI_BASE_URL for a local server that takes no key)")
		}
		p = provider.NewOpenAI(provider.OpenAIConfig{APIKey: key, BaseURL: base, Model: model})
	case "anthropic":
		key := getenv("ANTHROPIC_API_KEY")
		if key == "" {
			return nil, errors.New("provider anthropic needs ANTHROPIC_API_KEY")
		}
		p = provider.NewAnthropic(provider.AnthropicConfig{APIKey: key, BaseURL: getenv("ANTHROPIC_BASE_URL"), Model: model, MaxTokens: maxTokens})
	default:
		return nil, fmt.Errorf("unknown provider %q (want openai, anthropic or echo)", name)
	}
	fmt.Fprintf(stderr, "buzz-agent: provider %s\n", name)
	return &provider.Retrying{
		Provider: p,
		OnRetry: func(attempt int, delay time.Duration, err error) {
			fmt.Fprintf(stderr, "buzz-agent: %v; retry %d in %s\n", err, attempt, delay)
		},
	}, nil
}

func defaultStateDir() (string, error) {
	if x := os.Getenv("XDG_STATE_HOME"); x != "" && filepath.IsAbs(x) {
		return filepath.Join(x, "buzz-agent"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no --state-dir and no home directory: %w", err)
	}
	return filepath.Join(home, ".local", "state", "buzz-agent"), nil
}

func envInt64(name string, def int64) int64 {
	if v, err := strconv.ParseInt(os.Getenv(name), 10, 64); err == nil {
		return v
	}
	return def
}

func envDuration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil {
		return d
	}
	return def
}
