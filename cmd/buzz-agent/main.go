// Command buzz-agent is Buzz's bundled ACP agent: it answers prompts with an
// OpenAI-compatible or Anthropic model and a shell tool, or in an offline
// echo mode that replies through the buzz CLI. See internal/agent.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/buzz-harness/buzz/internal/agent"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := agent.Main(ctx, version, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
