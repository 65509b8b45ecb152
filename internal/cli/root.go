// Package cli implements the `buzz` command line: keys, channels, messages, users, reactions and
// canvas, all over the relay's NIP-98 HTTP bridge. Output is JSON on stdout; failures are one JSON
// line {"error","message","retryable"} on stderr with upstream's exit codes.
//
// Other packages add top-level subcommands (e.g. `buzz up`) with Register from an init function.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/buzz-harness/buzz/internal/client"
	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/spf13/cobra"
)

// Defaults and limits (upstream values).
const (
	DefaultRelayURL       = "http://localhost:3000"
	defaultTimeoutSecs    = 30
	defaultConnectTimeout = 15
)

var (
	registryMu sync.Mutex
	registry   []func() *cobra.Command
)

// Register adds a top-level subcommand, built by newCmd, to every root NewRootCommand creates.
// Call it from an init function in the file that defines the command. Inside the command,
// Options(cmd) gives the resolved global flags.
func Register(newCmd func() *cobra.Command) {
	registryMu.Lock()
	defer registryMu.Unlock()
	registry = append(registry, newCmd)
}

// IO is where a command reads and writes; Env looks up environment variables.
type IO struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Env    func(string) string
}

// GlobalOptions are the resolved global settings (flag, else env, else default).
type GlobalOptions struct {
	RelayURL   string
	PrivateKey string // as given (hex or nsec); "" when unset
	AuthTag    string
	Timeout    time.Duration
	Connect    time.Duration
}

type app struct {
	io                  IO
	relayFlag, keyFlag  string
	authTagFlag, format string
}

// apps maps each root command to its state, so Options works from any subcommand (including
// registered ones with their own PersistentPreRun hooks).
var apps sync.Map // *cobra.Command → *app

// Options returns the global settings (flags, env, defaults) for a command run under a root
// from NewRootCommand.
func Options(cmd *cobra.Command) GlobalOptions {
	if a, ok := apps.Load(cmd.Root()); ok {
		return a.(*app).options()
	}
	return GlobalOptions{RelayURL: DefaultRelayURL, Timeout: defaultTimeoutSecs * time.Second, Connect: defaultConnectTimeout * time.Second}
}

// NewRootCommand builds the `buzz` command tree. Commands print their own JSON; errors are
// returned as *Error (see Main for how they are reported).
func NewRootCommand(stdio IO) *cobra.Command {
	if stdio.Env == nil {
		stdio.Env = os.Getenv
	}
	a := &app{io: stdio}
	root := &cobra.Command{
		Use:           "buzz",
		Short:         "Buzz command line: channels, messages, users over a Buzz relay",
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	apps.Store(root, a)
	root.SetIn(stdio.Stdin)
	root.SetOut(stdio.Stdout)
	root.SetErr(stdio.Stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return usageError("%s", err)
	})
	pf := root.PersistentFlags()
	pf.StringVar(&a.relayFlag, "relay", "", "relay URL (ws://, wss://, http://, https://) [env BUZZ_RELAY_URL, default "+DefaultRelayURL+"]")
	pf.StringVar(&a.keyFlag, "private-key", "", "private key, hex or nsec [env BUZZ_PRIVATE_KEY]")
	pf.StringVar(&a.authTagFlag, "auth-tag", "", "NIP-OA auth tag JSON sent as x-auth-tag [env BUZZ_AUTH_TAG]")
	pf.StringVar(&a.format, "format", "json", "output format: json")

	root.AddCommand(a.keysCommand(), a.channelsCommand(), a.messagesCommand(), a.usersCommand(),
		a.reactionsCommand(), a.canvasCommand())
	registryMu.Lock()
	for _, f := range registry {
		root.AddCommand(f())
	}
	registryMu.Unlock()
	return root
}

// Main runs the CLI with args and returns the process exit code.
func Main(args []string, stdio IO) int {
	root := NewRootCommand(stdio)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	if err == nil {
		return ExitOK
	}
	var ce *Error
	if !errors.As(err, &ce) {
		// Anything cobra itself returns (unknown command, missing required flag, bad args) is
		// a usage error; command failures are always *Error already.
		ce = usageError("%s", err)
	}
	line, _ := json.Marshal(ce)
	fmt.Fprintf(stdio.Stderr, "%s\n", line)
	return ce.Code
}

func (a *app) options() GlobalOptions {
	pick := func(flag, env, def string) string {
		if flag != "" {
			return flag
		}
		if v := strings.TrimSpace(a.io.Env(env)); v != "" {
			return v
		}
		return def
	}
	secs := func(env string, def int) time.Duration {
		if n, err := strconv.Atoi(strings.TrimSpace(a.io.Env(env))); err == nil && n > 0 {
			return time.Duration(n) * time.Second
		}
		return time.Duration(def) * time.Second
	}
	return GlobalOptions{
		RelayURL:   pick(a.relayFlag, "BUZZ_RELAY_URL", DefaultRelayURL),
		PrivateKey: pick(a.keyFlag, "BUZZ_PRIVATE_KEY", ""),
		AuthTag:    pick(a.authTagFlag, "BUZZ_AUTH_TAG", ""),
		Timeout:    secs("BUZZ_TIMEOUT_SECS", defaultTimeoutSecs),
		Connect:    secs("BUZZ_CONNECT_TIMEOUT_SECS", defaultConnectTimeout),
	}
}

// bridge returns a relay client for the configured identity, or a key error (exit 3).
func (a *app) bridge() (*client.Bridge, error) {
	o := a.options()
	if o.PrivateKey == "" {
		return nil, keyError("no private key: set BUZZ_PRIVATE_KEY or pass --private-key (hex or nsec)")
	}
	sk, err := protocol.ParseSecretKey(o.PrivateKey)
	if err != nil {
		return nil, keyError("%s", err)
	}
	u := protocol.HTTPBase(o.RelayURL)
	if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") || strings.TrimPrefix(strings.TrimPrefix(u, "http://"), "https://") == "" {
		return nil, usageError("invalid relay URL %q", o.RelayURL)
	}
	b := client.NewBridge(o.RelayURL, sk)
	b.AuthTag = o.AuthTag
	dialer := &net.Dialer{Timeout: o.Connect}
	b.HTTPClient = &http.Client{
		Timeout:   o.Timeout,
		Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, DialContext: dialer.DialContext},
	}
	return b, nil
}

// run wraps a command body: its result is printed as JSON, its error classified.
func (a *app) run(fn func(ctx context.Context, cmd *cobra.Command) (any, error)) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		if a.format != "json" && a.format != "compact" {
			return usageError("--format must be json or compact")
		}
		out, err := fn(cmd.Context(), cmd)
		if err != nil {
			return classify(err)
		}
		enc := json.NewEncoder(a.io.Stdout)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(out); err != nil {
			return &Error{Category: "error", Message: "write output: " + err.Error(), Code: ExitOther}
		}
		return nil
	}
}

// leaf builds a runnable subcommand that takes no positional arguments.
func (a *app) leaf(use, short string, fn func(ctx context.Context, cmd *cobra.Command) (any, error)) *cobra.Command {
	return &cobra.Command{Use: use, Short: short, Args: cobra.NoArgs, RunE: a.run(fn)}
}

func group(use, short string, subs ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{Use: use, Short: short, Args: cobra.NoArgs}
	c.AddCommand(subs...)
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		names := make([]string, 0, len(subs))
		for _, s := range subs {
			names = append(names, s.Name())
		}
		return usageError("%s needs a subcommand: %s", cmd.CommandPath(), strings.Join(names, ", "))
	}
	return c
}

// channelArg validates a --channel value: channel ids are UUIDs (lowercased).
func channelArg(s string) (string, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	if !protocol.IsUUID(s) {
		return "", usageError("--channel must be a channel UUID, got %q", s)
	}
	return s, nil
}

func eventIDArg(flag, s string) (string, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	if !protocol.IsHex64(s) {
		return "", usageError("--%s must be a 64-hex event id, got %q", flag, s)
	}
	return s, nil
}

// readContent returns --content, reading stdin verbatim for "-".
func (a *app) readContent(v string) (string, error) {
	if v != "-" {
		return v, nil
	}
	if a.io.Stdin == nil {
		return "", usageError("--content - needs stdin")
	}
	raw, err := io.ReadAll(io.LimitReader(a.io.Stdin, maxContentBytes+1))
	if err != nil {
		return "", usageError("read stdin: %s", err)
	}
	return string(raw), nil
}

// writeResult is the normalized answer to a write command.
type writeResult struct {
	EventID  string `json:"event_id"`
	Accepted bool   `json:"accepted"`
	Message  string `json:"message"`
}

// publish signs and submits ev; an accepted=false answer becomes an error.
func publish(ctx context.Context, b *client.Bridge, ev *nostrEvent) (writeResult, error) {
	res, err := b.Publish(ctx, ev)
	if err != nil {
		return writeResult{}, err
	}
	if !res.Accepted {
		return writeResult{}, rejected(res.Message)
	}
	return writeResult{EventID: res.EventID, Accepted: true, Message: res.Message}, nil
}
