package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/buzz-harness/buzz/internal/agent/provider"
)

// Tool names offered to models.
const (
	toolShell     = "shell"
	toolReadFile  = "read_file"
	toolWriteFile = "write_file"
)

// toolDefs are the tools a model provider sees.
var toolDefs = []provider.Tool{
	{
		Name: toolShell,
		Description: "Run a shell command (sh -c) in the session's working directory and return its combined " +
			"stdout/stderr and exit code. Use it to run the `buzz` CLI, e.g. `buzz messages send --channel <uuid> " +
			"--reply-to <event-id> --content \"...\"`. The user is asked for permission first.",
		Schema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"command":         map[string]any{"type": "string", "description": "the command line"},
				"timeout_seconds": map[string]any{"type": "integer", "description": "optional timeout, default 120"},
			},
			"required": []string{"command"},
		},
	},
	{
		Name:        toolReadFile,
		Description: "Read a text file (path absolute or relative to the working directory).",
		Schema: map[string]any{
			"type":       "object",
			"properties": map[string]any{"path": map[string]any{"type": "string"}},
			"required":   []string{"path"},
		},
	},
	{
		Name:        toolWriteFile,
		Description: "Create or overwrite a text file (path absolute or relative to the working directory). The user is asked for permission first.",
		Schema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"path":    map[string]any{"type": "string"},
				"content": map[string]any{"type": "string"},
			},
			"required": []string{"path", "content"},
		},
	},
}

type shellInput struct {
	Command        string `json:"command"`
	TimeoutSeconds int    `json:"timeout_seconds"`
}

type readInput struct {
	Path string `json:"path"`
}

type writeInput struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

// toolMeta is how a call is shown to the client: title, ACP tool kind, and
// whether it needs the user's permission.
func toolMeta(call provider.ToolCall) (title, kind string, needsPermission bool, err error) {
	switch call.Name {
	case toolShell:
		var in shellInput
		if err := json.Unmarshal(call.Input, &in); err != nil || strings.TrimSpace(in.Command) == "" {
			return "shell", "execute", false, errors.New(`shell needs {"command": "<text>"}`)
		}
		return in.Command, "execute", true, nil
	case toolReadFile:
		var in readInput
		if err := json.Unmarshal(call.Input, &in); err != nil || in.Path == "" {
			return "read_file", "read", false, errors.New(`read_file needs {"path": "<file>"}`)
		}
		return "Read " + in.Path, "read", false, nil
	case toolWriteFile:
		var in writeInput
		if err := json.Unmarshal(call.Input, &in); err != nil || in.Path == "" {
			return "write_file", "edit", false, errors.New(`write_file needs {"path": "<file>", "content": "<text>"}`)
		}
		return "Write " + in.Path, "edit", true, nil
	}
	return call.Name, "other", false, fmt.Errorf("unknown tool %q (available: shell, read_file, write_file)", call.Name)
}

// toolRunner executes tools for one session.
type toolRunner struct {
	cwd          string
	env          []string
	shellTimeout time.Duration
	maxOutput    int
}

// run executes a validated call. The returned text goes back to the model;
// isErr marks a failed call.
func (r toolRunner) run(ctx context.Context, call provider.ToolCall) (text string, isErr bool) {
	switch call.Name {
	case toolShell:
		var in shellInput
		_ = json.Unmarshal(call.Input, &in)
		timeout := r.shellTimeout
		if in.TimeoutSeconds > 0 {
			timeout = time.Duration(in.TimeoutSeconds) * time.Second
		}
		res := runCommand(ctx, r.cwd, r.env, nil, timeout, r.maxOutput, "sh", "-c", in.Command)
		return res.String(), res.Failed()
	case toolReadFile:
		var in readInput
		_ = json.Unmarshal(call.Input, &in)
		b, err := os.ReadFile(r.abs(in.Path))
		if err != nil {
			return err.Error(), true
		}
		if len(b) > r.maxOutput {
			return string(b[:r.maxOutput]) + fmt.Sprintf("\n[truncated: file has %d bytes, showing the first %d]", len(b), r.maxOutput), false
		}
		return string(b), false
	case toolWriteFile:
		var in writeInput
		_ = json.Unmarshal(call.Input, &in)
		p := r.abs(in.Path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err.Error(), true
		}
		if err := os.WriteFile(p, []byte(in.Content), 0o644); err != nil {
			return err.Error(), true
		}
		return fmt.Sprintf("wrote %d bytes to %s", len(in.Content), p), false
	}
	return "unknown tool " + call.Name, true
}

func (r toolRunner) abs(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(r.cwd, p)
}

// lookPathIn finds name on the PATH of env (not of this process, which
// may differ when a caller gives tools their own environment). A name with
// a slash, or one not found, is returned unchanged.
func lookPathIn(name string, env []string) string {
	if strings.Contains(name, "/") {
		return name
	}
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	return name
}

// cmdResult is the outcome of a child process.
type cmdResult struct {
	Output    string
	Truncated int // bytes dropped by the cap
	ExitCode  int
	TimedOut  bool
	Cancelled bool
	Err       error // could not start, or killed
}

// Failed reports whether the command did not succeed.
func (c cmdResult) Failed() bool {
	return c.Err != nil || c.ExitCode != 0 || c.TimedOut || c.Cancelled
}

// String renders the result for a model or a console.
func (c cmdResult) String() string {
	var b strings.Builder
	b.WriteString(c.Output)
	if c.Output != "" && !strings.HasSuffix(c.Output, "\n") {
		b.WriteByte('\n')
	}
	if c.Truncated > 0 {
		fmt.Fprintf(&b, "[output truncated: %d more bytes not shown]\n", c.Truncated)
	}
	switch {
	case c.TimedOut:
		b.WriteString("[timed out; process killed]")
	case c.Cancelled:
		b.WriteString("[cancelled; process killed]")
	case c.Err != nil:
		fmt.Fprintf(&b, "[error: %v]", c.Err)
	default:
		b.WriteString("[exit code: " + strconv.Itoa(c.ExitCode) + "]")
	}
	return b.String()
}

// runCommand runs argv in its own process group with a timeout and a cap
// on combined output. Stdin is stdin or empty; never the agent's own stdin,
// which carries ACP.
func runCommand(ctx context.Context, dir string, env []string, stdin []byte, timeout time.Duration, maxOutput int, name string, args ...string) cmdResult {
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(tctx, name, args...)
	cmd.Dir = dir
	cmd.Env = env
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	out := &cappedBuffer{max: maxOutput}
	cmd.Stdout, cmd.Stderr = out, out
	// Own process group so a timeout kills grandchildren too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	err := cmd.Run()
	res := cmdResult{Output: out.buf.String(), Truncated: out.dropped}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		res.Cancelled = true
	case errors.Is(tctx.Err(), context.DeadlineExceeded):
		res.TimedOut = true
	case errors.As(err, &ee):
		res.ExitCode = ee.ExitCode()
	case err != nil:
		res.Err = err
	}
	return res
}

// cappedBuffer keeps the first max bytes and counts the rest.
type cappedBuffer struct {
	buf     bytes.Buffer
	max     int
	dropped int
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	room := c.max - c.buf.Len()
	if room >= len(p) {
		return c.buf.Write(p)
	}
	if room > 0 {
		c.buf.Write(p[:room])
	}
	c.dropped += len(p) - max(room, 0)
	return len(p), nil
}
