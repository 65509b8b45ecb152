// Command buzz is the Buzz CLI: channels, messages, users, reactions and canvas over a Buzz
// relay's HTTP bridge. See internal/cli.
package main

import (
	"os"

	"github.com/buzz-harness/buzz/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], cli.IO{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Env: os.Getenv}))
}
