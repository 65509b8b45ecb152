package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/nbd-wtf/go-nostr"
	"github.com/spf13/cobra"

	"github.com/buzz-harness/buzz/internal/client"
	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/buzz-harness/buzz/internal/protocol/observerframe"
)

// observedFrame is one line of `buzz observe`: the decrypted NIP-AO telemetry frame, with the
// agent that sent it and the event carrying it.
type observedFrame struct {
	Agent   string `json:"agent"`
	EventID string `json:"eventId"`
	observerframe.Event
}

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
	b, err := a.bridge() // checks the key and the relay URL as every command does
	if err != nil {
		return err
	}
	sk, _ := protocol.ParseSecretKey(a.options().PrivateKey)
	f := nostr.Filter{Kinds: []int{protocol.KindObserverFrame}, Tags: nostr.TagMap{"p": {b.PublicKey()}}}
	if agent != "" {
		pk, err := protocol.ParsePubkey(agent)
		if err != nil {
			return usageError("--agent: %s", err)
		}
		f.Authors = []string{pk}
	}
	live := client.NewLive(client.LiveConfig{RelayURL: a.options().RelayURL, SecretKey: sk})
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- live.Run(ctx) }()
	live.Subscribe("observe", f)
	enc := json.NewEncoder(a.io.Stdout)
	enc.SetEscapeHTML(false)
	for {
		select {
		case <-ctx.Done():
			<-ran
			return nil
		case err := <-ran:
			if ctx.Err() != nil {
				return nil
			}
			return &Error{Category: "network_error", Message: "relay connection: " + err.Error(), Retryable: true, Code: ExitNetwork}
		case in, ok := <-live.Events():
			if !ok {
				return nil
			}
			if in.Closed != "" {
				return &Error{Category: "relay_error", Message: "relay closed the subscription: " + in.Closed, Code: ExitNetwork}
			}
			if in.Event == nil {
				continue
			}
			e, err := observerframe.OpenTelemetry(sk, in.Event)
			if err != nil {
				fmt.Fprintf(a.io.Stderr, "skipped frame %s: %s\n", in.Event.ID, err)
				continue
			}
			if err := enc.Encode(observedFrame{Agent: in.Event.PubKey, EventID: in.Event.ID, Event: e}); err != nil {
				return &Error{Category: "error", Message: "write: " + err.Error(), Code: ExitOther}
			}
		}
	}
}
