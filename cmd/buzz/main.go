// Command buzz is the Buzz CLI: channels, messages, users, reactions and canvas over a Buzz
// relay's HTTP bridge. See internal/cli.
//
// Run under the name buzz-mcp (a symlink or copy) it is `buzz mcp`: buzz-acp's --mcp-command
// runs its server with no arguments, so the name has to select the MCP server.
package main

import (
	"os"
	"path/filepath"

	"github.com/buzz-harness/buzz/internal/cli"
)

func main() {
	args := os.Args[1:]
	if filepath.Base(os.Args[0]) == "buzz-mcp" {
		args = append([]string{"mcp"}, args...)
	}
	os.Exit(cli.Main(args, cli.IO{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Env: os.Getenv}))
}
