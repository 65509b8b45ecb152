package acp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// SpawnConfig describes an agent subprocess.
type SpawnConfig struct {
	Command string
	Args    []string
	Env     []string  // nil = inherit the harness environment
	Dir     string    // working directory
	Stderr  io.Writer // receives the agent's stderr one whole line per Write; nil = discarded
	Client  ClientConfig
}

// Process is a spawned agent with a Client on its stdio.
type Process struct {
	*Client
	cmd     *exec.Cmd
	stdin   *os.File
	exited  chan struct{}
	waitErr error
}

// Timings of the shutdown ladder (variables so tests can shorten them).
var (
	closeEOFWait   = 2 * time.Second
	closeTermWait  = 2 * time.Second
	reapWait       = 5 * time.Second
	drainAfterExit = 500 * time.Millisecond
)

// Spawn starts the agent in its own process group (so it and anything it starts can be killed
// together). ctx bounds only the start, not the process lifetime.
func Spawn(ctx context.Context, cfg SpawnConfig) (*Process, error) {
	if cfg.Command == "" {
		return nil, errors.New("acp: spawn: empty agent command")
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("acp: spawn %s: %w", cfg.Command, err)
	}
	cmd := exec.Command(cfg.Command, cfg.Args...)
	cmd.Env = cfg.Env
	cmd.Dir = cfg.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}

	// Plain os.Pipes (not Cmd.*Pipe) so Wait never closes our read ends before we drained them.
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("acp: spawn: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW)
		return nil, fmt.Errorf("acp: spawn: %w", err)
	}
	var errR, errW *os.File
	if cfg.Stderr != nil {
		if errR, errW, err = os.Pipe(); err != nil {
			closeAll(inR, inW, outR, outW)
			return nil, fmt.Errorf("acp: spawn: %w", err)
		}
		cmd.Stderr = errW
	}
	cmd.Stdin, cmd.Stdout = inR, outW
	if err := cmd.Start(); err != nil {
		closeAll(inR, inW, outR, outW, errR, errW)
		return nil, fmt.Errorf("acp: spawn %s: %w", cfg.Command, err)
	}
	closeAll(inR, outW, errW) // the child holds its own copies
	if errR != nil {
		go copyLines(errR, cfg.Stderr)
	}
	p := &Process{cmd: cmd, stdin: inW, exited: make(chan struct{})}
	p.Client = NewClient(outR, inW, cfg.Client)
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
		// Normally stdout hits EOF right away; if a stray grandchild still holds it, stop
		// reading anyway so callers see the exit.
		t := time.NewTimer(drainAfterExit)
		defer t.Stop()
		select {
		case <-p.Client.Done():
		case <-t.C:
			_ = p.Client.Close()
		}
	}()
	return p, nil
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		if f != nil {
			_ = f.Close()
		}
	}
}

// copyLines forwards stderr line by line (no cap) so each Write is one log line.
func copyLines(r io.ReadCloser, w io.Writer) {
	defer r.Close()
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			_, _ = w.Write(line)
		}
		if err != nil {
			return
		}
	}
}

// Pid is the agent's pid (also its process group id).
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited is closed once the agent process has been reaped.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// ExitErr is the process's exit status (nil for exit 0); valid after Exited.
func (p *Process) ExitErr() error {
	select {
	case <-p.exited:
		return p.waitErr
	default:
		return nil
	}
}

func (p *Process) signalGroup(sig syscall.Signal) {
	// Negative pid = the whole group; ESRCH just means everyone is gone already.
	_ = syscall.Kill(-p.cmd.Process.Pid, sig)
}

func (p *Process) waitExit(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.exited:
		return true
	case <-t.C:
		return false
	}
}

// Abort SIGKILLs the whole process group and closes the connection, without waiting for the agent
// to be reaped (Exited is closed once it is): for callers that must not block, the harness loop.
func (p *Process) Abort() {
	p.signalGroup(syscall.SIGKILL)
	_ = p.Client.Close()
}

// Kill SIGKILLs the whole process group and reaps the agent.
func (p *Process) Kill() error {
	p.signalGroup(syscall.SIGKILL)
	ok := p.waitExit(reapWait)
	_ = p.Client.Close()
	if !ok {
		return fmt.Errorf("acp: agent pid %d not reaped within %s", p.Pid(), reapWait)
	}
	return nil
}

// Close shuts the agent down politely: close stdin, wait, SIGTERM the group, wait, SIGKILL the
// group. Leftover group members are killed even when the agent itself exits on EOF.
func (p *Process) Close() error {
	_ = p.stdin.Close()
	if !p.waitExit(closeEOFWait) {
		p.signalGroup(syscall.SIGTERM)
		if !p.waitExit(closeTermWait) {
			return p.Kill()
		}
	}
	p.signalGroup(syscall.SIGKILL)
	_ = p.Client.Close()
	return nil
}
