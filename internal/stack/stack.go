// Package stack is `buzz up`: the relay, the harness and the web console in this process, the
// agent as the harness's child, all sharing one data directory that keeps the owner and agent
// identities, the relay database and the harness's session store across restarts.
package stack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/buzz-harness/buzz/internal/acpcmd"
	"github.com/buzz-harness/buzz/internal/atomicfile"
	"github.com/buzz-harness/buzz/internal/client"
	"github.com/buzz-harness/buzz/internal/console"
	"github.com/buzz-harness/buzz/internal/harness"
	"github.com/buzz-harness/buzz/internal/observer"
	"github.com/buzz-harness/buzz/internal/prompt"
	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/protocol/ownerauth"
	"github.com/buzz-harness/buzz/internal/relay"
)

// Defaults.
const (
	DefaultDataDir     = ".buzz"
	DefaultRelayAddr   = "127.0.0.1:3000"
	DefaultConsoleAddr = "127.0.0.1:3001"
	DefaultAgentName   = "agent"
	modulePath         = "github.com/buzz-harness/buzz"
)

// Config configures Run.
type Config struct {
	DataDir     string // default ./.buzz
	RelayAddr   string // host:port for the relay; default 127.0.0.1:3000
	ConsoleAddr string // loopback host:port for the console; default 127.0.0.1:3001
	// AgentCommand is the ACP agent to run. "" runs this program's own `agent` subcommand
	// (buzz agent: echo mode unless a model key is set), so no second binary is needed.
	AgentCommand string
	AgentArgs    []string // arguments for AgentCommand
	AgentName    string   // the agent's profile name, set on first start; default "agent"
	AgentCwd     string   // the agent's working directory; default the current one
	AgentEnv     []string // extra KEY=VALUE for the agent
	// BuzzCLIDir is the directory holding the `buzz` the agent replies with, put first on its
	// PATH; default <data-dir>/bin, whose buzz links to this executable.
	BuzzCLIDir string
	// SystemPrompt ([System]) and TeamInstructions ([Team Instructions]) join the standing context.
	SystemPrompt     string
	TeamInstructions string
	// SessionPolicy is the harness's --session-policy; "" = thread.
	SessionPolicy harness.SessionPolicy
	// Permissions answers the agent's permission requests: "" or "allow", "deny", or "ask" (the
	// owner answers in the thread or with the console's buttons).
	Permissions string
	// NoMCP leaves out the MCP server every session gets by default: `buzz mcp` (as
	// <data-dir>/bin/buzz-mcp), so an agent whose shell is sandboxed can still reach Buzz.
	NoMCP bool
	// Out receives progress, the banner and what stopped.
	Out io.Writer
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
	AgentCommand string // as the banner shows it, e.g. "buzz agent"
	LogFile      string
	CLI          string // how to run the buzz CLI here: "buzz", or "go run ./cmd/buzz" in the source tree
}

// Error is a startup failure with a one-line message for the user.
type Error struct{ Msg string }

func (e *Error) Error() string { return e.Msg }

func fail(format string, a ...any) error { return &Error{Msg: fmt.Sprintf(format, a...)} }

// Files in the data dir besides keys, state (stack.json) and the parts' own directories.
const (
	lockFile    = "buzz-up.lock" // held while a stack runs on this data dir
	runningFile = "running.json" // the running stack's addresses, for --print-env
	binDir      = "bin"          // bin/buzz: a stable link to this executable
	selfName    = "buzz"
	mcpName     = "buzz-mcp" // run under this name, buzz is `buzz mcp` (no arguments, as --mcp-command runs it)
)

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
	switch c.Permissions {
	case "", "allow", "deny", "ask":
	default:
		return fail("--permissions %q: want allow, deny or ask", c.Permissions)
	}
	if c.AgentCwd == "" {
		if c.AgentCwd, err = os.Getwd(); err != nil {
			return fail("working directory: %v", err)
		}
	}
	if c.Out == nil {
		c.Out = io.Discard
	}
	return nil
}

// Run starts the stack and serves until ctx ends, then stops the harness (and with it the
// agent), the console and the relay, in that order, saying so on Out.
//
// Everything that can be refused quickly (the agent command, both ports, the data dir and its
// lock) is checked before anything is created, and a start that fails removes a data dir it
// created, so a mistake leaves nothing behind.
func Run(ctx context.Context, cfg Config) (err error) {
	if err := cfg.defaults(); err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return fail("cannot find this program's executable: %v", err)
	}
	agentCmd, agentArgs, err := resolveAgent(cfg)
	if err != nil {
		return err
	}
	relayLn, err := listen("relay", cfg.RelayAddr, "--relay-addr")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			relayLn.Close()
		}
	}()
	consoleLn, err := console.Listen(cfg.ConsoleAddr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), "in use") {
			return fail("console port %s is already in use (pass --console-addr 127.0.0.1:PORT)", cfg.ConsoleAddr)
		}
		return fail("%v", err)
	}
	defer func() {
		if err != nil {
			consoleLn.Close()
		}
	}()

	created, err := prepareDataDir(cfg.DataDir)
	if err != nil {
		return err
	}
	started := false // once the banner is out, the data dir is a real one, whatever happens later
	if created != "" {
		defer func() {
			if err != nil && !started {
				os.RemoveAll(created) // a failed first start leaves no half-made data dir
			}
		}()
	}
	lock, err := lockDataDir(cfg.DataDir)
	if err != nil {
		return err
	}
	defer lock.Unlock()
	if created != "" {
		fmt.Fprintf(cfg.Out, "buzz up: first start in %s: creating the owner and agent identities\n", cfg.DataDir)
	} else {
		fmt.Fprintf(cfg.Out, "buzz up: starting from %s\n", cfg.DataDir)
	}
	ids, err := LoadIdentities(cfg.DataDir)
	if err != nil {
		return err
	}
	// The agent runs bin/buzz in the data dir: a path that stays the same across restarts (even
	// under `go run`, whose executable moves every time), so the harness resumes its sessions,
	// and a directory holding `buzz` to put first on the agent's PATH for its replies.
	self, err := linkSelf(cfg.DataDir, exe)
	if err != nil {
		return err
	}
	mcpCommand := ""
	if !cfg.NoMCP {
		if mcpCommand, err = linkAs(cfg.DataDir, exe, mcpName); err != nil {
			return err
		}
	}
	cliDir := cfg.BuzzCLIDir
	if cliDir == "" {
		cliDir = filepath.Dir(self)
	}
	agentEnv := cfg.AgentEnv
	if agentCmd == "" {
		agentCmd, agentArgs = self, append([]string{"agent"}, agentArgs...)
		agentEnv = append([]string{"BUZZ_AGENT_STATE_DIR=" + filepath.Join(cfg.DataDir, "agent")}, agentEnv...)
	}

	logPath := filepath.Join(cfg.DataDir, "buzz.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fail("data dir %s: cannot write its log: %v", cfg.DataDir, err)
	}
	defer logFile.Close()
	logger := slog.New(slog.NewTextHandler(logFile, &slog.HandlerOptions{Level: slog.LevelInfo}))

	fmt.Fprintf(cfg.Out, "buzz up: starting the relay on %s\n", relayLn.Addr())
	rl, err := relay.Open(relay.Config{DataDir: filepath.Join(cfg.DataDir, "relay"), Logger: logger.With("part", "relay")})
	if err != nil {
		return fail("relay: %v", err)
	}
	addr := relayLn.Addr().String()
	info := Info{
		RelayURL: "ws://" + addr, HTTPURL: "http://" + addr, DataDir: cfg.DataDir,
		Owner: ids.Owner, Agent: ids.Agent, AgentCommand: commandLabel(agentCmd, agentArgs, self),
		LogFile: logPath, CLI: cliCommand(),
	}

	relayCtx, stopRelay := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRelay()
	relayDone := make(chan error, 1)
	go func() { relayDone <- relay.Serve(relayCtx, relayLn, rl) }()
	stopRelayAndWait := func() { stopRelay(); <-relayDone }

	fmt.Fprintln(cfg.Out, "buzz up: setting up #general and the profiles")
	bctx, bcancel := context.WithTimeout(ctx, 30*time.Second)
	boot, err := bootstrap(bctx, info.HTTPURL, cfg.DataDir, ids, cfg.AgentName)
	bcancel()
	if err != nil {
		stopRelayAndWait()
		if ctx.Err() != nil {
			fmt.Fprintln(cfg.Out, "buzz up: interrupted during setup; relay stopped")
			return ctx.Err()
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
		AgentArgs:           agentArgs,
		AgentCwd:            cfg.AgentCwd,
		AgentEnv:            append(slices.Clip(agentEnv), ownerauth.EnvVar+"="+boot.AuthTag),
		BuzzCLIDir:          cliDir,
		SessionTitle:        info.AgentName,
		BasePrompt:          prompt.DefaultBasePrompt(),
		SystemPrompt:        cfg.SystemPrompt,
		TeamInstructions:    cfg.TeamInstructions,
		SessionPolicy:       cfg.SessionPolicy,
		PermissionsDeny:     cfg.Permissions == "deny",
		PermissionsAsk:      cfg.Permissions == "ask",
		Memory:              true,
		StateDir:            filepath.Join(cfg.DataDir, "harness"),
		Logger:              logger.With("part", "harness"),
		Observer:            bus,
		Version:             "buzz-up",
		RespondTo:           harness.RespondOwnerOnly,
		ContextMessageLimit: acpcmd.DefaultContextMessageLimit,
		// Published at every start, so an older data dir converges too.
		ChannelAddPolicy: client.AddPolicyOwnerOnly,
		AuthTag:          boot.AuthTag,
		MCPCommand:       mcpCommand,
	})
	if err != nil {
		stopRelayAndWait()
		return fail("harness: %v", err)
	}

	con, err := console.New(console.Config{RelayURL: info.HTTPURL, OwnerKey: ids.Owner.SecretKey, AgentPubkey: ids.Agent.Pubkey, HomeChannel: boot.ChannelID, Bus: bus, Logger: logger.With("part", "console"),
		SecretKeys: []string{ids.Owner.SecretKey, ids.Agent.SecretKey}})
	if err != nil {
		stopRelayAndWait()
		return fail("console: %v", err)
	}
	info.ConsoleURL = con.URL(consoleLn.Addr().String())
	if err := writeRunning(cfg.DataDir, info); err != nil {
		stopRelayAndWait()
		return fail("data dir %s: %v", cfg.DataDir, err)
	}
	defer os.Remove(filepath.Join(cfg.DataDir, runningFile))
	consoleCtx, stopConsole := context.WithCancel(context.WithoutCancel(ctx))
	defer stopConsole()
	consoleDone := make(chan error, 1)
	go func() { consoleDone <- console.Serve(consoleCtx, consoleLn, con) }()

	fmt.Fprintf(cfg.Out, "buzz up: starting the agent (%s)\n", info.AgentCommand)
	hctx, stopHarness := context.WithCancel(ctx)
	defer stopHarness()
	harnessDone := make(chan error, 1)
	go func() { harnessDone <- h.Run(hctx) }()

	printBanner(cfg.Out, info)
	started = true
	if cfg.Ready != nil {
		cfg.Ready(info)
	}

	var runErr error
	select {
	case <-ctx.Done():
		fmt.Fprintln(cfg.Out, "\nbuzz up: stopping")
		stopHarness()
		// A harness stopped while it was still starting returns its context's error: a stop
		// asked for, not a failure.
		if runErr = <-harnessDone; errors.Is(runErr, context.Canceled) {
			runErr = nil
		}
	case runErr = <-harnessDone:
		// The owner's !shutdown, or a fatal harness error: stop the rest too.
	}
	fmt.Fprintf(cfg.Out, "buzz up: stopped the harness and the agent (%s)\n", info.AgentCommand)
	stopConsole()
	<-consoleDone
	fmt.Fprintln(cfg.Out, "buzz up: stopped the console")
	stopRelayAndWait()
	fmt.Fprintf(cfg.Out, "buzz up: stopped the relay; everything is kept in %s\n", cfg.DataDir)
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
// directory, so a bad path fails with one line before anything starts. It returns the topmost
// directory it created ("" if dir existed), which a failed start removes again.
func prepareDataDir(dir string) (created string, err error) {
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		created = dir
		for p := filepath.Dir(dir); p != created; p = filepath.Dir(p) {
			if _, err := os.Stat(p); err == nil {
				break
			}
			created = p
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return "", fail("cannot create data dir %s: %v", dir, unwrapPath(err))
		}
		return created, nil
	case err != nil:
		return "", fail("cannot read data dir %s: %v", dir, unwrapPath(err))
	case !st.IsDir():
		return "", fail("data dir %s is not a directory", dir)
	}
	f, err := os.CreateTemp(dir, ".probe-*")
	if err != nil {
		return "", fail("data dir %s is not writable: %v", dir, unwrapPath(err))
	}
	name := f.Name()
	f.Close()
	os.Remove(name)
	if _, err := os.ReadDir(dir); err != nil {
		return "", fail("data dir %s is not readable: %v", dir, unwrapPath(err))
	}
	return "", nil
}

// lockDataDir takes the data dir's `buzz up` lock: two stacks on one data dir would share keys,
// database and session store.
func lockDataDir(dir string) (*atomicfile.Lock, error) {
	l, err := atomicfile.TryLock(filepath.Join(dir, lockFile))
	var le *atomicfile.LockedError
	switch {
	case errors.As(err, &le):
		return nil, fail("data dir %s is in use by another buzz up (%s): stop it first, or pass --data-dir", dir, le.Holder())
	case err != nil:
		return nil, fail("data dir %s: %v", dir, err)
	}
	return l, nil
}

// linkSelf points <dataDir>/bin/buzz at exe, replacing an older link, and returns the link.
func linkSelf(dataDir, exe string) (string, error) { return linkAs(dataDir, exe, selfName) }

// linkAs points <dataDir>/bin/<name> at exe, replacing an older link, and returns the link.
func linkAs(dataDir, exe, name string) (string, error) {
	dir := filepath.Join(dataDir, binDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fail("data dir %s: %v", dataDir, unwrapPath(err))
	}
	link := filepath.Join(dir, name)
	if cur, err := os.Readlink(link); err == nil && cur == exe {
		return link, nil
	}
	tmp := link + ".new"
	os.Remove(tmp)
	if err := os.Symlink(exe, tmp); err != nil {
		return "", fail("data dir %s: cannot link %s: %v", dataDir, link, unwrapPath(err))
	}
	if err := os.Rename(tmp, link); err != nil {
		os.Remove(tmp)
		return "", fail("data dir %s: cannot link %s: %v", dataDir, link, unwrapPath(err))
	}
	return link, nil
}

// running is what runningFile records while a stack runs.
type running struct {
	PID        int    `json:"pid"`
	RelayURL   string `json:"relayURL"`
	HTTPURL    string `json:"httpURL"`
	ConsoleURL string `json:"consoleURL"`
}

func writeRunning(dataDir string, in Info) error {
	b, _ := json.MarshalIndent(running{PID: os.Getpid(), RelayURL: in.RelayURL, HTTPURL: in.HTTPURL, ConsoleURL: in.ConsoleURL}, "", "  ")
	return atomicfile.WriteFile(filepath.Join(dataDir, runningFile), append(b, '\n'), 0o600)
}

// runningStack returns the record of the stack running on dataDir, if one is: the record is
// trusted only while its writer still holds the lock (a crash leaves a stale file behind).
func runningStack(dataDir string) (running, bool) {
	var r running
	b, err := os.ReadFile(filepath.Join(dataDir, runningFile))
	if err != nil || json.Unmarshal(b, &r) != nil || r.HTTPURL == "" {
		return r, false
	}
	l, err := atomicfile.TryLock(filepath.Join(dataDir, lockFile))
	if err == nil {
		l.Unlock()
		return r, false
	}
	return r, true
}

func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// resolveAgent finds a custom agent command; "" means this program's own `agent` subcommand.
func resolveAgent(cfg Config) (string, []string, error) {
	if cfg.AgentCommand == "" {
		return "", cfg.AgentArgs, nil
	}
	p, err := lookCommand(cfg.AgentCommand)
	if err != nil {
		return "", nil, fail("agent command %q not found (check --agent-command, or install it on PATH)", cfg.AgentCommand)
	}
	return p, cfg.AgentArgs, nil
}

// commandLabel is how the banner names the agent: "buzz agent" for our own, else the command's
// base name and arguments.
func commandLabel(command string, args []string, self string) string {
	name := filepath.Base(command)
	if command == self {
		name = selfName
	}
	return strings.Join(append([]string{name}, args...), " ")
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
				if _, err := os.Stat(filepath.Join(dir, "cmd", selfName)); err == nil {
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
		in.AgentName, protocol.Npub(in.Agent.Pubkey), in.AgentCommand,
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
// dataDir (creating the identities if this is the first use). The relay URL is the running
// stack's when one runs on dataDir, else the one relayAddr would give.
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
	if _, err := prepareDataDir(abs); err != nil {
		return err
	}
	ids, err := LoadIdentities(abs)
	if err != nil {
		return err
	}
	url := "http://" + relayAddr
	if r, ok := runningStack(abs); ok {
		url = r.HTTPURL
	}
	fmt.Fprintf(w, "export BUZZ_RELAY_URL=%s\nexport BUZZ_PRIVATE_KEY=%s\n", shellQuote(url), protocol.Nsec(ids.Owner.SecretKey))
	return nil
}
