// Command buzz-agent is Buzz's bundled ACP agent (also `buzz agent`): it answers prompts with an
// OpenAI-compatible or Anthropic model and a shell tool, or in an offline echo mode that replies
// through the buzz CLI. See internal/agent.
package main

import (
	"os"

	"github.com/buzz-harness/buzz/internal/agent"
	"github.com/buzz-harness/buzz/internal/cmdflag"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() { os.Exit(cmdflag.Main(agent.Command(version))) }
