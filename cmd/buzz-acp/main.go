// Command buzz-acp connects ACP agents to Buzz channels: it listens for @mentions on a relay and
// drives one agent session per channel. See the README for configuration.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/buzz-harness/buzz/internal/harness/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := cli.Command().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "buzz-acp:", err)
		os.Exit(1)
	}
}
