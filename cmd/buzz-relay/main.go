// Command buzz-relay runs the Buzz-compatible relay (also `buzz relay`). See internal/relaycmd
// and the README for its flags and environment variables.
package main

import (
	"os"

	"github.com/buzz-harness/buzz/internal/cmdflag"
	"github.com/buzz-harness/buzz/internal/relaycmd"
)

func main() { os.Exit(cmdflag.Main(relaycmd.Command())) }
