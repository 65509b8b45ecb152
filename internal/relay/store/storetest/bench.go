package storetest

import (
	"fmt"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/buzz-harness/buzz/internal/relay/store"
)

// Bench measures the relay's hot store paths on a backend: saving a channel message, reading a
// private channel's latest page as a member, and a search. open returns a fresh, empty store.
func Bench(b *testing.B, open func(tb testing.TB) store.Store) {
	a := key{sk: nostr.GeneratePrivateKey()}
	a.pk, _ = nostr.GetPublicKey(a.sk)
	msg := func(i int) *nostr.Event {
		ev := nostr.Event{Kind: 9, CreatedAt: nostr.Timestamp(1000 + i), Content: fmt.Sprintf("message %d about the deploy", i),
			Tags: nostr.Tags{{"h", "c"}}}
		ev.Sign(a.sk)
		return &ev
	}
	setup := func(b *testing.B, n int) store.Store {
		s := open(b)
		if err := s.Update(ctx, func(tx store.Tx) error {
			if err := tx.PutChannel(openChannel("c", true, a.pk)); err != nil {
				return err
			}
			return tx.PutMember("c", a.pk, "owner", 1)
		}); err != nil {
			b.Fatal(err)
		}
		for i := range n {
			if err := save(s, msg(i), "c"); err != nil {
				b.Fatal(err)
			}
		}
		return s
	}
	b.Run("SaveChannelMessage", func(b *testing.B) {
		s := setup(b, 0)
		evs := make([]*nostr.Event, b.N)
		for i := range evs {
			evs[i] = msg(i)
		}
		b.ResetTimer()
		for i := range b.N {
			if err := save(s, evs[i], "c"); err != nil {
				b.Fatal(err)
			}
		}
	})
	read := func(name string, f nostr.Filter) {
		b.Run(name, func(b *testing.B) {
			s := setup(b, 2000)
			b.ResetTimer()
			for range b.N {
				got, err := s.Query(ctx, reader(a.pk, "c"), store.Filter{Filter: f}, 50)
				if err != nil || len(got) != 50 {
					b.Fatalf("%d events, %v", len(got), err)
				}
			}
		})
	}
	read("QueryPrivateChannelPage", nostr.Filter{Kinds: []int{9}, Tags: nostr.TagMap{"h": {"c"}}})
	read("Search", nostr.Filter{Search: "deploy message"})
}
