// Package stack is `buzz up`: the relay, the harness and the web console in this process, the
// agent as the harness's child, all sharing one data directory that keeps the owner and agent
// identities, the relay database and the harness's session store across restarts.
package stack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/buzz-harness/buzz/internal/console"
	"github.com/buzz-harness/buzz/internal/harness"
	"github.com/buzz-harness/buzz/internal/observer"
	"github.com/buzz-harness/buzz/internal/prompt"
	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/relay"
)

// Defaults.
const (
	DefaultDataDir     = ".buzz"
	DefaultRelayAddr   = "127.0.0.1:3000"
	DefaultConsoleAddr = "127.0.0.1:3001"
	DefaultAgent       = "buzz-agent"
	DefaultAgentName   = "agent"
	modulePath         = "github.com/buzz-harness/buzz"
)

// Config configures Run.
type Config struct {
	DataDir      string   // default ./.buzz
	RelayAddr    string   // host:port for the relay; default 127.0.0.1:3000
	ConsoleAddr  string   // loopback host:port for the console; default 127.0.0.1:3001
	AgentCommand string   // "" = buzz-agent (echo mode unless a model key is set)
	AgentArgs    []string // arguments for AgentCommand
	AgentName    string   // the agent's profile name, set on first start; default "agent"
	AgentCwd     string   // the agent's working directory; default the current one
	AgentEnv     []string // extra KEY=VALUE for the agent
	BuzzCLIDir   string   // directory holding `buzz` for the agent's PATH; default this executable's
	// SystemPrompt ([System]) and TeamInstructions ([Team Instructions]) join the standing context.
	SystemPrompt     string
	TeamInstructions string
	// SessionPolicy is the harness's --session-policy; "" = thread.
	SessionPolicy harness.SessionPolicy
	Out           io.Writer
	// Ready, when set, is called once everything is up (tests use it instead of parsing Out).
	Ready func(Info)
}

// Info is what a running stack tells its user.
type Info struct {
	RelayURL     string // ws://…
	HTTPURL      string // http://… (what the CLI's BUZZ_RELAY_URL gets)
	ConsoleURL   string // with its token
	DataDir      string
	Owner        Identity
	Agent        Identity
	AgentName    string
	ChannelID    string // #general
	AgentCommand string
	LogFile      string
	CLI          string // how to run the buzz CLI here: "buzz", or "go run ./cmd/buzz" in the source tree
}

// Error is a startup failure with a one-line message for the user.
type Error struct{ Msg string }

func (e *Error) Error() string { return e.Msg }

func fail(format string, a ...any) error { return &Error{Msg: fmt.Sprintf(format, a...)} }

func (c *Config) defaults() error {
	if c.DataDir == "" {
		c.DataDir = DefaultDataDir
	}
	abs, err := filepath.Abs(c.DataDir)
	if err != nil {
		return fail("data dir %s: %v", c.DataDir, err)
	}
	c.DataDir = abs
	if c.RelayAddr == "" {
		c.RelayAddr = DefaultRelayAddr
	}
	if c.ConsoleAddr == "" {
		c.ConsoleAddr = DefaultConsoleAddr
	}
	if c.AgentName == "" {
		c.AgentName = DefaultAgentName
	}
	if c.AgentCwd == "" {
		if c.AgentCwd, err = os.Getwd(); err != nil {
			return fail("working directory: %v", err)
		}
	}
	if c.BuzzCLIDir == "" {
		if exe, err := os.Executable(); err == nil {
			// `buzz` is this very program (also under `go run`), so the agent's `buzz` calls
			// reach the same build.
			c.BuzzCLIDir = filepath.Dir(exe)
		}
	}
	if c.Out == nil {
		c.Out = io.Discard
	}
	return nil
}

// Run starts the stack and serves until ctx ends, then stops the harness (and with it the
// agent), the console and the relay, in that order.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.defaults(); err != nil {
		return err
	}
	if err := prepareDataDir(cfg.DataDir); err != nil {
		return err
	}
	ids, err := LoadIdentities(cfg.DataDir)
	if err != nil {
		return err
	}
	agentCmd, agentEnv, err := resolveAgent(cfg)
	if err != nil {
		return err
	}

	logPath := filepath.Join(cfg.DataDir, "buzz.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fail("data dir %s: cannot write its log: %v", cfg.DataDir, err)
	}
	defer logFile.Close()
	logger := slog.New(slog.NewTextHandler(logFile, &slog.HandlerOptions{Level: slog.LevelInfo}))

	relayLn, err := listen("relay", cfg.RelayAddr, "--relay-addr")
	if err != nil {
		return err
	}
	consoleLn, err := console.Listen(cfg.ConsoleAddr)
	if err != nil {
		relayLn.Close()
		if errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), "in use") {
			return fail("console port %s is already in use (pass --console-addr 127.0.0.1:PORT)", cfg.ConsoleAddr)
		}
		return fail("%v", err)
	}

	rl, err := relay.Open(relay.Config{DataDir: filepath.Join(cfg.DataDir, "relay"), Logger: logger.With("part", "relay")})
	if err != nil {
		relayLn.Close()
		consoleLn.Close()
		return fail("relay: %v", err)
	}
	addr := relayLn.Addr().String()
	info := Info{
		RelayURL: "ws://" + addr, HTTPURL: "http://" + addr, DataDir: cfg.DataDir,
		Owner: ids.Owner, Agent: ids.Agent, AgentCommand: agentCmd, LogFile: logPath, CLI: cliCommand(),
	}

	relayCtx, stopRelay := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRelay()
	relayDone := make(chan error, 1)
	go func() { relayDone <- relay.Serve(relayCtx, relayLn, rl) }()
	stopAll := func() { stopRelay(); <-relayDone }

	bctx, bcancel := context.WithTimeout(ctx, 30*time.Second)
	boot, err := bootstrap(bctx, info.HTTPURL, cfg.DataDir, ids, cfg.AgentName)
	bcancel()
	if err != nil {
		consoleLn.Close()
		stopAll()
		if ctx.Err() != nil {
			return nil
		}
		return fail("setting up the data dir: %v", err)
	}
	info.ChannelID, info.AgentName = boot.ChannelID, boot.AgentName

	bus := observer.NewBus(2000)
	h, err := harness.New(harness.Config{
		RelayURL:            info.RelayURL,
		SecretKey:           ids.Agent.SecretKey,
		Owner:               ids.Owner.Pubkey,
		AgentCommand:        agentCmd,
		AgentArgs:           cfg.AgentArgs,
		AgentCwd:            cfg.AgentCwd,
		AgentEnv:            append(agentEnv, cfg.AgentEnv...),
		BuzzCLIDir:          cfg.BuzzCLIDir,
		SessionTitle:        info.AgentName,
		BasePrompt:          prompt.DefaultBasePrompt(),
		SystemPrompt:        cfg.SystemPrompt,
		TeamInstructions:    cfg.TeamInstructions,
		SessionPolicy:       cfg.SessionPolicy,
		Memory:              true,
		StateDir:            filepath.Join(cfg.DataDir, "harness"),
		Logger:              logger.With("part", "harness"),
		Observer:            bus,
		Version:             "buzz-up",
		RespondTo:           harness.RespondOwnerOnly,
		ContextMessageLimit: 12,
	})
	if err != nil {
		consoleLn.Close()
		stopAll()
		return fail("harness: %v", err)
	}

	con, err := console.New(console.Config{RelayURL: info.HTTPURL, OwnerKey: ids.Owner.SecretKey, AgentPubkey: ids.Agent.Pubkey, Bus: bus, Logger: logger.With("part", "console")})
	if err != nil {
		consoleLn.Close()
		stopAll()
		return fail("console: %v", err)
	}
	info.ConsoleURL = con.URL(consoleLn.Addr().String())
	consoleCtx, stopConsole := context.WithCancel(context.WithoutCancel(ctx))
	defer stopConsole()
	consoleDone := make(chan error, 1)
	go func() { consoleDone <- console.Serve(consoleCtx, consoleLn, con) }()

	hctx, stopHarness := context.WithCancel(ctx)
	defer stopHarness()
	harnessDone := make(chan error, 1)
	go func() { harnessDone <- h.Run(hctx) }()

	printBanner(cfg.Out, info)
	if cfg.Ready != nil {
		cfg.Ready(info)
	}

	var runErr error
	select {
	case <-ctx.Done():
		stopHarness()
		runErr = <-harnessDone
	case runErr = <-harnessDone:
		// The owner's !shutdown, or a fatal harness error: stop the rest too.
	}
	stopConsole()
	<-consoleDone
	stopAll()
	if runErr != nil {
		return fail("harness stopped: %v", runErr)
	}
	return nil
}

// listen opens the relay port with a clear message when it is taken.
func listen(what, addr, flag string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		return ln, nil
	}
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, fail("%s port %s is already in use (is another buzz up running? pass %s HOST:PORT)", what, addr, flag)
	}
	return nil, fail("%s: cannot listen on %s: %v", what, addr, err)
}

// prepareDataDir creates the data dir (0700) or checks that an existing one is a usable
// directory, so a bad path fails with one line before anything starts.
func prepareDataDir(dir string) error {
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fail("cannot create data dir %s: %v", dir, unwrapPath(err))
		}
		return nil
	case err != nil:
		return fail("cannot read data dir %s: %v", dir, unwrapPath(err))
	case !st.IsDir():
		return fail("data dir %s is not a directory", dir)
	}
	f, err := os.CreateTemp(dir, ".probe-*")
	if err != nil {
		return fail("data dir %s is not writable: %v", dir, unwrapPath(err))
	}
	name := f.Name()
	f.Close()
	os.Remove(name)
	if _, err := os.ReadDir(dir); err != nil {
		return fail("data dir %s is not readable: %v", dir, unwrapPath(err))
	}
	return nil
}

func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// resolveAgent finds the agent command. The default buzz-agent is looked for beside this
// executable, then on PATH, then — when running from the source tree, as under `go run` — built
// once into <data-dir>/bin. It also returns env for the default agent (its state lives in the
// data dir so its sessions survive restarts).
func resolveAgent(cfg Config) (string, []string, error) {
	if cfg.AgentCommand != "" && cfg.AgentCommand != DefaultAgent {
		p, err := lookCommand(cfg.AgentCommand)
		if err != nil {
			return "", nil, fail("agent command %q not found (check --agent-command, or install it on PATH)", cfg.AgentCommand)
		}
		return p, nil, nil
	}
	env := []string{"BUZZ_AGENT_STATE_DIR=" + filepath.Join(cfg.DataDir, "agent")}
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), DefaultAgent)
		if isExecutable(p) {
			return p, env, nil
		}
	}
	if p, err := exec.LookPath(DefaultAgent); err == nil {
		return p, env, nil
	}
	root := sourceRoot()
	if root == "" {
		return "", nil, fail("buzz-agent not found beside buzz or on PATH: install it (go install %s/cmd/buzz-agent@latest) or pass --agent-command", modulePath)
	}
	out := filepath.Join(cfg.DataDir, "bin", DefaultAgent)
	fmt.Fprintf(cfg.Out, "building buzz-agent from %s …\n", root)
	cmd := exec.Command("go", "build", "-o", out, "./cmd/buzz-agent")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", nil, fail("building buzz-agent failed: %s", firstLine(string(b), err))
	}
	return out, env, nil
}

func lookCommand(c string) (string, error) {
	if strings.ContainsRune(c, filepath.Separator) {
		if !isExecutable(c) {
			return "", os.ErrNotExist
		}
		return filepath.Abs(c)
	}
	return exec.LookPath(c)
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// sourceRoot is the module root when the working directory is inside this project's source
// tree and a Go toolchain is available, else "".
func sourceRoot() string {
	if _, err := exec.LookPath("go"); err != nil {
		return ""
	}
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil {
			if strings.HasPrefix(strings.TrimSpace(string(b)), "module "+modulePath) {
				if _, err := os.Stat(filepath.Join(dir, "cmd", DefaultAgent)); err == nil {
					return dir
				}
			}
			return ""
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

func firstLine(s string, err error) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return err.Error()
	}
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// printBanner tells the user, briefly, where everything is and how to talk to the agent.
func printBanner(w io.Writer, in Info) {
	fmt.Fprintf(w, `buzz up: running — Ctrl-C stops everything
  relay    %s
  console  %s
  agent    @%s  %s  (%s)
  owner    %s  (you)
  keys     %s, %s (mode 0600)
  log      %s

Talk to the agent from a shell:
  export BUZZ_RELAY_URL=%s BUZZ_PRIVATE_KEY=$(cat %s)
  %s messages send --channel %s --content "@%s hello"
`,
		in.RelayURL, in.ConsoleURL,
		in.AgentName, protocol.Npub(in.Agent.Pubkey), filepath.Base(in.AgentCommand),
		protocol.Npub(in.Owner.Pubkey),
		in.Owner.KeyFile, in.Agent.KeyFile, in.LogFile,
		in.HTTPURL, shellQuote(in.Owner.KeyFile), in.CLI, in.ChannelID, in.AgentName)
}

// cliCommand is how the user can run the buzz CLI: installed on PATH, else through `go run`
// from the source tree (as under `go run ./cmd/buzz up`), else this executable.
func cliCommand() string {
	if _, err := exec.LookPath("buzz"); err == nil {
		return "buzz"
	}
	if root := sourceRoot(); root != "" {
		if wd, _ := os.Getwd(); wd == root {
			return "go run ./cmd/buzz"
		}
		return "go run " + shellQuote(filepath.Join(root, "cmd", "buzz"))
	}
	if exe, err := os.Executable(); err == nil {
		return shellQuote(exe)
	}
	return "buzz"
}

// shellQuote quotes p for a POSIX shell when it needs it.
func shellQuote(p string) string {
	if p != "" && strings.Trim(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+:@=,") == "" {
		return p
	}
	return "'" + strings.ReplaceAll(p, "'", `'\''`) + "'"
}

// PrintEnv writes shell exports that make the buzz CLI act as the owner of the stack in
// dataDir (creating the identities if this is the first use).
func PrintEnv(w io.Writer, dataDir, relayAddr string) error {
	if dataDir == "" {
		dataDir = DefaultDataDir
	}
	if relayAddr == "" {
		relayAddr = DefaultRelayAddr
	}
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return fail("data dir %s: %v", dataDir, err)
	}
	if err := prepareDataDir(abs); err != nil {
		return err
	}
	ids, err := LoadIdentities(abs)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "export BUZZ_RELAY_URL=%s\nexport BUZZ_PRIVATE_KEY=%s\n", shellQuote("http://"+relayAddr), protocol.Nsec(ids.Owner.SecretKey))
	return nil
}
