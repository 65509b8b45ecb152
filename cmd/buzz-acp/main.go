// Command buzz-acp connects ACP agents to Buzz channels (also `buzz acp`): it listens for
// @mentions on a relay and drives one agent session per channel. See internal/acpcmd and the
// README for its flags and environment variables.
package main

import (
	"os"

	"github.com/buzz-harness/buzz/internal/acpcmd"
	"github.com/buzz-harness/buzz/internal/cmdflag"
)

func main() { os.Exit(cmdflag.Main(acpcmd.Command())) }
