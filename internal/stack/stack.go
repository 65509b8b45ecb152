// Package stack is `buzz up`: the relay, the harness and the web console in this process, the
// agent as the harness's child, all sharing one data directory that keeps the agent's identity,
// the relay database and the harness's session store across restarts. The owner's key and the
// console token live apart, in an owner dir outside the agent's working directory (ownerdir.go).
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
	"github.com/buzz-harness/buzz/internal/opshttp"
	"github.com/buzz-harness/buzz/internal/prompt"
	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/protocol/ownerauth"
	"github.com/buzz-harness/buzz/internal/relay"
	"github.com/buzz-harness/buzz/internal/relaycmd"
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
	DataDir string // default ./.buzz
	// OwnerDir keeps the owner key and running.json (with the console token), 0700; default
	// DefaultOwnerDir(DataDir). It may not overlap the data dir or the agent's working directory.
	OwnerDir    string
	RelayAddr   string // host:port for the relay; default 127.0.0.1:3000
	ConsoleAddr string // loopback host:port for the console; default 127.0.0.1:3001
	// MetricsAddr, when set, serves the relay's Prometheus metrics at /metrics, the harness's at
	// /metrics/acp and the relay's /healthz and /readyz; a bare :port is loopback.
	MetricsAddr string
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
	MetricsURL   string // http://…/metrics, when Config.MetricsAddr is set
	HTTPURL      string // http://… (what the CLI's BUZZ_RELAY_URL gets)
	ConsoleURL   string // with its token
	DataDir      string
	OwnerDir     string
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

// Files in the data dir besides its key, state (stack.json) and the parts' own directories; and
// running.json, in the owner dir.
const (
	lockFile    = "buzz-up.lock" // held while a stack runs on this data dir
	runningFile = "running.json" // the running stack's addresses and console URL, for --print-env
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
	if c.OwnerDir == "" {
		if c.OwnerDir, err = DefaultOwnerDir(abs); err != nil {
			return fail("cannot find your config directory for the owner key (%v): set XDG_CONFIG_HOME or pass --owner-dir", err)
		}
	}
	if c.OwnerDir, err = filepath.Abs(c.OwnerDir); err != nil {
		return fail("owner dir %s: %v", c.OwnerDir, err)
	}
	if c.RelayAddr == "" {
		c.RelayAddr = DefaultRelayAddr
	}
	if c.ConsoleAddr == "" {
		c.ConsoleAddr = DefaultConsoleAddr
	}
	if c.AgentName == "" {
		c.AgentName = DefaultAgentName
	}
	if _, perr := harness.ParsePermissions(c.Permissions); perr != nil {
		return fail("%v", perr)
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
// Everything that can be refused quickly (the owner dir's place, the agent command, both ports,
// the data dir and its lock) is checked before anything is created, and a start that fails
// removes a data dir (and owner dir) it created, so a mistake leaves nothing behind.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.defaults(); err != nil {
		return err
	}
	if err := checkOwnerDir(cfg.OwnerDir, cfg.DataDir, cfg.AgentCwd); err != nil {
		return err
	}
	s := &starting{cfg: cfg, td: teardown{out: cfg.Out}}
	defer s.td.unwind()
	for _, step := range []func(context.Context) error{
		s.findAgent,
		s.openPorts,
		s.openDataDir,
		s.linkCommands,
		s.openLog,
		s.startRelay,
		s.setUp,
		s.startParts,
	} {
		if err := step(ctx); err != nil {
			return err
		}
	}
	return s.serve(ctx)
}

// starting is a stack on its way up: what Run's steps have found and opened so far (info fills
// in as they go), and the teardown that undoes it.
type starting struct {
	cfg Config
	td  teardown

	exe                 string // this program
	agentCmd            string // "" until linkCommands: this program's `agent`
	agentArgs, agentEnv []string
	relayLn, consoleLn  net.Listener
	metricsLn           net.Listener // nil without MetricsAddr
	relay               *relay.Relay
	ids                 Identities
	self, mcpCommand    string // bin/buzz and bin/buzz-mcp ("" with NoMCP)
	cliDir              string
	logger              *slog.Logger
	info                Info
	boot                booted
	harness             *task
}

// findAgent finds this executable and a custom agent command.
func (s *starting) findAgent(context.Context) error {
	exe, err := os.Executable()
	if err != nil {
		return fail("cannot find this program's executable: %v", err)
	}
	s.exe = exe
	s.agentCmd, s.agentArgs, err = resolveAgent(s.cfg)
	s.agentEnv = s.cfg.AgentEnv
	return err
}

// openPorts listens on the relay's and the console's ports, saying which one is taken.
func (s *starting) openPorts(context.Context) error {
	ln, err := listen("relay", s.cfg.RelayAddr, "--relay-addr")
	if err != nil {
		return err
	}
	s.relayLn = ln
	s.td.add(func() { ln.Close() }, "") // the relay's Serve closes it too, once it runs
	if ln, err = console.Listen(s.cfg.ConsoleAddr); err != nil {
		if errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), "in use") {
			return fail("console port %s is already in use (pass --console-addr 127.0.0.1:PORT)", s.cfg.ConsoleAddr)
		}
		return fail("%v", err)
	}
	s.consoleLn = ln
	s.td.add(func() { ln.Close() }, "")
	if s.cfg.MetricsAddr == "" {
		return nil
	}
	if !opshttp.CheckAddr(s.cfg.MetricsAddr) {
		return fail("--metrics-addr %q is not host:port or :port", s.cfg.MetricsAddr)
	}
	if ln, err = listen("metrics", opshttp.ListenAddr(s.cfg.MetricsAddr), "--metrics-addr"); err != nil {
		return err
	}
	s.metricsLn = ln
	s.td.add(func() { ln.Close() }, "")
	return nil
}

// openDataDir creates or checks the data dir, takes its lock and loads the identities. A data
// dir this start created is removed again if the stack never comes up, and so is an owner dir
// made for it.
func (s *starting) openDataDir(context.Context) error {
	dir, ownerDir := s.cfg.DataDir, s.cfg.OwnerDir
	created, err := prepareDataDir(dir)
	if err != nil {
		return err
	}
	if created != "" {
		ownerCreated := missingTop(ownerDir)
		s.td.add(func() {
			if !s.td.up {
				os.RemoveAll(created) // a failed first start leaves no half-made data dir
				if ownerCreated != "" {
					os.RemoveAll(ownerCreated) // nor an owner key for it
				}
			}
		}, "")
	}
	lock, err := lockDataDir(dir)
	if err != nil {
		return err
	}
	s.td.add(func() { lock.Unlock() }, "")
	// An older buzz up kept running.json in the data dir; with the lock held, none runs here.
	os.Remove(filepath.Join(dir, runningFile))
	if created != "" {
		fmt.Fprintf(s.cfg.Out, "buzz up: first start in %s: creating the agent identity there and the owner's in %s\n", dir, ownerDir)
	} else {
		fmt.Fprintf(s.cfg.Out, "buzz up: starting from %s (owner key in %s)\n", dir, ownerDir)
	}
	s.ids, err = LoadIdentities(dir, ownerDir, s.cfg.Out)
	s.info.DataDir, s.info.OwnerDir, s.info.Owner, s.info.Agent = dir, ownerDir, s.ids.Owner, s.ids.Agent
	return err
}

// linkCommands links bin/buzz (and bin/buzz-mcp) in the data dir to this executable. The agent
// runs bin/buzz: a path that stays the same across restarts (even under `go run`, whose
// executable moves every time), so the harness resumes its sessions, and a directory holding
// `buzz` to put first on the agent's PATH for its replies.
func (s *starting) linkCommands(context.Context) error {
	var err error
	if s.self, err = linkSelf(s.cfg.DataDir, s.exe); err != nil {
		return err
	}
	if !s.cfg.NoMCP {
		if s.mcpCommand, err = linkAs(s.cfg.DataDir, s.exe, mcpName); err != nil {
			return err
		}
	}
	if s.cliDir = s.cfg.BuzzCLIDir; s.cliDir == "" {
		s.cliDir = filepath.Dir(s.self)
	}
	if s.agentCmd == "" {
		s.agentCmd, s.agentArgs = s.self, append([]string{"agent"}, s.agentArgs...)
		s.agentEnv = append([]string{"BUZZ_AGENT_STATE_DIR=" + filepath.Join(s.cfg.DataDir, "agent")}, s.agentEnv...)
	}
	s.info.AgentCommand, s.info.CLI = commandLabel(s.agentCmd, s.agentArgs, s.self), cliCommand()
	return nil
}

// openLog opens buzz.log in the data dir, where every part logs.
func (s *starting) openLog(context.Context) error {
	path := filepath.Join(s.cfg.DataDir, "buzz.log")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fail("data dir %s: cannot write its log: %v", s.cfg.DataDir, err)
	}
	s.td.add(func() { f.Close() }, "")
	s.logger = slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelInfo}))
	s.info.LogFile = path
	return nil
}

// startRelay opens the relay database and serves it. It outlives ctx: it stops last, after the
// harness and the console.
func (s *starting) startRelay(ctx context.Context) error {
	fmt.Fprintf(s.cfg.Out, "buzz up: starting the relay on %s\n", s.relayLn.Addr())
	rl, err := relay.Open(relay.Config{DataDir: filepath.Join(s.cfg.DataDir, "relay"), Logger: s.logger.With("part", "relay")})
	if err != nil {
		return fail("relay: %v", err)
	}
	s.relay = rl
	addr := s.relayLn.Addr().String()
	s.info.RelayURL, s.info.HTTPURL = "ws://"+addr, "http://"+addr
	ln := s.relayLn
	t := goTask(context.WithoutCancel(ctx), func(ctx context.Context) error { return relay.Serve(ctx, ln, rl) })
	s.td.add(func() { t.stop() }, "buzz up: stopped the relay; everything is kept in "+s.cfg.DataDir)
	return nil
}

// setUp makes sure the relay has #general and the profiles.
func (s *starting) setUp(ctx context.Context) error {
	fmt.Fprintln(s.cfg.Out, "buzz up: setting up #general and the profiles")
	bctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	boot, err := bootstrap(bctx, s.info.HTTPURL, s.cfg.DataDir, s.ids, s.cfg.AgentName)
	if err != nil {
		if ctx.Err() != nil {
			s.td.unwind() // now, to say so once the relay has stopped; Run's unwind finds nothing left
			fmt.Fprintln(s.cfg.Out, "buzz up: interrupted during setup; relay stopped")
			return ctx.Err()
		}
		return fail("setting up the data dir: %v", err)
	}
	s.boot, s.info.ChannelID, s.info.AgentName = boot, boot.ChannelID, boot.AgentName
	return nil
}

// startParts builds the harness and the console, records the running stack for --print-env,
// starts the console and then the harness, and prints the banner: the stack is up.
func (s *starting) startParts(ctx context.Context) error {
	bus := observer.NewBus(2000)
	h, err := harness.New(s.harnessConfig(bus))
	if err != nil {
		return fail("harness: %v", err)
	}
	con, err := console.New(console.Config{RelayURL: s.info.HTTPURL, OwnerKey: s.ids.Owner.SecretKey, AgentPubkey: s.ids.Agent.Pubkey, HomeChannel: s.boot.ChannelID, Bus: bus, Logger: s.logger.With("part", "console"),
		SecretKeys: []string{s.ids.Owner.SecretKey, s.ids.Agent.SecretKey}})
	if err != nil {
		return fail("console: %v", err)
	}
	s.info.ConsoleURL = con.URL(s.consoleLn.Addr().String())
	if err := writeRunning(s.cfg.OwnerDir, s.info); err != nil {
		return fail("owner dir %s: %v", s.cfg.OwnerDir, err)
	}
	s.td.add(func() { removeRunning(s.cfg.OwnerDir, s.cfg.DataDir) }, "")
	ln := s.consoleLn
	consoleTask := goTask(context.WithoutCancel(ctx), func(ctx context.Context) error { return console.Serve(ctx, ln, con) })
	s.td.add(func() { consoleTask.stop() }, "buzz up: stopped the console")

	if s.metricsLn != nil {
		mux := relaycmd.OpsHandler(s.relay)
		mux.Handle("GET /metrics/acp", h.MetricsHandler())
		s.info.MetricsURL = "http://" + s.metricsLn.Addr().String() + "/metrics"
		stop := opshttp.Serve(s.metricsLn, mux, "buzz up: metrics", s.cfg.Out)
		s.td.add(stop, "")
	}
	fmt.Fprintf(s.cfg.Out, "buzz up: starting the agent (%s)\n", s.info.AgentCommand)
	s.harness = goTask(ctx, h.Run)
	s.td.add(func() { s.harness.stop() }, "buzz up: stopped the harness and the agent ("+s.info.AgentCommand+")")

	printBanner(s.cfg.Out, s.info)
	s.td.up = true
	if s.cfg.Ready != nil {
		s.cfg.Ready(s.info)
	}
	return nil
}

func (s *starting) harnessConfig(bus *observer.Bus) harness.Config {
	return harness.Config{
		RelayURL:            s.info.RelayURL,
		SecretKey:           s.ids.Agent.SecretKey,
		Owner:               s.ids.Owner.Pubkey,
		HomeChannel:         s.boot.ChannelID,
		AgentCommand:        s.agentCmd,
		AgentArgs:           s.agentArgs,
		AgentCwd:            s.cfg.AgentCwd,
		AgentEnv:            append(slices.Clip(s.agentEnv), ownerauth.EnvVar+"="+s.boot.AuthTag),
		BuzzCLIDir:          s.cliDir,
		SessionTitle:        s.info.AgentName,
		BasePrompt:          prompt.DefaultBasePrompt(),
		SystemPrompt:        s.cfg.SystemPrompt,
		TeamInstructions:    s.cfg.TeamInstructions,
		SessionPolicy:       s.cfg.SessionPolicy,
		Permissions:         harness.Permissions(s.cfg.Permissions),
		Memory:              true,
		StateDir:            filepath.Join(s.cfg.DataDir, "harness"),
		Logger:              s.logger.With("part", "harness"),
		Observer:            bus,
		Version:             "buzz-up",
		RespondTo:           harness.RespondOwnerOnly,
		ContextMessageLimit: acpcmd.DefaultContextMessageLimit,
		// Published at every start, so an older data dir converges too.
		ChannelAddPolicy: client.AddPolicyOwnerOnly,
		AuthTag:          s.boot.AuthTag,
		MCPCommand:       s.mcpCommand,
	}
}

// serve waits for ctx to end, or for the harness to stop by itself (the owner's !shutdown, or
// a fatal error), and stops the harness; Run's teardown stops the rest.
func (s *starting) serve(ctx context.Context) error {
	select {
	case <-ctx.Done():
		fmt.Fprintln(s.cfg.Out, "\nbuzz up: stopping")
	case <-s.harness.done:
		// The owner's !shutdown, or a fatal harness error: stop the rest too.
	}
	err := s.harness.stop()
	if err != nil && errors.Is(err, context.Canceled) && ctx.Err() != nil {
		// A harness stopped while it was still starting returns its context's error: a stop
		// asked for, not a failure.
		err = nil
	}
	if err != nil {
		return fail("harness stopped: %v", err)
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
		created = missingTop(dir)
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

// running is what runningFile, in the owner dir, records while a stack runs. It names its data
// dir, so an owner dir shared by two data dirs (--owner-dir) is not misread.
type running struct {
	PID        int    `json:"pid"`
	DataDir    string `json:"dataDir"`
	RelayURL   string `json:"relayURL"`
	HTTPURL    string `json:"httpURL"`
	ConsoleURL string `json:"consoleURL"`
}

func writeRunning(ownerDir string, in Info) error {
	b, _ := json.MarshalIndent(running{PID: os.Getpid(), DataDir: in.DataDir, RelayURL: in.RelayURL, HTTPURL: in.HTTPURL, ConsoleURL: in.ConsoleURL}, "", "  ")
	return atomicfile.WriteFile(filepath.Join(ownerDir, runningFile), append(b, '\n'), 0o600)
}

// removeRunning removes this process's record, leaving another stack's alone.
func removeRunning(ownerDir, dataDir string) {
	path := filepath.Join(ownerDir, runningFile)
	var r running
	if b, err := os.ReadFile(path); err == nil && json.Unmarshal(b, &r) == nil && r.PID == os.Getpid() && r.DataDir == dataDir {
		os.Remove(path)
	}
}

// runningStack returns the record of the stack running on dataDir, if one is: the record is
// trusted only while its writer still holds the data dir's lock (a crash leaves a stale file).
func runningStack(dataDir, ownerDir string) (running, bool) {
	var r running
	b, err := os.ReadFile(filepath.Join(ownerDir, runningFile))
	if err != nil || json.Unmarshal(b, &r) != nil || r.HTTPURL == "" || r.DataDir != dataDir {
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
  keys     agent %s, owner %s (mode 0600; the owner's is outside the agent's working directory)
  log      %s

Talk to the agent from a shell:
  export BUZZ_RELAY_URL=%s BUZZ_PRIVATE_KEY=$(cat %s)
  %s messages send --channel %s --content "@%s hello"
`,
		in.RelayURL, in.ConsoleURL,
		in.AgentName, protocol.Npub(in.Agent.Pubkey), in.AgentCommand,
		protocol.Npub(in.Owner.Pubkey),
		in.Agent.KeyFile, in.Owner.KeyFile, in.LogFile,
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
// cfg.DataDir, whose key is in cfg.OwnerDir (creating the identities if this is the first use;
// cfg.Out hears of a moved owner key). The relay URL is the running stack's when one runs on the
// data dir, else the one cfg.RelayAddr would give.
func PrintEnv(w io.Writer, cfg Config) error {
	if err := cfg.defaults(); err != nil {
		return err
	}
	if err := checkOwnerDir(cfg.OwnerDir, cfg.DataDir, ""); err != nil {
		return err
	}
	if _, err := prepareDataDir(cfg.DataDir); err != nil {
		return err
	}
	ids, err := LoadIdentities(cfg.DataDir, cfg.OwnerDir, cfg.Out)
	if err != nil {
		return err
	}
	url := "http://" + cfg.RelayAddr
	if r, ok := runningStack(cfg.DataDir, cfg.OwnerDir); ok {
		url = r.HTTPURL
	}
	fmt.Fprintf(w, "export BUZZ_RELAY_URL=%s\nexport BUZZ_PRIVATE_KEY=%s\n", shellQuote(url), protocol.Nsec(ids.Owner.SecretKey))
	return nil
}
