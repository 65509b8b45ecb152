package testbin

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/buzz-harness/buzz/internal/testwait"
)

// Output collects a subprocess's stdout and stderr; tests read it while the process runs.
type Output struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.Write(p)
}

func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}

// Lines returns the lines written so far that contain substr, e.g. "level=WARN" for a slog
// text handler's warnings.
func (o *Output) Lines(substr string) []string {
	var out []string
	for line := range strings.Lines(o.String()) {
		if strings.Contains(line, substr) {
			out = append(out, strings.TrimSuffix(line, "\n"))
		}
	}
	return out
}

// WaitLines waits until n lines written so far contain substr, failing t after timeout.
func (o *Output) WaitLines(t testing.TB, substr string, n int, timeout time.Duration) {
	t.Helper()
	testwait.Eventually(t, timeout, func() bool { return len(o.Lines(substr)) >= n }, fmt.Sprintf("%d lines with %q", n, substr))
}
