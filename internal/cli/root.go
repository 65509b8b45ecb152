// Package cli implements the `buzz` command line: keys, channels, messages, users, reactions and
// canvas, all over the relay's NIP-98 HTTP bridge. Output is JSON on stdout; failures are one JSON
// line {"error","message","retryable"} on stderr with upstream's exit codes.
//
// The same binary carries the rest of the project as subcommands — `buzz up` (the whole local
// stack), `buzz relay`, `buzz acp` and `buzz agent` (the standalone binaries' commands) — so a
// newcomer needs to build only this one.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/buzz-harness/buzz/internal/acpcmd"
	"github.com/buzz-harness/buzz/internal/agent"
	"github.com/buzz-harness/buzz/internal/client"
	"github.com/buzz-harness/buzz/internal/cmdflag"
	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/protocol/ownerauth"
	"github.com/buzz-harness/buzz/internal/relaycmd"
)

// Defaults and limits (upstream values).
const (
	DefaultRelayURL       = "http://localhost:3000"
	defaultTimeoutSecs    = 30
	defaultConnectTimeout = 15
)

// IO is where a command reads and writes; Env looks up environment variables.
type IO struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Env    func(string) string
}

// globalOptions are the resolved global settings (flag, else env, else default).
type globalOptions struct {
	RelayURL   string
	PrivateKey string // as given (hex or nsec); "" when unset
	AuthTag    string
	Timeout    time.Duration
	Connect    time.Duration
}

type app struct {
	io                       IO
	relay, key               string
	authTag, format          string
	timeoutSecs, connectSecs int
	// helpErr is an error found while printing help, which cobra cannot return.
	helpErr error
	// literalContent: content "-" is text, not "read stdin" (buzz mcp, whose stdin is the protocol).
	literalContent bool
}

// NewRootCommand builds the `buzz` command tree. Commands print their own JSON; errors are
// returned as *Error (see Main for how they are reported).
func NewRootCommand(stdio IO) *cobra.Command {
	root, _ := newRoot(stdio)
	return root
}

func newRoot(stdio IO) (*cobra.Command, *app) {
	if stdio.Env == nil {
		stdio.Env = os.Getenv
	}
	a := &app{io: stdio}
	root := &cobra.Command{
		Use:               "buzz",
		Short:             "Buzz command line: channels, messages, users over a Buzz relay; buzz up runs the whole stack",
		SilenceErrors:     true,
		SilenceUsage:      true,
		PersistentPreRunE: cmdflag.PreRun(stdio.Env),
	}
	root.SetIn(stdio.Stdin)
	root.SetOut(stdio.Stdout)
	root.SetErr(stdio.Stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return usageError("%s", err)
	})
	// A group's help with a word that is not one of its subcommands (buzz users sett --help)
	// would print the group's help and exit 0; name the unknown subcommand instead.
	defaultHelp := root.HelpFunc()
	root.SetHelpFunc(func(cmd *cobra.Command, args []string) {
		if cmd.HasSubCommands() && len(cmd.Flags().Args()) > 0 {
			a.helpErr = unknownSubcommand(cmd, cmd.Flags().Args()[0])
			return
		}
		defaultHelp(cmd, args)
	})
	pf := cmdflag.On(root.PersistentFlags())
	pf.String(&a.relay, "relay", "BUZZ_RELAY_URL", DefaultRelayURL, "relay URL (ws://, wss://, http://, https://)")
	pf.String(&a.key, "private-key", "BUZZ_PRIVATE_KEY", "", "private key, hex or nsec")
	pf.String(&a.authTag, "auth-tag", "BUZZ_AUTH_TAG", "", "NIP-OA auth tag JSON: sent as x-auth-tag and put on every event signed")
	pf.String(&a.format, "format", "BUZZ_FORMAT", "json", "output format: json (full events) or compact (fewer fields)")
	pf.Int(&a.timeoutSecs, "timeout", "BUZZ_TIMEOUT_SECS", defaultTimeoutSecs, "seconds one relay request may take")
	pf.Int(&a.connectSecs, "connect-timeout", "BUZZ_CONNECT_TIMEOUT_SECS", defaultConnectTimeout, "seconds to connect to the relay")

	root.AddCommand(a.keysCommand(), a.channelsCommand(), a.messagesCommand(), a.usersCommand(), a.remindersCommand(),
		a.reactionsCommand(), a.canvasCommand(), a.memCommand(), a.mcpCommand(), a.feedCommand(), a.dmsCommand(),
		a.uploadCommand(), a.observeCommand())
	// buzz up and the standalone binaries' commands (under their short names) take none of the
	// CLI's global flags, so their help does not list them.
	for name, cmd := range map[string]*cobra.Command{
		"up":    a.upCommand(),
		"relay": relaycmd.Command(),
		"acp":   acpcmd.Command(),
		"agent": agent.Command(Version),
	} {
		cmd.Use = name
		cmd.SetUsageTemplate(strings.Replace(cmd.UsageTemplate(), "{{if .HasAvailableInheritedFlags}}", "{{if false}}", 1))
		root.AddCommand(cmd)
	}
	return root, a
}

// Version is stamped by the build ("dev" otherwise) and reported by `buzz agent --version`.
var Version = "dev"

// Main runs the CLI with args and returns the process exit code.
func Main(args []string, stdio IO) int {
	root, a := newRoot(stdio)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	if err == nil {
		if a.helpErr != nil {
			err = a.helpErr
		} else {
			return ExitOK
		}
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

func (a *app) options() globalOptions {
	return globalOptions{
		RelayURL:   strings.TrimSpace(a.relay),
		PrivateKey: strings.TrimSpace(a.key),
		AuthTag:    strings.TrimSpace(a.authTag),
		Timeout:    time.Duration(a.timeoutSecs) * time.Second,
		Connect:    time.Duration(a.connectSecs) * time.Second,
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
	// A comma-separated list (as buzz-acp hands its agents) is tried in order by the bridge.
	urls := client.SplitRelayURLs(o.RelayURL)
	if len(urls) == 0 {
		urls = []string{o.RelayURL}
	}
	for _, u := range urls {
		if err := checkRelayURL(u); err != nil {
			return nil, err
		}
	}
	if o.Timeout <= 0 || o.Connect <= 0 {
		return nil, usageError("--timeout and --connect-timeout must be positive seconds")
	}
	if o.AuthTag != "" {
		// It goes on every event signed: a malformed one is refused before any request.
		if _, err := ownerauth.Parse(o.AuthTag); err != nil {
			return nil, usageError("--auth-tag / BUZZ_AUTH_TAG: %s", err)
		}
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

// checkRelayURL refuses a relay URL the bridge cannot use before any request: a scheme other
// than ws, wss, http or https (a bare host:port means http), or no host.
func checkRelayURL(raw string) error {
	s := raw
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return usageError("invalid relay URL %q: %s", raw, err)
	}
	switch strings.ToLower(u.Scheme) {
	case "ws", "wss", "http", "https":
	default:
		return usageError("relay URL %q has unsupported scheme %q (use ws://, wss://, http:// or https://)", raw, u.Scheme)
	}
	if u.Host == "" {
		return usageError("invalid relay URL %q: no host", raw)
	}
	return nil
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
	c := &cobra.Command{Use: use, Short: short}
	c.AddCommand(subs...)
	// Unknown flags are let through here so that `buzz messages snd --channel x` is reported as
	// the unknown subcommand it is, not as an unknown --channel.
	c.FParseErrWhitelist.UnknownFlags = true
	c.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) > 0 {
			return unknownSubcommand(cmd, args[0])
		}
		return nil
	}
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		return usageError("%s needs a subcommand: %s", cmd.CommandPath(), subcommandNames(cmd))
	}
	return c
}

func subcommandNames(cmd *cobra.Command) string {
	var names []string
	for _, s := range cmd.Commands() {
		if s.IsAvailableCommand() {
			names = append(names, s.Name())
		}
	}
	return strings.Join(names, ", ")
}

func unknownSubcommand(cmd *cobra.Command, name string) *Error {
	return usageError("unknown subcommand %q for %q (one of: %s)", name, cmd.CommandPath(), subcommandNames(cmd))
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
// readContent is a --content value (from stdin for "-"), refused past maxContentBytes; what
// names it in that error ("content", "canvas").
func (a *app) readContent(what, v string) (string, error) {
	if v == "-" && !a.literalContent {
		if a.io.Stdin == nil {
			return "", usageError("--content - needs stdin")
		}
		raw, err := io.ReadAll(io.LimitReader(a.io.Stdin, maxContentBytes+1))
		if err != nil {
			return "", usageError("read stdin: %s", err)
		}
		v = string(raw)
	}
	if len(v) > maxContentBytes {
		return "", usageError("%s is %d bytes; the limit is %d (64 KiB)", what, len(v), maxContentBytes)
	}
	return v, nil
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
