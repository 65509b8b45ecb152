package harness

import "github.com/buzz-harness/buzz/internal/atomicfile"

// Test-only access for package harness_test.

// SetStateWriteOptions makes every state-file rewrite of a harness built from cfg (sessions,
// agents, permission questions) go through opts: tests stall or fail the disk with them.
func SetStateWriteOptions(cfg *Config, opts ...atomicfile.Option) { cfg.stateWriteOpts = opts }
