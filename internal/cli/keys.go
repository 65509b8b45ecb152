package cli

import (
	"context"

	"github.com/buzz-harness/buzz/internal/protocol"
	"github.com/nbd-wtf/go-nostr"
	"github.com/spf13/cobra"
)

type nostrEvent = nostr.Event

func (a *app) keysCommand() *cobra.Command {
	gen := a.leaf("generate", "Generate a new keypair", func(context.Context, *cobra.Command) (any, error) {
		sk := nostr.GeneratePrivateKey()
		pk, err := protocol.PublicKey(sk)
		if err != nil {
			return nil, err
		}
		return map[string]string{
			"pubkey": pk, "npub": protocol.Npub(pk),
			"seckey": sk, "nsec": protocol.Nsec(sk),
		}, nil
	})
	return group("keys", "Key utilities", gen)
}
