package agent

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/buzz-harness/buzz/internal/agent/provider"
	"github.com/buzz-harness/buzz/internal/cmdflag"
)

// Command returns the buzz-agent command line (also `buzz agent`): flags with environment
// fallbacks, then Serve on stdin/stdout. Diagnostics go to stderr only, because stdout carries
// ACP.
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
		Version:           version,
		SilenceUsage:      true,
		SilenceErrors:     true,
		PersistentPreRunE: cmdflag.PreRun(os.Getenv),
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
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return a.Serve(ctx, cmd.InOrStdin(), cmd.OutOrStdout())
		},
	}
	f := cmdflag.On(cmd.Flags())
	f.String(&providerName, "provider", "BUZZ_AGENT_PROVIDER", "", "openai | anthropic | echo (default: by which API key is set, else echo)")
	f.String(&model, "model", "BUZZ_AGENT_MODEL", "", "model name (default: the provider's)")
	f.String(&stateDir, "state-dir", "BUZZ_AGENT_STATE_DIR", "", "where sessions are kept (default $XDG_STATE_HOME/buzz-agent or ~/.local/state/buzz-agent)")
	f.Int64(&maxTokens, "max-tokens", "BUZZ_AGENT_MAX_TOKENS", 8192, "max output tokens per model call (anthropic)")
	f.Duration(&shellTimeout, "shell-timeout", "BUZZ_AGENT_SHELL_TIMEOUT", 120*time.Second, "timeout of one shell tool call")
	f.Int(&maxRounds, "max-tool-rounds", "BUZZ_AGENT_MAX_TOOL_ROUNDS", 20, "model↔tool iterations per prompt")
	return cmd
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
		p = provider.NewOpenAI(provider.OpenAIConfig{APIKey: key, BaseURL: base, Model: model,
			Organization: getenv("OPENAI_ORG_ID"), Project: getenv("OPENAI_PROJECT_ID")})
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
