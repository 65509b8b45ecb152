package stack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/buzz-harness/buzz/internal/console"
	"github.com/buzz-harness/buzz/internal/protocol"
)

// ConsoleOnly configures RunConsoleOnly: `buzz up --console-only`, the web console for an
// agent whose harness runs elsewhere (another machine, another buzz up).
type ConsoleOnly struct {
	RelayURL    string // the relay the agent's harness uses
	OwnerKey    string // hex: the agent's owner, who posts, reads its frames and controls it
	Agent       string // hex pubkey of the agent
	ConsoleAddr string // loopback host:port; default 127.0.0.1:3001
	Out         io.Writer
	Logger      *slog.Logger
	Ready       func(consoleURL string) // called once the console listens (tests)
}

// RunConsoleOnly serves the console until ctx ends: chat as the owner, and the Activity view
// and Stop/model controls over the agent's NIP-AO frames. It starts no relay and no harness;
// the agent's harness must run with the relay observer on (the default when it knows its
// owner) and the relay must know the owner (the agent's NIP-OA attestation).
func RunConsoleOnly(ctx context.Context, c ConsoleOnly) error {
	if c.ConsoleAddr == "" {
		c.ConsoleAddr = DefaultConsoleAddr
	}
	if c.Out == nil {
		c.Out = io.Discard
	}
	if c.Agent == "" {
		return fail("--console-only needs --agent (the agent's npub or hex pubkey)")
	}
	con, err := console.New(console.Config{RelayURL: c.RelayURL, OwnerKey: c.OwnerKey, AgentPubkey: c.Agent,
		Logger: c.Logger, SecretKeys: []string{c.OwnerKey}})
	if err != nil {
		return fail("console: %v", err)
	}
	ln, err := console.Listen(c.ConsoleAddr)
	if err != nil {
		return fail("%v (pass --console-addr 127.0.0.1:PORT)", err)
	}
	url := con.URL(ln.Addr().String())
	owner, _ := protocol.PublicKey(c.OwnerKey)
	fmt.Fprintf(c.Out, `buzz up: console only — Ctrl-C stops it
  console  %s
  relay    %s
  agent    %s
  owner    %s  (you)
`, url, c.RelayURL, protocol.Npub(c.Agent), protocol.Npub(owner))
	if c.Ready != nil {
		c.Ready(url)
	}
	err = console.Serve(ctx, ln, con)
	fmt.Fprintln(c.Out, "\nbuzz up: stopped the console")
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return err
}
