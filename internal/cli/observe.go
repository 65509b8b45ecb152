package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/buzz-harness/buzz/internal/observer/relayframes"
	"github.com/buzz-harness/buzz/internal/protocol"
)

// observeCommand streams the observer frames (kind 24200) the owner's agents send it, decrypted,
// as JSON lines, until interrupted. The key is the owner's (the usual --private-key).
func (a *app) observeCommand() *cobra.Command {
	var agent string
	cmd := &cobra.Command{
		Use:   "observe",
		Short: "Stream your agents' live activity (NIP-AO observer frames), decrypted, as JSON lines",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return a.observe(ctx, agent)
		},
	}
	cmd.Flags().StringVar(&agent, "agent", "", "only this agent's frames (pubkey, hex or npub)")
	return cmd
}

func (a *app) observe(ctx context.Context, agent string) error {
	if _, err := a.bridge(); err != nil { // checks the key and the relay URL as every command does
		return err
	}
	sk, _ := protocol.ParseSecretKey(a.options().PrivateKey)
	var pk string
	var err error
	if agent != "" {
		if pk, err = protocol.ParsePubkey(agent); err != nil {
			return usageError("--agent: %s", err)
		}
	}
	o, err := relayframes.NewOwner(relayframes.OwnerConfig{RelayURL: a.options().RelayURL, OwnerSecret: sk, Agent: pk,
		OnSkip: func(id string, err error) { fmt.Fprintf(a.io.Stderr, "skipped frame %s: %s\n", id, err) }})
	if err != nil {
		return usageError("%s", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- o.Run(ctx) }()
	enc := json.NewEncoder(a.io.Stdout)
	enc.SetEscapeHTML(false)
	// Each line is a relayframes.Frame: the agent, the event's id, then the decrypted frame.
	for fr := range o.Frames() {
		if err := enc.Encode(fr); err != nil {
			cancel()
			<-ran
			return &Error{Category: "error", Message: "write: " + err.Error(), Code: ExitOther}
		}
	}
	err = <-ran
	var closed *relayframes.ClosedError
	switch {
	case err == nil || ctx.Err() != nil:
		return nil
	case errors.As(err, &closed):
		return &Error{Category: "relay_error", Message: closed.Error(), Code: ExitNetwork}
	default:
		return &Error{Category: "network_error", Message: "relay connection: " + err.Error(), Retryable: true, Code: ExitNetwork}
	}
}
